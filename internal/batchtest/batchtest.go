// Package batchtest builds real Kafka v2 record batches for tests: records
// encoded with kmsg, compressed with franz-go's compressors, CRC-32C
// computed as a producer does. It is for tests only.
package batchtest

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// Record is one record to put in a batch. Nil and empty keys, values and
// header values stay distinct, as on the wire.
type Record struct {
	Key, Value []byte
	Headers    []kmsg.Header
	// TimestampDelta is added to the batch's BaseTimestamp, ms.
	TimestampDelta int64
}

// Options are the batch header fields a producer chooses.
type Options struct {
	// Codec is one of batch.Codec*.
	Codec int8
	// BaseTimestamp is the first record's timestamp, ms.
	BaseTimestamp int64
	// ProducerID −1 (the default when zero-valued Options are passed
	// through Make) means not idempotent.
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	// ExtraAttributes are ORed into attributes (e.g. transactional bits,
	// for tests of rejection).
	ExtraAttributes int16
}

// Plain returns Options for a non-idempotent, uncompressed batch at ts.
func Plain(ts int64) Options {
	return Options{BaseTimestamp: ts, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
}

var codecs = map[int8]kgo.CompressionCodec{
	batch.CodecGzip:   kgo.GzipCompression(),
	batch.CodecSnappy: kgo.SnappyCompression(),
	batch.CodecLZ4:    kgo.Lz4Compression(),
	batch.CodecZstd:   kgo.ZstdCompression(),
}

// Make returns a complete, valid record batch (base offset 0) holding recs.
func Make(o Options, recs ...Record) []byte {
	if len(recs) == 0 {
		panic("batchtest: a batch needs at least one record")
	}
	var raw []byte
	maxTS := o.BaseTimestamp
	for i, r := range recs {
		rec := kmsg.Record{
			TimestampDelta64: r.TimestampDelta,
			OffsetDelta:      int32(i),
			Key:              r.Key,
			Value:            r.Value,
			Headers:          r.Headers,
		}
		// Length counts the bytes after itself: encode once to learn it.
		body := rec.AppendTo(nil)
		rec.Length = int32(len(body) - 1) // a zero Length encodes as one byte
		raw = rec.AppendTo(raw)
		maxTS = max(maxTS, o.BaseTimestamp+r.TimestampDelta)
	}
	attrs := int16(o.Codec) | o.ExtraAttributes
	if o.Codec != batch.CodecNone {
		raw = Compress(o.Codec, raw)
	}
	b := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       o.BaseTimestamp,
		MaxTimestamp:         maxTS,
		ProducerID:           o.ProducerID,
		ProducerEpoch:        o.ProducerEpoch,
		FirstSequence:        o.BaseSequence,
		NumRecords:           int32(len(recs)),
		Records:              raw,
	}
	b.Length = int32(batch.HeaderSize - 12 + len(raw))
	out := b.AppendTo(nil)
	h := batch.Header(out)
	h.UpdateCRC()
	return out
}

// Values returns n records whose values are "<prefix>-<i>" and keys "k<i>".
func Values(prefix string, n int) []Record {
	rs := make([]Record, n)
	for i := range rs {
		rs[i] = Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%s-%d", prefix, i)}
	}
	return rs
}

// EncodeRecord returns one record's bytes exactly as r describes it, its
// length prefix computed (SPEC §1: length, attributes, timestampDelta,
// offsetDelta, key, value, headers), for tests that put a wrong field in
// an otherwise well-formed batch (an offset delta out of sequence, a
// hidden timestamp).
func EncodeRecord(tsDelta int64, offsetDelta int32, key, value []byte, headers ...kmsg.Header) []byte {
	rec := kmsg.Record{
		TimestampDelta64: tsDelta,
		OffsetDelta:      offsetDelta,
		Key:              key,
		Value:            value,
		Headers:          headers,
	}
	body := rec.AppendTo(nil)
	rec.Length = int32(len(body) - 1)
	return rec.AppendTo(nil)
}

// Raw is a batch whose header fields are given, not derived from its
// records: for tests of headers that lie about their records.
type Raw struct {
	Options
	// Records are the uncompressed record bytes (EncodeRecord), compressed
	// with Options.Codec by Assemble.
	Records []byte
	// RecordsCount and LastOffsetDelta go into the header as they are.
	RecordsCount, LastOffsetDelta int32
	// MaxTimestamp goes into the header as it is, ms.
	MaxTimestamp int64
}

// Assemble returns r as a record batch (base offset 0) with a correct
// CRC-32C, whatever its header claims.
func Assemble(r Raw) []byte {
	raw := r.Records
	if r.Codec != batch.CodecNone {
		raw = Compress(r.Codec, raw)
	}
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           int16(r.Codec) | r.ExtraAttributes,
		LastOffsetDelta:      r.LastOffsetDelta,
		FirstTimestamp:       r.BaseTimestamp,
		MaxTimestamp:         r.MaxTimestamp,
		ProducerID:           r.ProducerID,
		ProducerEpoch:        r.ProducerEpoch,
		FirstSequence:        r.BaseSequence,
		NumRecords:           r.RecordsCount,
		Records:              raw,
	}
	b.Length = int32(batch.HeaderSize - 12 + len(raw))
	out := b.AppendTo(nil)
	batch.Header(out).UpdateCRC()
	return out
}

// Compress returns raw compressed with codec (one of batch.Codec*, not
// CodecNone) by franz-go's compressor, as a producer compresses.
func Compress(codec int8, raw []byte) []byte {
	c, ok := codecs[codec]
	if !ok {
		panic(fmt.Sprintf("batchtest: unknown codec %d", codec))
	}
	comp, err := kgo.DefaultCompressor(c)
	if err != nil {
		panic(err)
	}
	var buf bytes.Buffer
	out, _ := comp.Compress(&buf, raw)
	return append([]byte(nil), out...)
}

// XerialFrame frames raw as the Java producer's SnappyOutputStream and
// franz-go's merged batches do: the xerial header, then chunks of at most
// chunk input bytes, each a big-endian length and a raw snappy block.
func XerialFrame(raw []byte, chunk int) []byte {
	out := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	for len(raw) > 0 {
		n := min(chunk, len(raw))
		block := s2.EncodeSnappy(nil, raw[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
		raw = raw[n:]
	}
	return out
}
