package fetch

import (
	"errors"
	"fmt"
	"io"
	"math"
)

// A v2 batch's records section (after the 61-byte header, decompressed when
// a codec is set; SPEC §1, KIP-98) is recordsCount records back to back:
//
//	length          varint   bytes of the record after this field
//	attributes      int8     unused
//	timestampDelta  varlong  ms from the batch's baseTimestamp
//	offsetDelta     varint   from the batch's baseOffset
//	keyLength       varint   −1 = null
//	key             keyLength bytes
//	valueLength     varint   −1 = null
//	value           valueLength bytes
//	headersCount    varint
//	headers         headersCount × (keyLength varint ≥ 0, key,
//	                valueLength varint ≥ −1, value)
//
// varint and varlong are zigzag base-128 (protobuf's sint32, sint64): at
// most 5 and 10 bytes.

// errBadRecord is the root of the errors scanRecords returns for bytes that
// are not a well-formed records section.
var errBadRecord = errors.New("fetch: malformed record")

// recordReader is what scanRecords reads from; *bufio.Reader implements it.
// Discard skips bytes without handing them out, so keys and values are never
// held, whatever their size.
type recordReader interface {
	io.ByteReader
	Discard(n int) (discarded int, err error)
}

// recordsSpan is what scanRecords needs from a batch's header: base offset
// (the assigned one, not the stored 0), base timestamp, last offset delta
// and record count.
type recordsSpan struct {
	baseOffset, baseTimestamp int64
	lastOffsetDelta, count    int32
}

// scanRecords reads s.count records from r, in order, and calls fn with each
// one's offset and timestamp (ms) until fn returns false or the records are
// done; it reads nothing past the record fn stops at, and r to its end if fn
// never stops it. Only the length,
// timestampDelta and offsetDelta of a record are decoded; key, value and
// headers are checked against the record's length and skipped, so the
// working set is r's buffer, whatever the records hold.
//
// Errors: r's own (a decompressor's, errDecompressLimit); io.ErrUnexpectedEOF
// if r ends before the last record does; errBadRecord (wrapped, saying what)
// for bytes after the last record, a negative count or length, a varint longer than its type, a field that
// overruns its record or leaves bytes over, a null header key, or
// offsetDeltas that do not increase within [0, s.lastOffsetDelta] (a broker
// assigns a batch consecutive offsets; consumers drop a record whose offset
// goes back).
func scanRecords(r recordReader, s recordsSpan, fn func(offset, timestamp int64) bool) error {
	if s.count < 0 {
		return fmt.Errorf("%w: records count %d", errBadRecord, s.count)
	}
	sc := recordScanner{r: r}
	prev := int64(-1)
	for i := range s.count {
		off, ts, err := sc.record()
		if err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		if off <= prev || off > int64(s.lastOffsetDelta) {
			return fmt.Errorf("%w: record %d: offset delta %d after %d, last %d", errBadRecord, i, off, prev, s.lastOffsetDelta)
		}
		prev = off
		if !fn(s.baseOffset+off, s.baseTimestamp+ts) {
			return nil
		}
	}
	// Read to the end, as a broker's record iterator does: bytes left over
	// mean a wrong count, and the codec checks its trailer (gzip's CRC-32,
	// zstd's and lz4's checksums) at the end of its stream.
	switch _, err := r.ReadByte(); err {
	case io.EOF:
		return nil
	case nil:
		return fmt.Errorf("%w: bytes after record %d, the last", errBadRecord, s.count-1)
	default:
		return err
	}
}

// recordScanner reads one record at a time; left is what remains of the
// current record's length.
type recordScanner struct {
	r    recordReader
	left int64
}

// record reads one record and returns its offsetDelta and timestampDelta.
func (sc *recordScanner) record() (offsetDelta, timestampDelta int64, err error) {
	sc.left = math.MaxInt64 // the length field is outside the record's length
	length, err := sc.varint(5)
	if err != nil {
		return 0, 0, err
	}
	if length < 0 {
		return 0, 0, fmt.Errorf("%w: length %d", errBadRecord, length)
	}
	sc.left = length
	if err := sc.skip(1); err != nil { // attributes
		return 0, 0, err
	}
	if timestampDelta, err = sc.varint(10); err != nil {
		return 0, 0, err
	}
	if offsetDelta, err = sc.varint(5); err != nil {
		return 0, 0, err
	}
	if err := sc.bytes(-1); err != nil { // key
		return 0, 0, err
	}
	if err := sc.bytes(-1); err != nil { // value
		return 0, 0, err
	}
	headers, err := sc.varint(5)
	if err != nil {
		return 0, 0, err
	}
	if headers < 0 {
		return 0, 0, fmt.Errorf("%w: headers count %d", errBadRecord, headers)
	}
	// Each header takes at least two bytes, so the loop is bounded by the
	// record's length, which bounds the bytes read.
	for range headers {
		if err := sc.bytes(0); err != nil { // header key: never null
			return 0, 0, err
		}
		if err := sc.bytes(-1); err != nil { // header value
			return 0, 0, err
		}
	}
	if sc.left != 0 {
		return 0, 0, fmt.Errorf("%w: %d bytes past the headers", errBadRecord, sc.left)
	}
	return offsetDelta, timestampDelta, nil
}

// varint reads a zigzag varint of at most maxLen bytes (5: int32, 10: int64)
// within the current record.
func (sc *recordScanner) varint(maxLen int) (int64, error) {
	var ux uint64
	for i := range maxLen {
		if sc.left == 0 {
			return 0, fmt.Errorf("%w: varint overruns the record", errBadRecord)
		}
		b, err := sc.r.ReadByte()
		if err != nil {
			return 0, unexpectedEOF(err)
		}
		sc.left--
		ux |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			if (maxLen == 5 && ux > math.MaxUint32) || (i == 9 && b > 1) {
				return 0, fmt.Errorf("%w: varint overflows", errBadRecord)
			}
			return int64(ux>>1) ^ -int64(ux&1), nil
		}
	}
	return 0, fmt.Errorf("%w: varint longer than %d bytes", errBadRecord, maxLen)
}

// bytes skips a length-prefixed field whose length may be as low as minLen
// (−1: nullable).
func (sc *recordScanner) bytes(minLen int64) error {
	n, err := sc.varint(5)
	if err != nil {
		return err
	}
	if n < minLen {
		return fmt.Errorf("%w: field length %d", errBadRecord, n)
	}
	return sc.skip(max(n, 0))
}

// skip discards n bytes of the current record.
func (sc *recordScanner) skip(n int64) error {
	if n > sc.left {
		return fmt.Errorf("%w: field of %d bytes overruns the record (%d left)", errBadRecord, n, sc.left)
	}
	if _, err := sc.r.Discard(int(n)); err != nil {
		return unexpectedEOF(err)
	}
	sc.left -= n
	return nil
}

// unexpectedEOF turns io.EOF into io.ErrUnexpectedEOF: the records section
// ended inside a record.
func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
