package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// minRequestFrame is the smallest request frame that holds the fixed part of
// a request header: api key, api version and correlation id.
const minRequestFrame = 8

// readChunk is how much of a frame is allocated ahead of the bytes actually
// received: frames up to it (nearly every produce request: clients cap
// batches at about 1 MiB) are read into one exact allocation; larger ones
// grow as their bytes arrive, so a client announcing a huge frame and
// sending little costs at most this much memory.
const readChunk = 8 << 20

// errFrame marks malformed framing or headers; the connection is closed.
var errFrame = errors.New("malformed request")

// readFrameSize reads a frame's 4-byte size prefix and checks it against
// [minRequestFrame, maxSize]. read is how many prefix bytes were consumed
// (0 on a clean timeout between frames). io.EOF means the peer closed
// cleanly between frames; a size out of range is reported as errFrame.
func readFrameSize(r io.Reader, maxSize int32) (n int32, read int, err error) {
	var sz [4]byte
	read, err = io.ReadFull(r, sz[:])
	if err != nil {
		if read > 0 {
			err = unexpectedEOF(err)
		}
		return 0, read, err
	}
	n = int32(binary.BigEndian.Uint32(sz[:]))
	if n < minRequestFrame || n > maxSize {
		return 0, read, fmt.Errorf("%w: frame size %d outside [%d, %d]", errFrame, n, minRequestFrame, maxSize)
	}
	return n, read, nil
}

// readFrameBody reads the n bytes of a frame whose size was read.
func readFrameBody(r io.Reader, n int32) ([]byte, error) {
	if n <= readChunk {
		buf := make([]byte, n)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, unexpectedEOF(err)
		}
		return buf, nil
	}
	// Grow the buffer as the bytes arrive (doubling, in steps of at least
	// readChunk) instead of trusting the announced size up front.
	buf := make([]byte, 0, readChunk)
	for len(buf) < int(n) {
		step := min(int(n)-len(buf), max(len(buf), readChunk))
		if cap(buf)-len(buf) < step {
			grown := make([]byte, len(buf), len(buf)+step)
			copy(grown, buf)
			buf = grown
		}
		m, err := io.ReadFull(r, buf[len(buf):len(buf)+step])
		buf = buf[:len(buf)+m]
		if err != nil {
			return nil, unexpectedEOF(err)
		}
	}
	return buf, nil
}

// unexpectedEOF turns an EOF inside a frame into io.ErrUnexpectedEOF.
func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// header is the fixed part of a request header (v1/v2).
type header struct {
	key           int16
	version       int16
	correlationID int32
}

// parseFixedHeader reads the api key, version and correlation id.
func parseFixedHeader(frame []byte) header {
	return header{
		key:           int16(binary.BigEndian.Uint16(frame[0:])),
		version:       int16(binary.BigEndian.Uint16(frame[2:])),
		correlationID: int32(binary.BigEndian.Uint32(frame[4:])),
	}
}

// parseHeaderRest reads the client id and, for flexible requests (header
// v2), the header's tagged fields; it returns the client id and the body.
func parseHeaderRest(frame []byte, flexible bool) (clientID *string, body []byte, err error) {
	b := kbin.Reader{Src: frame[minRequestFrame:]}
	clientID = b.NullableString()
	if flexible {
		kmsg.SkipTags(&b)
	}
	if err := b.Complete(); err != nil {
		return nil, nil, fmt.Errorf("%w: request header: %v", errFrame, err)
	}
	return clientID, b.Src, nil
}

// appendResponse appends a whole response frame (size, header, body) to dst.
// flexibleHeader selects response header v1 (an empty tagged-field section
// after the correlation id); ApiVersions always uses v0.
func appendResponse(dst []byte, correlationID int32, flexibleHeader bool, resp kmsg.Response) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if flexibleHeader {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	n := len(dst) - start - 4
	if n > 1<<31-1 {
		return dst[:start], fmt.Errorf("response of %d bytes does not fit a frame", n)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(n))
	return dst, nil
}
