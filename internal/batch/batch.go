// Package batch is a zero-copy view over a Kafka record batch (magic v2) and
// the checks and patches the sidecar applies to one: the header rules, and
// for produce a read of every record (records.go), decompressed as a
// stream (inflate.go), that holds neither keys nor values.
//
// Layout (SPEC §1, Kafka protocol "Record Batch"), big-endian, 61-byte header:
//
//	+0  baseOffset            int64   producers send 0; rewritten on fetch
//	+8  batchLength           int32   total size − 12
//	+12 partitionLeaderEpoch  int32   rewritten on fetch
//	+16 magic                 int8    must be 2
//	+17 crc                   uint32  CRC-32C over bytes [21, end)
//	+21 attributes            int16   codec bits 0–2, 0x08 LogAppendTime,
//	                                  0x10 transactional, 0x20 control
//	+23 lastOffsetDelta       int32
//	+27 baseTimestamp         int64   ms
//	+35 maxTimestamp          int64   ms
//	+43 producerId            int64   −1 = none
//	+51 producerEpoch         int16
//	+53 baseSequence          int32
//	+57 recordsCount          int32
//	+61 records…
//
// baseOffset, batchLength, partitionLeaderEpoch and magic lie outside the CRC
// and may be patched freely; attributes and maxTimestamp lie inside it, so
// patching them requires [Header.UpdateCRC].
package batch

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// HeaderSize is the size in bytes of a v2 record batch header.
const HeaderSize = 61

// Byte offsets of the header fields (SPEC §1).
const (
	offBaseOffset      = 0
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordsCount    = 57

	// crcStart is the first byte covered by the CRC.
	crcStart = offAttributes
	// lengthPrefix is the number of bytes before batchLength starts counting.
	lengthPrefix = 12
)

// Attribute bits (SPEC §1).
const (
	AttrCodecMask     = 0x07
	AttrLogAppendTime = 0x08
	AttrTransactional = 0x10
	AttrControl       = 0x20
)

// Compression codecs in attributes bits 0–2.
const (
	CodecNone   = 0
	CodecGzip   = 1
	CodecSnappy = 2
	CodecLZ4    = 3
	CodecZstd   = 4
)

