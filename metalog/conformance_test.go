package metalog_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/diskless-sidecar/sidecar/metalog"
	"github.com/diskless-sidecar/sidecar/metalog/metalogtest"
)

func TestFileLogConformance(t *testing.T) {
	metalogtest.Run(t, metalogtest.Backend{New: func(t *testing.T) metalogtest.Store {
		return &fileStore{dir: t.TempDir()}
	}})
}

// fileStore keeps each shard's FileLog in dir/shard-<n>.
type fileStore struct{ dir string }

func (s *fileStore) shardDir(shard int32) string {
	return filepath.Join(s.dir, fmt.Sprintf("shard-%d", shard))
}

func (s *fileStore) Open(shard int32) (metalog.Log, error) {
	return metalog.OpenFileLog(s.shardDir(shard), slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// Tear damages the last group of shard's last segment the ways a crash
// during its write can leave it (docs/format/metadata-records.md §Torn
// tail rule: pages of one write persist in any order, the file's size
// anywhere from the group's start to its end), found from the format as
// documented: the segment ends with the group's 32-byte group end, whose
// length field says where the group's frames start.
func (s *fileStore) Tear(t *testing.T, shard int32, variant int) bool {
	const (
		groupEndSize    = 32
		frameHeaderSize = 8
	)
	segs, err := filepath.Glob(filepath.Join(s.shardDir(shard), "*.log"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segment: %v", err)
	}
	slices.Sort(segs)
	path := segs[len(segs)-1]
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	end := len(b) - groupEndSize
	if end < 0 || string(b[end:end+4]) != "DSGE" {
		t.Fatalf("%s does not end with a group end", path)
	}
	start := end - int(binary.BigEndian.Uint64(b[end+16:]))
	firstLen := int(binary.BigEndian.Uint32(b[start:]))
	mid := start + frameHeaderSize + firstLen // the group's second frame
	damage := []func([]byte) []byte{
		func(b []byte) []byte { return b[:start+4] },                     // half a frame header
		func(b []byte) []byte { return b[:start+frameHeaderSize+1] },     // a body cut short
		func(b []byte) []byte { return b[:end] },                         // every frame, no group end
		func(b []byte) []byte { return b[:end+groupEndSize/2] },          // half a group end
		func(b []byte) []byte { b[len(b)-1] ^= 0x40; return b },          // the group end's CRC
		func(b []byte) []byte { clear(b[end:]); return b },               // the group end's pages lost
		func(b []byte) []byte { b[mid+frameHeaderSize] ^= 1; return b },  // a middle frame's page lost, the rest whole
		func(b []byte) []byte { clear(b[start:mid]); return b },          // the first frame's page lost
		func(b []byte) []byte { return append(b, make([]byte, 100)...) }, // zeros past the end
		func(b []byte) []byte { return b },                               // nothing lost: durable, not yet acknowledged
	}
	if variant >= len(damage) {
		return false
	}
	if err := os.WriteFile(path, damage[variant](b), 0o644); err != nil {
		t.Fatal(err)
	}
	return true
}
