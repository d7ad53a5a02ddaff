package coordinator

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// Frame layout (docs/format/metadata-records.md §Frame):
//
//	+0 length uint32  body bytes, 1 … MaxRecordBytes
//	+4 crc    uint32  CRC-32C over the length bytes and the body
//	+8 body
const frameHeaderSize = 8

// MaxRecordBytes is the largest metadata record body, in bytes (64 MiB). A
// frame announcing more is treated as garbage, not a record.
const MaxRecordBytes = 64 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Frame errors. A frame that fails with one of these at the tail of the
// last segment is a torn write; elsewhere it is corruption.
var (
	// errFrameShort: the frame's header or body runs past the end of the data.
	errFrameShort = errors.New("short frame")
	// errFrameLength: the length field is 0 or above MaxRecordBytes.
	errFrameLength = errors.New("invalid frame length")
	// errFrameCRC: the CRC does not match.
	errFrameCRC = errors.New("frame CRC mismatch")
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

// decodeFrame parses the frame at the start of b and returns its body
// (aliasing b) and the frame's total size. Errors: errFrameShort,
// errFrameLength, errFrameCRC (wrapped).
func decodeFrame(b []byte) (body []byte, size int, err error) {
	if len(b) < frameHeaderSize {
		return nil, 0, errFrameShort
	}
	n, err := frameLength(b)
	if err != nil {
		return nil, 0, err
	}
	if len(b)-frameHeaderSize < n {
		return nil, 0, errFrameShort
	}
	body = b[frameHeaderSize : frameHeaderSize+n]
	if err := checkFrameCRC(b[:frameHeaderSize], body); err != nil {
		return nil, 0, err
	}
	return body, frameHeaderSize + n, nil
}

// frameReader reads frames from a stream, reusing one body buffer.
type frameReader struct {
	r   *bufio.Reader
	buf []byte
	hdr [frameHeaderSize]byte
	// off is the byte offset, in the stream, of the end of the last good
	// frame.
	off int64
	// end is the offset where the data ends: a frame announcing more bytes
	// than are left is short, without reading (or allocating) its body.
	end int64
}

// newFrameReader reads frames from r, whose first byte is at offset off and
// whose data ends at offset end.
func newFrameReader(r io.Reader, off, end int64) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 1<<20), off: off, end: end}
}

// next returns the next frame's body, valid until the next call. It returns
// io.EOF at a clean end, and errFrameShort, errFrameLength or errFrameCRC
// (wrapped) for a bad frame; fr.off is then the offset of that frame.
func (fr *frameReader) next() ([]byte, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		if err == io.ErrUnexpectedEOF {
			return nil, errFrameShort
		}
		return nil, err
	}
	n, err := frameLength(fr.hdr[:])
	if err != nil {
		return nil, err
	}
	if fr.off+frameHeaderSize+int64(n) > fr.end {
		return nil, errFrameShort
	}
	if cap(fr.buf) < n {
		fr.buf = make([]byte, n)
	}
	body := fr.buf[:n]
	if _, err := io.ReadFull(fr.r, body); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, errFrameShort
		}
		return nil, err
	}
	if err := checkFrameCRC(fr.hdr[:], body); err != nil {
		return nil, err
	}
	fr.off += int64(frameHeaderSize + n)
	return body, nil
}

// isFrameError reports whether err describes a bad frame (as opposed to an
// IO error).
func isFrameError(err error) bool {
	return errors.Is(err, errFrameShort) || errors.Is(err, errFrameLength) || errors.Is(err, errFrameCRC)
}

// scanWindow is how many bytes findFrame reads at a time.
const scanWindow = 1 << 20

// findFrame looks for a valid frame — a length in range, a body that fits
// before end and a matching CRC — starting at any byte offset in
// [from, end) of r. It returns the offset of the first one, or −1. It is
// how Replay tells a torn tail (nothing valid after the bad frame) from
// corruption in the middle of the last segment (acknowledged frames follow
// the bad one). Each candidate costs one CRC over its claimed body, so the
// scan is linear in the bytes after a bad frame for realistic data, and
// stops at the first valid frame.
func findFrame(r io.ReaderAt, from, end int64) (int64, error) {
	buf := make([]byte, scanWindow+frameHeaderSize)
	for base := from; base+frameHeaderSize <= end; base += scanWindow {
		n := int(min(int64(len(buf)), end-base))
		if _, err := r.ReadAt(buf[:n], base); err != nil && err != io.EOF {
			return -1, err
		}
		for i := 0; i < scanWindow && i+frameHeaderSize <= n; i++ {
			hdr := buf[i : i+frameHeaderSize]
			l, err := frameLength(hdr)
			pos := base + int64(i)
			if err != nil || pos+frameHeaderSize+int64(l) > end {
				continue
			}
			var ok bool
			if i+frameHeaderSize+l <= n {
				ok = checkFrameCRC(hdr, buf[i+frameHeaderSize:i+frameHeaderSize+l]) == nil
			} else {
				// The body runs past the window: stream it.
				h := crc32.New(castagnoli)
				h.Write(hdr[0:4])
				if _, err := io.Copy(h, io.NewSectionReader(r, pos+frameHeaderSize, int64(l))); err != nil {
					return -1, err
				}
				ok = h.Sum32() == binary.BigEndian.Uint32(hdr[4:8])
			}
			if ok {
				return pos, nil
			}
		}
	}
	return -1, nil
}
