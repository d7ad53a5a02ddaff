package diskless

import (
	"hash/fnv"
	"math"
	"reflect"
	"testing"
)

func TestShardFor(t *testing.T) {
	id := TopicID{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8}
	// Pinned: every sidecar, every version, must compute the same.
	golden := []int32{ShardFor(id, 0, 7), ShardFor(id, 1, 7), ShardFor(id, 2, 7), ShardFor(TopicID{}, 0, 50)}
	if want := []int32{golden[0], (golden[0] + 1) % 7, (golden[0] + 2) % 7}; !reflect.DeepEqual(golden[:3], want) {
		t.Fatalf("partitions not round-robin: %v", golden)
	}
	h := fnv.New32a()
	h.Write(make([]byte, 16))
	if want := int32(uint64(h.Sum32()) % 50); golden[3] != want {
		t.Fatalf("ShardFor(zero id, 0, 50) = %d, want %d", golden[3], want)
	}
	for _, tc := range []struct {
		p, n, want int32
	}{{0, 0, 0}, {5, -1, 0}, {-1, 4, 0}, {math.MaxInt32, 1, 0}} {
		if got := ShardFor(id, tc.p, tc.n); got != tc.want {
			t.Fatalf("ShardFor(id, %d, %d) = %d, want %d", tc.p, tc.n, got, tc.want)
		}
	}
	if got := ShardFor(id, math.MaxInt32, 1024); got < 0 || got >= 1024 {
		t.Fatalf("out of range: %d", got)
	}
}

func TestTopicIDString(t *testing.T) {
	id := TopicID{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6, 7, 0xff}
	if got, want := id.String(), "12345678-9abc-def0-0102-0304050607ff"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

func TestFileStateString(t *testing.T) {
	for fs, want := range map[FileState]string{FileUnknown: "unknown", FileLive: "live", FileReleased: "released",
		FileClosed: "closed", 9: "FileState(9)"} {
		if got := fs.String(); got != want {
			t.Fatalf("%d.String() = %q, want %q", int8(fs), got, want)
		}
	}
}

func TestServedEstimate(t *testing.T) {
	for _, tc := range []struct {
		base, last int64
		size       int32
		offset     int64
		want       int64
	}{
		{0, 9, 1000, 0, 1000},                         // from the base: the whole run
		{0, 9, 1000, -5, 1000},                        // below it too
		{0, 9, 1000, 8, 200},                          // the last 2 of 10 offsets
		{0, 9, 1000, 9, 100},                          // the last offset
		{0, 9, 1000, 10, 0},                           // past the run
		{5, 5, 300, 5, 300},                           // a run of one offset
		{0, 1<<31 - 1, 1<<31 - 1, 1 << 30, 1<<30 - 1}, // the largest spans do not overflow
	} {
		if got := ServedEstimate(tc.base, tc.last, tc.size, tc.offset); got != tc.want {
			t.Errorf("ServedEstimate(%d, %d, %d, %d) = %d, want %d", tc.base, tc.last, tc.size, tc.offset, got, tc.want)
		}
	}
}
