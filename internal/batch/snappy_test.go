package batch_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"

	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/batchtest"
)

// TestSnappyReader is the corruption table of the snappy framings.
func TestSnappyReader(t *testing.T) {
	raw := make([]byte, 80_000)
	for i := range raw {
		raw[i] = byte(i * i >> 5) // compressible, not trivially
	}
	block := s2.EncodeSnappy(nil, raw)
	xerial := batchtest.XerialFrame(raw, 32<<10)
	// claims returns a raw block whose header claims n decoded bytes and
	// whose body is size bytes of junk.
	claims := func(n uint64, size int) []byte {
		return append(binary.AppendUvarint(nil, n), make([]byte, size)...)
	}
	chunk := func(b []byte) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...) }
	header := xerial[:16]
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
			got, err := io.ReadAll(batch.NewSnappyReader(tc.src))
			switch {
			case tc.want != nil && (err != nil || !bytes.Equal(got, tc.want)):
				t.Errorf("got %d bytes, %v; want %d bytes", len(got), err, len(tc.want))
			case tc.want == nil && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v, want one saying %q", err, tc.err)
			}
		})
	}
}
