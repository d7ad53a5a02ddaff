package batch

import (
	"bufio"
	"io"
	"math"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The records section of a v2 batch (after the header, decompressed when a
// codec is set; SPEC §1, KIP-98) is recordsCount records back to back:
//
//	length          varint   bytes of the record after this field
//	attributes      int8     unused
//	timestampDelta  varlong  ms from baseTimestamp
//	offsetDelta     varint   from baseOffset
//	keyLength       varint   −1 = null
//	key             keyLength bytes
//	valueLength     varint   −1 = null
//	value           valueLength bytes
//	headersCount    varint   ≥ 0
//	headers         headersCount × (keyLength varint ≥ 0, key,
//	                valueLength varint ≥ −1, value)
//
// varint and varlong are zigzag base-128 (protobuf's sint32, sint64) of at
// most 5 and 10 bytes; a last byte with its high bit set is malformed. A
// length below −1 is malformed too (SPEC §2: Kafka 4.4 reads it as null).

// recordCheck is what checkRecords learns from the records, one call of
// record per record, in order.
type recordCheck struct {
	l             *Limits
	baseTimestamp int64
	// maxTimestamp is the largest record timestamp seen, NoTimestamp if
	// none is larger.
	maxTimestamp int64
	badTimestamp bool // a record outside the window
	badOffset    bool // offset deltas other than 0, 1, 2 …
}

// record notes the i-th record.
func (c *recordCheck) record(i int32, offsetDelta, timestampDelta int64) {
	ts := c.baseTimestamp + timestampDelta
	if offsetDelta != int64(i) {
		c.badOffset = true
	}
	if c.l.CheckTimestamps && ts != NoTimestamp && (ts < c.l.MinTimestamp || ts > c.l.MaxTimestamp) {
		c.badTimestamp = true
	}
	c.maxTimestamp = max(c.maxTimestamp, ts)
}

// result is the partition's error once every record was read well formed:
// INVALID_TIMESTAMP, then INVALID_RECORD for offset deltas out of sequence
// (SPEC §2: Kafka 4.4 checks the timestamps first, and the offsets only in
// compressed batches).
func (c *recordCheck) result() *kerr.Error {
	switch {
	case c.badTimestamp:
		return kerr.InvalidTimestamp
	case c.badOffset:
		return kerr.InvalidRecord
	}
	return nil
}

// checkRecords reads every record of h, decompressing as a stream, and
// returns the largest record timestamp (NoTimestamp when there is none) or
// the partition's error: INVALID_RECORD for a records section that is not
// recordsCount well-formed records (fewer, more, a bad length or varint)
// or whose offset deltas are not 0, 1, 2 …, UNKNOWN_SERVER_ERROR for bytes
// the codec cannot decompress, INVALID_TIMESTAMP for a record outside l's
// window (SPEC §2).
func (h Header) checkRecords(l *Limits) (int64, *kerr.Error) {
	c := recordCheck{l: l, baseTimestamp: h.BaseTimestamp(), maxTimestamp: NoTimestamp}
	count := h.RecordsCount()
	body := h[HeaderSize:]
	if h.Codec() == CodecNone {
		if !scanPlain(body, count, &c) {
			return 0, kerr.InvalidRecord
		}
		return c.maxTimestamp, c.result()
	}
	d, err := newDecompressor(h.Codec(), body)
	if err != nil {
		return 0, kerr.UnknownServerError
	}
	defer d.release()
	br := bufioPool.Get().(*bufio.Reader)
	br.Reset(d.r)
	defer func() { br.Reset(nil); bufioPool.Put(br) }()
	if errc := scanStream(br, count, &c); errc != nil {
		return 0, errc
	}
	return c.maxTimestamp, c.result()
}

// bufioPool holds the readers compressed records are parsed through; 16
// KiB each, whatever the batch decompresses to.
var bufioPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}

// varintLong reads a zigzag varint of at most maxLen bytes (5: int32, 10:
// int64) from b and returns it and its length, or n = 0 when b ends first
// or the varint is longer. An int32's fifth byte contributes its low four
// bits only, as a broker reads it.
func varintLong(b []byte, maxLen int) (v int64, n int) {
	var ux uint64
	for i := 0; i < maxLen && i < len(b); i++ {
		c := b[i]
		ux |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			if maxLen == 5 {
				u := uint32(ux)
				return int64(int32(u>>1) ^ -int32(u&1)), i + 1
			}
			return int64(ux>>1) ^ -int64(ux&1), i + 1
		}
	}
	return 0, 0
}

