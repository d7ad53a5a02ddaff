package metalog

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"strings"
	"testing"
)

// TestUnfinishedRollIsDropped: a last segment that holds no record after
// another — a roll whose header never became durable (zeros, or nothing),
// or one that failed while appends went on in the segment before — is
// removed at open, and every record is replayed.
func TestUnfinishedRollIsDropped(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stray []byte
		after int // records appended to segment 0 after the failed roll
	}{
		{"empty file, appends went on", nil, 2},
		{"zeroed header, appends went on", make([]byte, segmentHeaderSize), 2},
		{"zeroed header, crash right after the roll", make([]byte, segmentHeaderSize), 0},
		{"valid header, crash right after the roll", segmentHeader(3), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openTestLog(t, dir, nil)
			replayAll(t, l, 0)
			if err := l.Append(context.Background(), bodies("a", 3)); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(l.segmentPath(3), tc.stray, 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.after > 0 {
				if err := l.Append(context.Background(), bodies("b", tc.after)); err != nil {
					t.Fatal(err)
				}
			}
			l.Close()
			l2 := openTestLog(t, dir, nil)
			got, next, err := replayAll(t, l2, 0)
			if err != nil {
				t.Fatalf("open after an unfinished segment roll: %v", err)
			}
			if want := int64(3 + tc.after); next != want || len(got) != int(want) {
				t.Fatalf("replayed %d records, next %d; want %d", len(got), next, want)
			}
			if err := l2.Append(context.Background(), bodies("c", 1)); err != nil {
				t.Fatal(err)
			}
			l2.Close()
			l3 := openTestLog(t, dir, nil)
			if _, next, err := replayAll(t, l3, 0); err != nil || next != int64(4+tc.after) {
				t.Fatalf("reopen after appending: next %d, %v", next, err)
			}
		})
	}
}

// TestOlderSnapshotRefusedByName: a whole snapshot of an older format
// version (its segments before it deleted) refuses start-up naming the
// version and what to do, not as records gone missing.
func TestOlderSnapshotRefusedByName(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, nil)
	replayAll(t, l, 0)
	ctx := context.Background()
	if err := l.Append(ctx, bodies("a", 3)); err != nil {
		t.Fatal(err)
	}
	if err := snapshot(l, 3, []byte("state")); err != nil {
		t.Fatal(err)
	}
	l.Close()
	p := l.snapshotPath(3)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint32(b[4:], snapshotFormatVersion-1) // as an older build wrote it
	binary.BigEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = openTestLog(t, dir, nil).ReadSnapshot(ctx)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "older pre-release build") {
		t.Fatalf("LoadSnapshot of an older-format snapshot: %v, want ErrCorrupt naming an older build", err)
	}
}
