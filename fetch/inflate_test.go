package fetch

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/diskless-sidecar/sidecar/internal/batch"
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

// TestSnappyReader is the corruption table of the snappy framings.
func TestSnappyReader(t *testing.T) {
	raw := make([]byte, 80_000)
	for i := range raw {
		raw[i] = byte(i * i >> 5) // compressible, not trivially
	}
	block := s2.EncodeSnappy(nil, raw)
	xerial := xerialFrame(raw, 32<<10)
	// claims returns a raw block whose header claims n decoded bytes and
	// whose body is size bytes of junk.
	claims := func(n uint64, size int) []byte {
		return append(binary.AppendUvarint(nil, n), make([]byte, size)...)
	}
	chunk := func(b []byte) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...) }
	header := xerial[:xerialHeaderSize]
	for _, tc := range []struct {
		name string
		src  []byte
		want []byte // nil: an error
		err  string // in the error
	}{
		{name: "raw block", src: block, want: raw},
		{name: "xerial", src: xerial, want: raw},
		{name: "xerial with empty input", src: append(append([]byte{}, header...), chunk(s2.EncodeSnappy(nil, nil))...), want: []byte{}},
		{name: "raw block claiming more than snappy can hold", src: claims(1000, 10), err: "claims"},
		{name: "raw block claiming 4 GiB", src: claims(1<<32-1, 10), err: "claims"},
		{name: "raw block shorter than it claims", src: block[:len(block)-5], err: "corrupt"},
		{name: "bad length header", src: []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, err: "corrupt"},
		{name: "xerial chunk length truncated", src: append(append([]byte{}, header...), 0, 0, 1), err: "truncated"},
		{name: "xerial chunk past the end", src: append(append([]byte{}, header...), 0, 0, 1, 0, 1), err: "left"},
		{name: "xerial chunk of 4 GiB", src: append(append([]byte{}, header...), 0xff, 0xff, 0xff, 0xff, 1), err: "left"},
		{name: "xerial empty chunk", src: append(append([]byte{}, header...), 0, 0, 0, 0), err: "corrupt"},
		{name: "xerial header alone is a (bad) raw block", src: header, err: "snappy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := io.ReadAll(newSnappyReader(tc.src))
			switch {
			case tc.want != nil && (err != nil || !bytes.Equal(got, tc.want)):
				t.Errorf("got %d bytes, %v; want %d bytes", len(got), err, len(tc.want))
			case tc.want == nil && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v, want one saying %q", err, tc.err)
			}
		})
	}
}

// FuzzDecompressRecords scans arbitrary bytes as a records section under
// every codec: no panic, and the heap grows by no more than a codec's
// bounded working set (the zstd window at most, a snappy block at most
// maxSnappyExpansion × the input).
func FuzzDecompressRecords(f *testing.F) {
	raw := recordsOf(100, 1000, 2000, 3000)
	for _, c := range []int8{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd} {
		f.Add(uint8(c), compress(f, c, raw), int32(3))
	}
	f.Add(uint8(batch.CodecSnappy), xerialFrame(raw, 100), int32(3))
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
		if n > zstdMaxWindow+4<<20+uint64(maxSnappyExpansion+1)*uint64(len(src)) {
			t.Fatalf("allocated %d MiB", n>>20)
		}
	})
}
