package batch

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Limits are the per-topic and per-request rules a produced batch is checked
// against (SPEC §2). The zero value checks framing, CRC and counts only.
type Limits struct {
	// MaxBytes is the topic's max.message.bytes: the largest batch, as
	// received (compressed, with header), in bytes. 0 means no limit.
	MaxBytes int
	// AllowZstd is true for Produce v7+; older requests may not carry zstd.
	AllowZstd bool
	// CheckTimestamps enables the CreateTime window check below, on the
	// header and on every record, and the rewrite of a header whose
	// maxTimestamp is not its records'. It is off for LogAppendTime topics,
	// whose timestamps the coordinator replaces.
	CheckTimestamps bool
	// MinTimestamp and MaxTimestamp bound, in ms since the epoch, the
	// baseTimestamp and maxTimestamp a CreateTime batch may carry (now −
	// message.timestamp.before.max.ms, now + message.timestamp.after.max.ms).
	// −1 ("no timestamp") is always accepted.
	MinTimestamp, MaxTimestamp int64
	// AllowTransactional accepts a transactional batch (attribute 0x10)
	// of an idempotent producer, when a transaction coordinator serves
	// (SPEC §15); without it such a batch is INVALID_REQUEST (SPEC §2).
	AllowTransactional bool
}

// NoTimestamp is the timestamp value meaning "none" (Kafka's NO_TIMESTAMP).
const NoTimestamp = -1

// WindowMs returns [now − beforeMs, now + afterMs] clamped to int64, the
// timestamp window for Limits. nowMs, beforeMs and afterMs are ≥ 0 (config
// validation guarantees it), so only the upper bound can overflow.
func WindowMs(nowMs, beforeMs, afterMs int64) (lo, hi int64) {
	lo, hi = nowMs-beforeMs, math.MaxInt64
	if afterMs <= math.MaxInt64-nowMs {
		hi = nowMs + afterMs
	}
	return lo, hi
}

// ValidateProduce checks the records of one Produce partition (Produce v3+)
// as a Kafka broker does (SPEC §2): exactly one v2 batch, a valid header, a
// matching CRC, the topic limits in l, then every record — decompressed as
// a stream when the batch is compressed, never held whole: recordsCount
// well-formed records (lengths and varints), offset deltas 0, 1, 2 …, and on a CreateTime topic (l.CheckTimestamps) each
// record's timestamp in the window. It returns the batch view on success,
// or the Kafka error to send for that partition:
//
//   - MESSAGE_TOO_LARGE: larger than l.MaxBytes;
//   - CORRUPT_MESSAGE: truncated, bad length or CRC mismatch;
//   - INVALID_RECORD: not exactly one batch, magic ≠ 2, baseOffset ≠ 0,
//     recordsCount ≠ lastOffsetDelta+1 or ≤ 0, a control batch, a producer
//     id without a sequence, records that are not recordsCount
//     well-formed records, or offset deltas other than 0, 1, 2 …;
//   - INVALID_REQUEST: a transactional batch unless l.AllowTransactional
//     and the batch has a producer id (SPEC §2 decision, §15);
//   - UNSUPPORTED_COMPRESSION_TYPE: zstd before Produce v7, or an unknown codec;
//   - INVALID_TIMESTAMP: the LogAppendTime bit set by the client, or a
//     header or record timestamp outside the window;
//   - UNKNOWN_SERVER_ERROR: records the codec cannot decompress (Kafka
//     4.4's answer).
//
// On a CreateTime topic, when the header's maxTimestamp is not the largest
// record timestamp, ValidateProduce rewrites it and the CRC in records, as a
// broker does, so that the stored header is true.
func ValidateProduce(records []byte, l Limits) (Header, *kerr.Error) {
	if l.MaxBytes > 0 && len(records) > l.MaxBytes {
		return nil, kerr.MessageTooLarge
	}
	if len(records) == 0 {
		return nil, kerr.InvalidRecord
	}
	if len(records) > offMagic && records[offMagic] != 2 {
		return nil, kerr.InvalidRecord
	}
	h, n, err := Parse(records)
	if err != nil {
		return nil, kerr.CorruptMessage
	}
	if n != len(records) {
		// Produce v3+ carries exactly one batch per partition.
		return nil, kerr.InvalidRecord
	}
	if h.ComputeCRC() != h.CRC() {
		return nil, kerr.CorruptMessage
	}
	if errc := h.checkContent(l); errc != nil {
		return nil, errc
	}
	maxTS, errc := h.checkRecords(&l)
	if errc != nil {
		return nil, errc
	}
	if l.CheckTimestamps && maxTS != h.MaxTimestamp() {
		// As a broker stores it: the header's maxTimestamp is the records'
		// (SPEC §2), which timestamp lookups rely on (SPEC §5).
		h.setMaxTimestamp(maxTS)
		h.UpdateCRC()
	}
	return h, nil
}

// checkContent applies the header rules after framing and CRC are known good.
func (h Header) checkContent(l Limits) *kerr.Error {
	if h.BaseOffset() != 0 {
		return kerr.InvalidRecord
	}
	count := h.RecordsCount()
	if count <= 0 || int64(h.LastOffsetDelta())+1 != int64(count) {
		return kerr.InvalidRecord
	}
	attrs := h.Attributes()
	if attrs&AttrControl != 0 {
		return kerr.InvalidRecord
	}
	if attrs&AttrTransactional != 0 && (!l.AllowTransactional || h.ProducerID() < 0) {
		return kerr.InvalidRequest
	}
	if h.ProducerID() >= 0 && h.BaseSequence() < 0 {
		return kerr.InvalidRecord
	}
	switch h.Codec() {
	case CodecNone, CodecGzip, CodecSnappy, CodecLZ4:
	case CodecZstd:
		if !l.AllowZstd {
			return kerr.UnsupportedCompressionType
		}
	default:
		return kerr.UnsupportedCompressionType
	}
	if attrs&AttrLogAppendTime != 0 {
		return kerr.InvalidTimestamp
	}
	// The timestamp window applies to the records (checkRecords), not to
	// the header's baseTimestamp and maxTimestamp, as in a broker: a
	// header whose maxTimestamp is out of the window while every record is
	// in it is accepted and rewritten.
	return nil
}
