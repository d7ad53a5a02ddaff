package metalog

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// logBuffer collects log output for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// frameOffsets returns the byte offset of every record frame of a
// segment (group ends skipped).
func frameOffsets(t *testing.T, path string) []int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for off := segmentHeaderSize; off < len(b); {
		if isGroupEnd(b[off:]) {
			off += groupEndSize
			continue
		}
		_, n, err := decodeFrame(b[off:])
		if err != nil {
			t.Fatalf("frame at %d: %v", off, err)
		}
		out = append(out, int64(off))
		off += n
	}
	return out
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