// scanPlain parses count records from b, which they must fill exactly. It
// is the uncompressed hot path (bench BenchmarkPacking): positions in b
// instead of reslicing, and one-byte varints — most record fields — read
// in line.
func scanPlain(b []byte, count int32, c *recordCheck) bool {
	p := 0
	for i := range count {
		length, q := varintAt(b, p, 5)
		if q == 0 || length < 0 || length > int64(len(b)-q) {
			return false
		}
		end := q + int(length)
		off, ts, ok := parseRecord(b[:end], q)
		if !ok {
			return false
		}
		c.record(i, off, ts)
		p = end
	}
	return p == len(b)
}

// varintAt reads the varint at b[p:] as varint does and returns it and the
// position after it, 0 when malformed (a varint never ends at 0).
func varintAt(b []byte, p, maxLen int) (int64, int) {
	if p < len(b) && b[p] < 0x80 {
		x := int64(b[p])
		return x>>1 ^ -(x & 1), p + 1
	}
	if p+1 < len(b) && b[p+1] < 0x80 { // two bytes: lengths of 64 to 8191
		x := int64(b[p]&0x7f) | int64(b[p+1])<<7
		return x>>1 ^ -(x & 1), p + 2
	}
	v, n := varintLong(b[min(p, len(b)):], maxLen)
	if n == 0 {
		return 0, 0
	}
	return v, p + n
}

// parseRecord parses the record at b[p:] after its length field, which b's
// end ends, and returns its offsetDelta and timestampDelta. The fields
// every record has are read with their one-byte case in line (varintAt is
// too large for the compiler to inline): this is most of the cost of
// validating small uncompressed batches.
func parseRecord(b []byte, p int) (offsetDelta, timestampDelta int64, ok bool) {
	p++ // attributes
	if p < len(b) && b[p] < 0x80 {
		x := int64(b[p])
		timestampDelta, p = x>>1^-(x&1), p+1
	} else if timestampDelta, p = varintAt(b, p, 10); p == 0 {
		return 0, 0, false
	}
	if p < len(b) && b[p] < 0x80 {
		x := int64(b[p])
		offsetDelta, p = x>>1^-(x&1), p+1
	} else if offsetDelta, p = varintAt(b, p, 5); p == 0 {
		return 0, 0, false
	}
	for range 2 { // key, value
		var l int64
		if p < len(b) && b[p] < 0x80 {
			x := int64(b[p])
			l, p = x>>1^-(x&1), p+1
		} else if l, p = varintAt(b, p, 5); p == 0 {
			return 0, 0, false
		}
		if l < -1 || l > int64(len(b)-p) {
			return 0, 0, false
		}
		p += int(max(l, 0))
	}
	if p < len(b) && b[p] == 0 { // no headers, the common case
		return offsetDelta, timestampDelta, p+1 == len(b)
	}
	headers, p := varintAt(b, p, 5)
	if p == 0 || headers < 0 {
		return 0, 0, false
	}
	// Each header takes two bytes at least: the loop ends with b.
	for range headers {
		if p = skipField(b, p, true); p == 0 {
			return 0, 0, false
		}
		if p = skipField(b, p, false); p == 0 {
			return 0, 0, false
		}
	}
	return offsetDelta, timestampDelta, p == len(b)
}

