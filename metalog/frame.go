package metalog

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
)

// Frame layout (docs/format/metadata-records.md §Frame):
//
//	+0 length uint32  body bytes, 1 … MaxRecordBytes
//	+4 crc    uint32  CRC-32C over the length bytes and the body
//	+8 body
const frameHeaderSize = 8

// Group end layout (docs/format/metadata-records.md §Group end): the
// frames written by one Append are followed by one group end, which lets
// replay verify the group as a whole.
//
//	+0  magic     "DSGE": above MaxRecordBytes read as a length, so never a frame
//	+4  count     uint32  records in the group, ≥ 1
//	+8  first     int64   record index of the group's first record
//	+16 length    uint64  bytes of the group's frames, which end where the group end starts
//	+24 group crc uint32  CRC-32C over those bytes
//	+28 crc       uint32  CRC-32C over bytes 0 … 27 of the group end
//
// The group's place is given by its length, not its offset, so that a
// group end still finds its group when bytes before the group were lost.
const (
	groupEndSize  = 32
	groupEndMagic = "DSGE"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Frame errors. Bad data with one of these at the tail of the last segment
// may be a torn group; elsewhere it is corruption.
var (
	// errFrameShort: the frame's (or group end's) header or body runs past
	// the end of the data.
	errFrameShort = errors.New("short frame")
	// errFrameLength: the length field is 0 or above MaxRecordBytes (and
	// not a group end's magic).
	errFrameLength = errors.New("invalid frame length")
	// errFrameCRC: the CRC does not match.
	errFrameCRC = errors.New("frame CRC mismatch")
	// errGroupEnd: a group end whose own CRC fails, or that does not
	// describe the frames before it (count, first record, length, group
	// CRC).
	errGroupEnd = errors.New("bad group end")
	// errGroupOpen: the data ends after whole frames but before their
	// group end.
	errGroupOpen = errors.New("group without a group end")
)

// appendFrame appends body framed with its length and CRC.
func appendFrame(dst, body []byte) []byte {
	var hdr [frameHeaderSize]byte
	binary.BigEndian.PutUint32(hdr[0:4], uint32(len(body)))
	crc := crc32.Update(crc32.Checksum(hdr[0:4], castagnoli), castagnoli, body)
	binary.BigEndian.PutUint32(hdr[4:8], crc)
	dst = append(dst, hdr[:]...)
	return append(dst, body...)
}

// frameLength validates a frame header and returns the body length.
func frameLength(hdr []byte) (int, error) {
	n := binary.BigEndian.Uint32(hdr[0:4])
	if n == 0 || n > MaxRecordBytes {
		return 0, fmt.Errorf("%w %d", errFrameLength, n)
	}
	return int(n), nil
}

func checkFrameCRC(hdr, body []byte) error {
	want := binary.BigEndian.Uint32(hdr[4:8])
	got := crc32.Update(crc32.Checksum(hdr[0:4], castagnoli), castagnoli, body)
	if got != want {
		return fmt.Errorf("%w: stored %#08x, computed %#08x", errFrameCRC, want, got)
	}
	return nil
}

// groupEnd is the content of a group end.
type groupEnd struct {
	// count is the number of records (frames) in the group, ≥ 1.
	count uint32
	// first is the record index of the group's first record.
	first int64
	// length is the number of bytes of the group's frames, ≥ count × 9:
	// the group starts length bytes before its group end.
	length int64
	// groupCRC is the CRC-32C of the group's frames.
	groupCRC uint32
}

// start returns the offset of the first frame of the group whose group
// end is at pos.
func (g groupEnd) start(pos int64) int64 { return pos - g.length }

// appendGroupEnd appends the group end g.
func appendGroupEnd(dst []byte, g groupEnd) []byte {
	var b [groupEndSize]byte
	copy(b[0:4], groupEndMagic)
	binary.BigEndian.PutUint32(b[4:8], g.count)
	binary.BigEndian.PutUint64(b[8:16], uint64(g.first))
	binary.BigEndian.PutUint64(b[16:24], uint64(g.length))
	binary.BigEndian.PutUint32(b[24:28], g.groupCRC)
	binary.BigEndian.PutUint32(b[28:32], crc32.Checksum(b[:28], castagnoli))
	return append(dst, b[:]...)
}

// isGroupEnd reports whether b starts with the group end magic.
func isGroupEnd(b []byte) bool {
	return len(b) >= 4 && string(b[:4]) == groupEndMagic
}

// decodeGroupEnd parses the group end at the start of b, checking its own
// CRC and that its fields are plausible (count ≥ 1, first ≥ 0, length ≥
// count × the smallest frame). Errors: errFrameShort, errGroupEnd
// (wrapped).
func decodeGroupEnd(b []byte) (groupEnd, error) {
	if len(b) < groupEndSize {
		return groupEnd{}, errFrameShort
	}
	b = b[:groupEndSize]
	if !isGroupEnd(b) {
		return groupEnd{}, fmt.Errorf("%w: magic %x", errGroupEnd, b[:4])
	}
	if want, got := binary.BigEndian.Uint32(b[28:32]), crc32.Checksum(b[:28], castagnoli); got != want {
		return groupEnd{}, fmt.Errorf("%w: CRC stored %#08x, computed %#08x", errGroupEnd, want, got)
	}
	g := groupEnd{
		count:    binary.BigEndian.Uint32(b[4:8]),
		first:    int64(binary.BigEndian.Uint64(b[8:16])),
		length:   int64(binary.BigEndian.Uint64(b[16:24])),
		groupCRC: binary.BigEndian.Uint32(b[24:28]),
	}
	if g.count == 0 || g.first < 0 || g.length < int64(g.count)*(frameHeaderSize+1) {
		return groupEnd{}, fmt.Errorf("%w: %d records from record %d in %d bytes", errGroupEnd, g.count, g.first, g.length)
	}
	return g, nil
}

// groupReader reads the groups of a segment from a stream. It holds each
// group's frames until the group end has verified them, so that a caller
// never sees a record of a group that turns out torn.
type groupReader struct {
	r   *bufio.Reader
	hdr [groupEndSize]byte
	// off is the offset, in the stream, of the next byte to read.
	off int64
	// end is the offset where the data ends: a frame announcing more bytes
	// than are left is short, without reading (or allocating) its body.
	end int64
	// start is the offset of the current group's first frame, and bad,
	// after an error, the offset of the bad frame or group end; badEnd
	// tells that the bad spot is a group end (its magic is intact).
	start, bad int64
	badEnd     bool
	// buf holds the current group's frames; frames[i] is the offset in buf
	// of frame i.
	buf    []byte
	frames []int
	bodies [][]byte
}

// newGroupReader reads groups from r, whose first byte is at offset off
// and whose data ends at offset end.
func newGroupReader(r io.Reader, off, end int64) *groupReader {
	return &groupReader{r: bufio.NewReaderSize(r, 1<<20), off: off, end: end}
}

// next reads the group whose first record has index first and returns its
// record bodies, valid until the next call. It returns io.EOF when the data
// ends where the group would start. Bad data is reported by an error for
// which isFrameError holds — errFrameShort, errFrameLength, errFrameCRC,
// errGroupEnd or errGroupOpen (wrapped) — with gr.bad the offset of the bad
// frame or group end (gr.badEnd: a group end), gr.start the offset of the
// group holding it and gr.records() the number of valid frames before it
// in that group. Other errors are IO errors.
func (gr *groupReader) next(first int64) ([][]byte, error) {
	gr.start = gr.off
	gr.buf, gr.frames = gr.buf[:0], gr.frames[:0]
	for {
		gr.bad, gr.badEnd = gr.off, false
		left := gr.end - gr.off
		if left == 0 {
			if gr.off == gr.start {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("%w (%d records)", errGroupOpen, len(gr.frames))
		}
		if left < 4 {
			return nil, errFrameShort
		}
		if err := gr.read(gr.hdr[:4]); err != nil {
			return nil, err
		}
		if isGroupEnd(gr.hdr[:4]) {
			gr.badEnd = true
			return gr.groupEnd(first)
		}
		if left < frameHeaderSize {
			return nil, errFrameShort
		}
		n, err := frameLength(gr.hdr[:4])
		if err != nil {
			return nil, err
		}
		if left < int64(frameHeaderSize+n) {
			return nil, errFrameShort
		}
		if err := gr.read(gr.hdr[4:frameHeaderSize]); err != nil {
			return nil, err
		}
		at := len(gr.buf)
		gr.buf = slices.Grow(gr.buf, frameHeaderSize+n)[:at+frameHeaderSize+n]
		copy(gr.buf[at:], gr.hdr[:frameHeaderSize])
		body := gr.buf[at+frameHeaderSize:]
		if err := gr.read(body); err != nil {
			return nil, err
		}
		if err := checkFrameCRC(gr.hdr[:frameHeaderSize], body); err != nil {
			return nil, err
		}
		gr.frames = append(gr.frames, at)
		gr.off += int64(frameHeaderSize + n)
	}
}

// groupEnd reads the rest of a group end whose magic was read and checks
// it against the frames read since gr.start.
func (gr *groupReader) groupEnd(first int64) ([][]byte, error) {
	if gr.end-gr.off < groupEndSize {
		return nil, errFrameShort
	}
	if err := gr.read(gr.hdr[4:]); err != nil {
		return nil, err
	}
	g, err := decodeGroupEnd(gr.hdr[:])
	if err != nil {
		return nil, err
	}
	pos := gr.off
	if i, ok := slices.BinarySearch(gr.frames, int(g.start(pos)-gr.start)); ok && i > 0 {
		// The end of a later group: this group's own end is missing
		// before frame i (cut out, or overwritten).
		gr.frames, gr.bad, gr.badEnd = gr.frames[:i], g.start(pos), false
		return nil, fmt.Errorf("%w: missing (the group end at byte %d closes a group that starts here)", errGroupEnd, pos)
	}
	if int(g.count) != len(gr.frames) || g.first != first || g.start(pos) != gr.start {
		return nil, fmt.Errorf("%w: it describes %d records from record %d in %d bytes; read %d records from record %d in %d bytes",
			errGroupEnd, g.count, g.first, g.length, len(gr.frames), first, pos-gr.start)
	}
	if got := crc32.Checksum(gr.buf, castagnoli); got != g.groupCRC {
		return nil, fmt.Errorf("%w: group CRC stored %#08x, computed %#08x", errGroupEnd, g.groupCRC, got)
	}
	gr.off += groupEndSize
	gr.bodies = gr.bodies[:0]
	for i, at := range gr.frames {
		stop := len(gr.buf)
		if i+1 < len(gr.frames) {
			stop = gr.frames[i+1]
		}
		gr.bodies = append(gr.bodies, gr.buf[at+frameHeaderSize:stop])
	}
	return gr.bodies, nil
}

// records returns the number of valid frames read in the current group.
func (gr *groupReader) records() int { return len(gr.frames) }

// frameOffset returns the offset of frame i of the group last returned.
func (gr *groupReader) frameOffset(i int) int64 { return gr.start + int64(gr.frames[i]) }

// read fills b from the stream. The caller checked that the bytes are
// within end, so running out of data means the file shrank: errFrameShort.
func (gr *groupReader) read(b []byte) error {
	if _, err := io.ReadFull(gr.r, b); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return errFrameShort
		}
		return err
	}
	return nil
}

