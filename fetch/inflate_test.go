package fetch

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/batchtest"
)

// TestTimedReader: reads pass through before the deadline, and fail with
// errScanTime at and after it.
func TestTimedReader(t *testing.T) {
	src := bytes.NewReader(make([]byte, 10))
	r := &timedReader{r: src, deadline: time.Now().Add(time.Hour)}
	if n, err := r.Read(make([]byte, 4)); n != 4 || err != nil {
		t.Errorf("before the deadline: %d bytes, %v", n, err)
	}
	r.deadline = time.Now()
	if n, err := r.Read(make([]byte, 4)); n != 0 || !errors.Is(err, errScanTime) {
		t.Errorf("at the deadline: %d bytes, %v; want errScanTime", n, err)
	}
	if src.Len() != 6 {
		t.Errorf("%d bytes left, want 6: a late read reads nothing", src.Len())
	}
}

// FuzzDecompressRecords scans arbitrary bytes as a records section under
// every codec: no panic, and the heap grows by no more than a codec's
// bounded working set (the zstd window at most, a snappy block at most
// batch.MaxSnappyExpansion × the input).
func FuzzDecompressRecords(f *testing.F) {
	raw := recordsOf(100, 1000, 2000, 3000)
	for _, c := range []int8{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd} {
		f.Add(uint8(c), compress(f, c, raw), int32(3))
	}
	f.Add(uint8(batch.CodecSnappy), batchtest.XerialFrame(raw, 100), int32(3))
	f.Add(uint8(batch.CodecZstd), zstdBomb(f, 1<<20, 4<<20), int32(3))
	f.Fuzz(func(t *testing.T, codec uint8, src []byte, count int32) {
		c := int8(codec % 5)
		n := allocated(func() {
			var r io.Reader = bytes.NewReader(src)
			if c != batch.CodecNone {
				dr, done, err := decompressed(c, src)
				if err != nil {
					return
				}
				defer done()
				r = &timedReader{r: dr, deadline: time.Now().Add(time.Second)}
			}
			_ = scanRecords(bufio.NewReaderSize(r, scanBufferSize), recordsSpan{lastOffsetDelta: max(count-1, 0), count: count},
				func(int64, int64) bool { return true })
		})
		if n > zstdMaxWindow+4<<20+uint64(batch.MaxSnappyExpansion+1)*uint64(len(src)) {
			t.Fatalf("allocated %d MiB", n>>20)
		}
	})
}