// Timestamp types as stored in coordinator records (SPEC §8).
const (
	TimestampCreateTime    int8 = 0
	TimestampLogAppendTime int8 = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC returns the CRC-32C (Castagnoli) of b, the checksum Kafka uses for v2
// record batches.
func CRC(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Errors returned by [Parse] and [Walk]. They describe framing, not content:
// content checks live in [Header.Validate].
var (
	// ErrShort means fewer bytes than a header, or than batchLength claims.
	ErrShort = errors.New("batch: truncated record batch")
	// ErrBadLength means batchLength is too small to hold a header.
	ErrBadLength = errors.New("batch: invalid batch length")
)

// Header is a view over one complete record batch: the 61-byte header
// followed by the records. It aliases the caller's bytes; it is valid only as
// long as they are.
type Header []byte

// Parse returns a view over the record batch at the start of b and the number
// of bytes it occupies (batchLength + 12). It checks only framing: that the
// header is there and batchLength fits in b. Errors: [ErrShort],
// [ErrBadLength].
func Parse(b []byte) (Header, int, error) {
	if len(b) < HeaderSize {
		return nil, 0, ErrShort
	}
	n := int64(int32(binary.BigEndian.Uint32(b[offBatchLength:]))) + lengthPrefix
	if n < HeaderSize {
		return nil, 0, ErrBadLength
	}
	if n > int64(len(b)) {
		return nil, 0, ErrShort
	}
	return Header(b[:n]), int(n), nil
}

// Walk calls fn for each record batch in b, a concatenation of batches such
// as a Produce partition's records or a WAL object range. It stops at the
// first framing error and returns it; a trailing partial batch is
// [ErrShort].
func Walk(b []byte, fn func(h Header) error) error {
	for len(b) > 0 {
		h, n, err := Parse(b)
		if err != nil {
			return err
		}
		if err := fn(h); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func (h Header) i16(off int) int16 { return int16(binary.BigEndian.Uint16(h[off:])) }
func (h Header) i32(off int) int32 { return int32(binary.BigEndian.Uint32(h[off:])) }
func (h Header) i64(off int) int64 { return int64(binary.BigEndian.Uint64(h[off:])) }

// Len is the size of the whole batch in bytes (batchLength + 12).
func (h Header) Len() int { return len(h) }

// BaseOffset is the batch's first offset as stored in the bytes.
func (h Header) BaseOffset() int64 { return h.i64(offBaseOffset) }

// BatchLength is the batchLength field: total size − 12.
func (h Header) BatchLength() int32 { return h.i32(offBatchLength) }

// PartitionLeaderEpoch is the partitionLeaderEpoch field.
func (h Header) PartitionLeaderEpoch() int32 { return h.i32(offLeaderEpoch) }

// Magic is the format version; only 2 is valid.
func (h Header) Magic() int8 { return int8(h[offMagic]) }

// CRC is the stored CRC-32C of bytes [21, end).
func (h Header) CRC() uint32 { return binary.BigEndian.Uint32(h[offCRC:]) }

// Attributes is the attributes field.
func (h Header) Attributes() int16 { return h.i16(offAttributes) }

// Codec is the compression codec (attributes bits 0–2).
func (h Header) Codec() int8 { return int8(h.Attributes() & AttrCodecMask) }

// LastOffsetDelta is recordsCount − 1 for a well-formed batch.
func (h Header) LastOffsetDelta() int32 { return h.i32(offLastOffsetDelta) }

// BaseTimestamp is the first record's timestamp in ms (−1: none).
func (h Header) BaseTimestamp() int64 { return h.i64(offBaseTimestamp) }

// MaxTimestamp is the largest record timestamp in ms (−1: none).
func (h Header) MaxTimestamp() int64 { return h.i64(offMaxTimestamp) }

// ProducerID is the idempotent producer id, −1 for none.
func (h Header) ProducerID() int64 { return h.i64(offProducerID) }

// ProducerEpoch is the producer epoch.
func (h Header) ProducerEpoch() int16 { return h.i16(offProducerEpoch) }

// BaseSequence is the first record's producer sequence, −1 for none.
func (h Header) BaseSequence() int32 { return h.i32(offBaseSequence) }

// RecordsCount is the number of records in the batch.
func (h Header) RecordsCount() int32 { return h.i32(offRecordsCount) }

// LastSequence is the sequence of the batch's last record, wrapping at
// INT32_MAX to 0 as Kafka does (SPEC §3). Only meaningful if BaseSequence ≥ 0.
func (h Header) LastSequence() int32 {
	return AddSequence(h.BaseSequence(), h.LastOffsetDelta())
}

// AddSequence returns seq + delta with Kafka's wrap from INT32_MAX to 0.
func AddSequence(seq, delta int32) int32 {
	s := int64(seq) + int64(delta)
	if s > 1<<31-1 {
		s -= 1 << 31
	}
	return int32(s)
}

// ComputeCRC returns the CRC-32C of the bytes the CRC field covers.
func (h Header) ComputeCRC() uint32 { return CRC(h[crcStart:]) }

// SetBaseOffset patches baseOffset (outside the CRC).
func (h Header) SetBaseOffset(o int64) { binary.BigEndian.PutUint64(h[offBaseOffset:], uint64(o)) }

// SetPartitionLeaderEpoch patches partitionLeaderEpoch (outside the CRC).
func (h Header) SetPartitionLeaderEpoch(e int32) {
	binary.BigEndian.PutUint32(h[offLeaderEpoch:], uint32(e))
}

// SetLogAppendTime marks the batch as LogAppendTime and sets maxTimestamp to
// ts (ms). Both fields are inside the CRC: call [Header.UpdateCRC] after.
func (h Header) SetLogAppendTime(ts int64) {
	binary.BigEndian.PutUint16(h[offAttributes:], uint16(h.Attributes()|AttrLogAppendTime))
	binary.BigEndian.PutUint64(h[offMaxTimestamp:], uint64(ts))
}

// setMaxTimestamp patches maxTimestamp (inside the CRC: call
// [Header.UpdateCRC] after).
func (h Header) setMaxTimestamp(ts int64) {
	binary.BigEndian.PutUint64(h[offMaxTimestamp:], uint64(ts))
}

// UpdateCRC recomputes and stores the CRC after a patch inside its range.
func (h Header) UpdateCRC() { binary.BigEndian.PutUint32(h[offCRC:], h.ComputeCRC()) }