// isFrameError reports whether err describes bad data (as opposed to an
// IO error).
func isFrameError(err error) bool {
	return errors.Is(err, errFrameShort) || errors.Is(err, errFrameLength) || errors.Is(err, errFrameCRC) ||
		errors.Is(err, errGroupEnd) || errors.Is(err, errGroupOpen)
}

// scanWindow is how many bytes scanGroupEnds reads at a time.
const scanWindow = 1 << 20

// scanGroupEnds calls fn, in offset order, for every group end in
// [from, end) of r whose own CRC holds — at any byte offset, since the
// bytes before it may be garbage — until fn returns true or an error. It
// returns the offset fn accepted, or −1. Candidates are found by their
// 4-byte magic and cost one CRC over 28 bytes each, so the scan is about
// as fast as reading the bytes.
func scanGroupEnds(r io.ReaderAt, from, end int64, fn func(pos int64, g groupEnd) (bool, error)) (int64, error) {
	buf := make([]byte, scanWindow+groupEndSize)
	for base := from; base+groupEndSize <= end; base += scanWindow {
		n := int(min(int64(len(buf)), end-base))
		if _, err := r.ReadAt(buf[:n], base); err != nil && err != io.EOF {
			return -1, err
		}
		for i := 0; i < scanWindow && i+groupEndSize <= n; i++ {
			j := bytes.Index(buf[i:n], []byte(groupEndMagic))
			if j < 0 {
				break
			}
			i += j
			if i >= scanWindow || i+groupEndSize > n {
				break // the next window sees it whole
			}
			g, err := decodeGroupEnd(buf[i : i+groupEndSize])
			if err != nil {
				continue
			}
			if ok, err := fn(base+int64(i), g); err != nil || ok {
				return base + int64(i), err
			}
		}
	}
	return -1, nil
}

// groupVerifies reports whether the group end g, found at pos in r,
// verifies its group, which must start at or after notBefore: the bytes
// g.length before it are g.count valid frames from record g.first, and
// the group CRC matches. A group that verifies was written whole by one
// Append.
func groupVerifies(r io.ReaderAt, pos int64, g groupEnd, notBefore int64) (bool, error) {
	start, end := g.start(pos), pos+groupEndSize
	if start < notBefore {
		return false, nil
	}
	gr := newGroupReader(io.NewSectionReader(r, start, end-start), start, end)
	if _, err := gr.next(g.first); err != nil {
		if isFrameError(err) {
			return false, nil
		}
		return false, err
	}
	return gr.off == end, nil
}
