package fetch

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"

	"github.com/diskless-sidecar/sidecar/internal/batch"
)

func TestBudgetReader(t *testing.T) {
	for _, tc := range []struct {
		name          string
		size, budget  int64
		wantTooLarge  bool
		wantReadBytes int64
	}{
		{name: "under", size: 10, budget: 11, wantReadBytes: 10},
		{name: "exactly the budget", size: 10, budget: 10, wantReadBytes: 10},
		{name: "empty, no budget", size: 0, budget: 0},
		{name: "one byte over", size: 11, budget: 10, wantTooLarge: true, wantReadBytes: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &budgetReader{r: bytes.NewReader(make([]byte, tc.size)), left: tc.budget}
			n, err := io.Copy(io.Discard, b)
			if errors.Is(err, errTooLarge) != tc.wantTooLarge || (!tc.wantTooLarge && err != nil) || n != tc.wantReadBytes {
				t.Errorf("read %d bytes, error %v; want %d, too large %v", n, err, tc.wantReadBytes, tc.wantTooLarge)
			}
		})
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
		name  string
		src   []byte
		limit int64
		want  []byte // nil: an error
		err   string // in the error
	}{
		{name: "raw block", src: block, limit: 1 << 20, want: raw},
		{name: "xerial", src: xerial, limit: 1 << 20, want: raw},
		{name: "xerial with empty input", src: append(append([]byte{}, header...), chunk(s2.EncodeSnappy(nil, nil))...), limit: 1, want: []byte{}},
		{name: "raw block over the limit", src: block, limit: int64(len(raw)) - 1, err: "too large"},
		{name: "xerial: the chunk that passes the limit", src: xerial, limit: 40 << 10, err: "too large"},
		{name: "raw block claiming more than snappy can hold", src: claims(1000, 10), limit: 1 << 20, err: "claims"},
		{name: "raw block claiming 4 GiB", src: claims(1<<32-1, 10), limit: 1 << 20, err: "too large"},
		{name: "raw block shorter than it claims", src: block[:len(block)-5], limit: 1 << 20, err: "corrupt"},
		{name: "bad length header", src: []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, limit: 1 << 20, err: "corrupt"},
		{name: "xerial chunk length truncated", src: append(append([]byte{}, header...), 0, 0, 1), limit: 1 << 20, err: "truncated"},
		{name: "xerial chunk past the end", src: append(append([]byte{}, header...), 0, 0, 1, 0, 1), limit: 1 << 20, err: "left"},
		{name: "xerial chunk of 4 GiB", src: append(append([]byte{}, header...), 0xff, 0xff, 0xff, 0xff, 1), limit: 1 << 20, err: "left"},
		{name: "xerial empty chunk", src: append(append([]byte{}, header...), 0, 0, 0, 0), limit: 1 << 20, err: "corrupt"},
		{name: "xerial header alone is a (bad) raw block", src: header, limit: 1 << 20, err: "snappy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := io.ReadAll(newSnappyReader(tc.src, tc.limit))
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
// every codec: no panic, nothing read past the budget, and the heap grows by
// no more than a codec's bounded working set (the zstd window at most).
func FuzzDecompressRecords(f *testing.F) {
	raw := recordsOf(100, 1000, 2000, 3000)
	for _, c := range []int8{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd} {
		f.Add(uint8(c), compress(f, c, raw), int32(3))
	}
	f.Add(uint8(batch.CodecSnappy), xerialFrame(raw, 100), int32(3))
	f.Add(uint8(batch.CodecZstd), zstdBomb(f, 1<<20, 4<<20), int32(3))
	const budget = 1 << 20
	f.Fuzz(func(t *testing.T, codec uint8, src []byte, count int32) {
		c := int8(codec % 5)
		var read int64
		n := allocated(func() {
			var r io.Reader = bytes.NewReader(src)
			if c != batch.CodecNone {
				dr, done, err := decompressed(c, src, budget)
				if err != nil {
					return
				}
				defer done()
				b := &budgetReader{r: dr, left: budget}
				defer func() { read = budget - b.left }()
				r = b
			}
			_ = scanRecords(bufio.NewReaderSize(r, scanBufferSize), recordsSpan{lastOffsetDelta: max(count-1, 0), count: count},
				func(int64, int64) bool { return true })
		})
		if read > budget {
			t.Fatalf("read %d bytes, budget %d", read, budget)
		}
		if n > zstdMaxWindow+4<<20+uint64(len(src)) {
			t.Fatalf("allocated %d MiB", n>>20)
		}
	})
}
