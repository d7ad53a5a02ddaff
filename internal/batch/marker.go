package batch

import (
	"encoding/binary"
	"errors"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transaction markers (SPEC §15): the COMMIT or ABORT control batch a
// transaction coordinator writes to every partition of a transaction. A
// marker is a record batch with the control and transactional attribute
// bits, the producer's id and epoch, baseSequence −1 and one record whose
// key is a ControlRecordKey (version 0, type 0 ABORT or 1 COMMIT) and whose
// value an EndTxnMarker (version 0, the coordinator epoch) [KIP-98].

// ErrNotMarker is returned by ParseMarker for a batch that is not a
// well-formed transaction marker.
var ErrNotMarker = errors.New("batch: not a transaction marker")

// AppendMarker appends a transaction marker to dst: base offset 0 (the
// commit assigns it), partition leader epoch 0, no compression, CreateTime
// ts (ms) as base and max timestamp, the producer's id and epoch, and one
// record whose key says commit or abort and whose value carries
// coordinatorEpoch. The CRC is set.
func AppendMarker(dst []byte, producerID int64, producerEpoch int16, commit bool, coordinatorEpoch int32, ts int64) []byte {
	key := kmsg.NewControlRecordKey()
	key.Type = kmsg.ControlRecordKeyTypeAbort
	if commit {
		key.Type = kmsg.ControlRecordKeyTypeCommit
	}
	val := kmsg.NewEndTxnMarker()
	val.CoordinatorEpoch = coordinatorEpoch
	k := key.AppendTo(nil)
	v := val.AppendTo(nil)

	// The record: attributes int8, timestampDelta, offsetDelta, key,
	// value (varint lengths), no headers; preceded by its varint length.
	var rec []byte
	rec = append(rec, 0)
	rec = kbin.AppendVarlong(rec, 0)
	rec = kbin.AppendVarint(rec, 0)
	rec = kbin.AppendVarint(rec, int32(len(k)))
	rec = append(rec, k...)
	rec = kbin.AppendVarint(rec, int32(len(v)))
	rec = append(rec, v...)
	rec = kbin.AppendVarint(rec, 0)

	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	dst = kbin.AppendVarint(dst, int32(len(rec)))
	dst = append(dst, rec...)
	h := dst[start:]
	be := binary.BigEndian
	be.PutUint64(h[offBaseOffset:], 0)
	be.PutUint32(h[offBatchLength:], uint32(len(h)-lengthPrefix))
	be.PutUint32(h[offLeaderEpoch:], 0)
	h[offMagic] = 2
	be.PutUint16(h[offAttributes:], AttrControl|AttrTransactional)
	be.PutUint32(h[offLastOffsetDelta:], 0)
	be.PutUint64(h[offBaseTimestamp:], uint64(ts))
	be.PutUint64(h[offMaxTimestamp:], uint64(ts))
	be.PutUint64(h[offProducerID:], uint64(producerID))
	be.PutUint16(h[offProducerEpoch:], uint16(producerEpoch))
	be.PutUint32(h[offBaseSequence:], 0xFFFFFFFF)
	be.PutUint32(h[offRecordsCount:], 1)
	be.PutUint32(h[offCRC:], CRC(h[crcStart:]))
	return dst
}

// ParseMarker reports whether h, a batch with the control attribute, is a
// COMMIT (true) or ABORT (false) marker. Errors: ErrNotMarker for a batch
// without the control and transactional bits, compressed, of another
// record count, or whose one record's key is not a ControlRecordKey of
// version 0 and type 0 or 1.
func ParseMarker(h Header) (commit bool, err error) {
	attrs := h.Attributes()
	if attrs&(AttrControl|AttrTransactional) != AttrControl|AttrTransactional || attrs&AttrCodecMask != 0 || h.RecordsCount() != 1 || len(h) <= HeaderSize {
		return false, ErrNotMarker
	}
	r := kbin.Reader{Src: h[HeaderSize:]}
	n := r.Varint()
	body := r.Span(int(n))
	if !r.Ok() || n <= 0 {
		return false, ErrNotMarker
	}
	br := kbin.Reader{Src: body}
	br.Int8()    // attributes
	br.Varlong() // timestamp delta
	br.Varint()  // offset delta
	kl := br.Varint()
	k := br.Span(int(kl))
	if !br.Ok() || kl < 4 {
		return false, ErrNotMarker
	}
	var key kmsg.ControlRecordKey
	if err := key.ReadFrom(k); err != nil || key.Version != 0 {
		return false, ErrNotMarker
	}
	switch key.Type {
	case kmsg.ControlRecordKeyTypeCommit:
		return true, nil
	case kmsg.ControlRecordKeyTypeAbort:
		return false, nil
	}
	return false, ErrNotMarker
}
