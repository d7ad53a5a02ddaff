package coordinator

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"testing"
)

// The embedded metadata log's segment layout as
// docs/format/metadata-records.md specifies it, for the tests that damage
// a shard's log on disk (package metalog owns the implementation).
const (
	segmentHeaderSize = 16
	frameHeaderSize   = 8
	groupEndSize      = 32
)

// appendFrame appends body framed as one record: its length, the CRC-32C
// of the length bytes and the body, the body.
func appendFrame(dst, body []byte) []byte {
	var hdr [frameHeaderSize]byte
	binary.BigEndian.PutUint32(hdr[:4], uint32(len(body)))
	tab := crc32.MakeTable(crc32.Castagnoli)
	binary.BigEndian.PutUint32(hdr[4:], crc32.Update(crc32.Checksum(hdr[:4], tab), tab, body))
	return append(append(dst, hdr[:]...), body...)
}

// frameOffsets returns the byte offset of every record frame of an
// undamaged segment (group ends skipped).
func frameOffsets(t *testing.T, path string) []int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for off := segmentHeaderSize; off < len(b); {
		if string(b[off:off+4]) == "DSGE" {
			off += groupEndSize
			continue
		}
		out = append(out, int64(off))
		off += frameHeaderSize + int(binary.BigEndian.Uint32(b[off:]))
	}
	if len(out) > 0 && out[len(out)-1] > int64(len(b)) {
		t.Fatalf("%s: a frame runs past the end", path)
	}
	return out
}

// flip flips one bit of the byte at off.
func flip(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}