// skipField skips the length-prefixed field at b[p:] and returns the
// position after it, 0 when malformed; −1 is null unless notNull (a
// header key).
func skipField(b []byte, p int, notNull bool) int {
	l, q := varintAt(b, p, 5)
	if q == 0 || l < -1 || (notNull && l < 0) || l > int64(len(b)-q) {
		return 0
	}
	return q + int(max(l, 0))
}

// scanStream is scanPlain over a decompressed stream: count records, then
// the stream's end. Keys, values and headers are skipped with Discard,
// never held.
func scanStream(r *bufio.Reader, count int32, c *recordCheck) *kerr.Error {
	s := streamScanner{r: r}
	for i := range count {
		off, ts, errc := s.record()
		if errc != nil {
			return errc
		}
		c.record(i, off, ts)
	}
	// Bytes after the last record mean a wrong count; the codec checks its
	// trailer (gzip's CRC-32, lz4's and zstd's checksums) at the end.
	switch _, err := r.ReadByte(); err {
	case io.EOF:
		return nil
	case nil:
		return kerr.InvalidRecord
	default:
		return kerr.UnknownServerError
	}
}

// streamScanner reads one record at a time from a decompressed stream;
// left is what remains of the current record's length.
type streamScanner struct {
	r    *bufio.Reader
	left int64
}

// fail maps a read error: the stream ending inside a record is a malformed
// section, anything else the codec's failure.
func fail(err error) *kerr.Error {
	if err == io.EOF {
		return kerr.InvalidRecord
	}
	return kerr.UnknownServerError
}

func (s *streamScanner) record() (offsetDelta, timestampDelta int64, errc *kerr.Error) {
	s.left = math.MaxInt64 // the length field lies outside the length
	length, errc := s.varint(5)
	if errc != nil {
		return 0, 0, errc
	}
	if length < 0 {
		return 0, 0, kerr.InvalidRecord
	}
	s.left = length
	if errc = s.skip(1); errc != nil { // attributes
		return 0, 0, errc
	}
	if timestampDelta, errc = s.varint(10); errc != nil {
		return 0, 0, errc
	}
	if offsetDelta, errc = s.varint(5); errc != nil {
		return 0, 0, errc
	}
	if errc = s.field(false); errc != nil { // key
		return 0, 0, errc
	}
	if errc = s.field(false); errc != nil { // value
		return 0, 0, errc
	}
	headers, errc := s.varint(5)
	if errc != nil {
		return 0, 0, errc
	}
	if headers < 0 {
		return 0, 0, kerr.InvalidRecord
	}
	for range headers { // bounded by left: two bytes a header at least
		if errc = s.field(true); errc != nil {
			return 0, 0, errc
		}
		if errc = s.field(false); errc != nil {
			return 0, 0, errc
		}
	}
	if s.left != 0 {
		return 0, 0, kerr.InvalidRecord
	}
	return offsetDelta, timestampDelta, nil
}

func (s *streamScanner) varint(maxLen int) (int64, *kerr.Error) {
	var buf [10]byte
	for i := range maxLen {
		if s.left == 0 {
			return 0, kerr.InvalidRecord
		}
		b, err := s.r.ReadByte()
		if err != nil {
			return 0, fail(err)
		}
		s.left--
		buf[i] = b
		if b < 0x80 {
			v, _ := varintLong(buf[:i+1], maxLen)
			return v, nil
		}
	}
	return 0, kerr.InvalidRecord
}

func (s *streamScanner) field(notNull bool) *kerr.Error {
	n, errc := s.varint(5)
	if errc != nil {
		return errc
	}
	if n < -1 || (notNull && n < 0) {
		return kerr.InvalidRecord
	}
	return s.skip(max(n, 0))
}

func (s *streamScanner) skip(n int64) *kerr.Error {
	if n > s.left {
		return kerr.InvalidRecord
	}
	if _, err := s.r.Discard(int(n)); err != nil {
		return fail(err)
	}
	s.left -= n
	return nil
}
