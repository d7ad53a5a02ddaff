package coordinator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func openTestLog(t *testing.T, dir string, logs *logBuffer) *fileLog {
	t.Helper()
	logger := discardLogger()
	if logs != nil {
		logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	l, err := openFileLog(dir, logger)
	if err != nil {
		t.Fatalf("openFileLog: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func replayAll(t *testing.T, l *fileLog, from int64) ([][]byte, int64, error) {
	t.Helper()
	var got [][]byte
	next, err := l.Replay(context.Background(), from, func(index int64, body []byte) error {
		if want := from + int64(len(got)); index != want {
			t.Fatalf("index %d, want %d", index, want)
		}
		got = append(got, append([]byte(nil), body...))
		return nil
	})
	return got, next, err
}

func bodies(prefix string, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(fmt.Sprintf("%s-%d-%s", prefix, i, strings.Repeat("x", i)))
	}
	return out
}

func TestFileLogAppendReplay(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "shard-0")
	l := openTestLog(t, dir, nil)
	if _, _, err := replayAll(t, l, 0); err != nil {
		t.Fatal(err)
	}
	want := append(bodies("g1", 3), bodies("g2", 5)...)
	if err := l.Append(context.Background(), want[:3]); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(context.Background(), want[3:]); err != nil {
		t.Fatal(err)
	}
	if got := l.syncs.Load(); got != 2 {
		t.Fatalf("%d data fsyncs for 2 appends", got)
	}
	l.Close()

	l = openTestLog(t, dir, nil)
	got, next, err := replayAll(t, l, 0)
	if err != nil {
		t.Fatal(err)
	}
	if next != 8 || !reflect.DeepEqual(got, want) {
		t.Fatalf("replayed %d records (next %d), want %d", len(got), next, len(want))
	}
	got, _, err = replayAll(t, l, 5)
	if err != nil || !reflect.DeepEqual(got, want[5:]) {
		t.Fatalf("replay from 5: %d records, %v", len(got), err)
	}
}

func TestFileLogAppendBeforeReplay(t *testing.T) {
	l := openTestLog(t, t.TempDir(), nil)
	if err := l.Append(context.Background(), bodies("x", 1)); err == nil {
		t.Fatal("append before replay succeeded")
	}
}

// TestFileLogDamagedLastSegment damages the only (so the last) segment.
// Damage that a crash can cause — bad bytes with nothing valid after them
// — is a torn tail: reopening keeps exactly the intact records, truncates
// the rest with a warning, and appends after them. A bad frame followed
// by a valid one held acknowledged records: reopening fails with
// ErrCorrupt naming the file and byte offset, and leaves the file alone.
func TestFileLogDamagedLastSegment(t *testing.T) {
	records := bodies("r", 22)
	frameStart := make([]int64, len(records)+1) // frameStart[i]: offset of frame i
	frameStart[0] = segmentHeaderSize
	for i, b := range records {
		frameStart[i+1] = frameStart[i] + int64(frameHeaderSize+len(b))
	}
	n := len(records)
	cases := []struct {
		name   string
		damage func(t *testing.T, path string, size int64)
		// keep is how many records survive a torn tail; −1: the log is
		// corrupt at byte corruptAt.
		keep      int
		corruptAt int64
	}{
		{"clean", func(*testing.T, string, int64) {}, n, 0},
		{"torn: half a frame header", func(t *testing.T, p string, size int64) { truncate(t, p, frameStart[n-1]+4) }, n - 1, 0},
		{"torn: half a body", func(t *testing.T, p string, size int64) { truncate(t, p, size-3) }, n - 1, 0},
		{"torn: bad crc in last frame", func(t *testing.T, p string, size int64) { flip(t, p, size-1) }, n - 1, 0},
		{"torn: bad length in last frame", func(t *testing.T, p string, size int64) { flip(t, p, frameStart[n-1]) }, n - 1, 0},
		{"torn: zeros appended", func(t *testing.T, p string, size int64) { appendBytes(t, p, make([]byte, 100)) }, n, 0},
		{"torn: length too large appended", func(t *testing.T, p string, size int64) {
			appendBytes(t, p, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1})
		}, n, 0},
		{"torn: zeroed last two frames", func(t *testing.T, p string, size int64) {
			zero(t, p, frameStart[n-2], size-frameStart[n-2])
		}, n - 2, 0},
		{"corrupt: bad crc in frame 7 of 22", func(t *testing.T, p string, size int64) { flip(t, p, frameStart[8]-1) }, -1, frameStart[7]},
		{"corrupt: bad crc in the next to last frame", func(t *testing.T, p string, size int64) { flip(t, p, frameStart[n-1]-1) }, -1, frameStart[n-2]},
		{"corrupt: bad length in frame 7", func(t *testing.T, p string, size int64) { flip(t, p, frameStart[7]+1) }, -1, frameStart[7]},
		{"corrupt: zeroed frame 3", func(t *testing.T, p string, size int64) {
			zero(t, p, frameStart[3], frameStart[4]-frameStart[3])
		}, -1, frameStart[3]},
		{"corrupt: frame 7 cut out", func(t *testing.T, p string, size int64) {
			b, _ := os.ReadFile(p)
			os.WriteFile(p, append(b[:frameStart[7]:frameStart[7]], b[frameStart[7]+5:]...), 0o644)
		}, -1, frameStart[7]},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openTestLog(t, dir, nil)
			replayAll(t, l, 0)
			if err := l.Append(context.Background(), records[:n/2]); err != nil {
				t.Fatal(err)
			}
			if err := l.Append(context.Background(), records[n/2:]); err != nil {
				t.Fatal(err)
			}
			l.Close()
			path := l.segmentPath(0)
			st, _ := os.Stat(path)
			tc.damage(t, path, st.Size())
			damaged, _ := os.ReadFile(path)

			logs := &logBuffer{}
			l = openTestLog(t, dir, logs)
			got, next, err := replayAll(t, l, 0)
			if tc.keep < 0 {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("replay: %v, want ErrCorrupt", err)
				}
				if want := fmt.Sprintf("%s at byte %d ", path, tc.corruptAt); !strings.Contains(err.Error(), want) {
					t.Fatalf("error %q does not name %q", err, want)
				}
				if after, _ := os.ReadFile(path); !bytes.Equal(after, damaged) {
					t.Fatal("corrupt segment was modified")
				}
				if err := l.Append(context.Background(), bodies("x", 1)); err == nil {
					t.Fatal("append to a corrupt log succeeded")
				}
				return
			}
			if err != nil {
				t.Fatalf("replay: %v", err)
			}
			if next != int64(tc.keep) || !reflect.DeepEqual(got, records[:tc.keep]) {
				t.Fatalf("kept %d records (next %d), want %d", len(got), next, tc.keep)
			}
			wantSize := frameStart[tc.keep]
			after, _ := os.Stat(path)
			if after.Size() != wantSize {
				t.Fatalf("file is %d bytes after repair, want %d", after.Size(), wantSize)
			}
			dropped := int64(len(damaged)) - wantSize
			if dropped > 0 && !strings.Contains(logs.String(), fmt.Sprintf("dropped_bytes=%d", dropped)) {
				t.Fatalf("no warning naming %d dropped bytes in log:\n%s", dropped, logs.String())
			}
			if dropped == 0 && logs.String() != "" {
				t.Fatalf("unexpected log output: %s", logs.String())
			}
			// Appending after the repair works and survives a reopen.
			if err := l.Append(context.Background(), bodies("after", 1)); err != nil {
				t.Fatal(err)
			}
			l.Close()
			l = openTestLog(t, dir, nil)
			got, _, err = replayAll(t, l, 0)
			if err != nil || len(got) != tc.keep+1 || string(got[tc.keep]) != string(bodies("after", 1)[0]) {
				t.Fatalf("after re-append: %d records, %v", len(got), err)
			}
		})
	}
}

// TestFindFrame pins the scan that tells a torn tail from corruption,
// including frames larger than its read window.
func TestFindFrame(t *testing.T) {
	big := bytes.Repeat([]byte{0x5a}, scanWindow+1000)
	cases := []struct {
		name string
		data []byte
		from int64
		want int64
	}{
		{"empty", nil, 0, -1},
		{"zeros", make([]byte, 3*frameHeaderSize), 0, -1},
		{"frame at start", appendFrame(nil, []byte("abc")), 0, 0},
		{"after garbage", append([]byte{1, 2, 3}, appendFrame(nil, []byte("abc"))...), 0, 3},
		{"from skips it", append([]byte{1, 2, 3}, appendFrame(nil, []byte("abc"))...), 4, -1},
		{"truncated frame", appendFrame(nil, []byte("abcdef"))[:10], 0, -1},
		{"bad crc", func() []byte { b := appendFrame(nil, []byte("abc")); b[9] ^= 1; return b }(), 0, -1},
		{"frame larger than the window", append(make([]byte, 7), appendFrame(nil, big)...), 1, 7},
		{"frame across windows", append(make([]byte, scanWindow-4), appendFrame(nil, []byte("xyz"))...), 0, scanWindow - 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := findFrame(bytes.NewReader(tc.data), tc.from, int64(len(tc.data)))
			if err != nil || got != tc.want {
				t.Fatalf("findFrame = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func flip(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	f.ReadAt(b, off)
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func zero(t *testing.T, path string, off, n int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, n), off); err != nil {
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

func TestFileLogTornSegmentHeader(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, nil)
	l.Close()
	truncate(t, l.segmentPath(0), 5)
	l = openTestLog(t, dir, nil)
	if _, next, err := replayAll(t, l, 0); err != nil || next != 0 {
		t.Fatalf("replay: next %d, %v", next, err)
	}
	if err := l.Append(context.Background(), bodies("x", 2)); err != nil {
		t.Fatal(err)
	}
}

// TestFileLogCorruptSealedSegment: damage outside the last segment is not a
// torn write; the log refuses to open and is left untouched.
func TestFileLogCorruptSealedSegment(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"bad crc", func(t *testing.T, p string) { flip(t, p, segmentHeaderSize+frameHeaderSize) }},
		{"truncated", func(t *testing.T, p string) {
			st, _ := os.Stat(p)
			truncate(t, p, st.Size()-1)
		}},
		{"bad header", func(t *testing.T, p string) { flip(t, p, 0) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openTestLog(t, dir, nil)
			replayAll(t, l, 0)
			l.Append(context.Background(), bodies("a", 3))
			if err := snapshot(l, 3, []byte("state")); err != nil {
				t.Fatal(err)
			}
			l.Append(context.Background(), bodies("b", 3))
			l.Close()
			// Keep segment 0 (the snapshot would make replay skip it) by
			// removing the snapshot and recreating the old segment.
			os.Remove(l.snapshotPath(3))
			seg := l.segmentPath(0)
			writeSegment(t, seg, 0, bodies("a", 3))
			before, _ := os.ReadFile(seg)
			tc.damage(t, seg)
			damaged, _ := os.ReadFile(seg)

			l = openTestLog(t, dir, nil)
			_, _, err := replayAll(t, l, 0)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("replay error %v, want ErrCorrupt", err)
			}
			after, _ := os.ReadFile(seg)
			if !bytes.Equal(after, damaged) || bytes.Equal(before, damaged) {
				t.Fatal("sealed segment was modified")
			}
		})
	}
}

// snapshot takes a snapshot the way the shard driver does.
func snapshot(l SnapshotLog, index int64, data []byte) error {
	if err := l.PrepareSnapshot(context.Background(), index); err != nil {
		return err
	}
	return l.SaveSnapshot(context.Background(), index, data)
}

func writeSegment(t *testing.T, path string, base int64, bodies [][]byte) {
	t.Helper()
	b := segmentHeader(base)
	for _, body := range bodies {
		b = appendFrame(b, body)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFileLogFailedSyncIsUndone(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, nil)
	replayAll(t, l, 0)
	if err := l.Append(context.Background(), bodies("a", 2)); err != nil {
		t.Fatal(err)
	}
	l.syncHook = func() error { return errors.New("injected fsync failure") }
	if err := l.Append(context.Background(), bodies("b", 3)); err == nil {
		t.Fatal("append with failing fsync succeeded")
	}
	l.syncHook = nil
	got, next, err := replayAll(t, l, 0)
	if err != nil || next != 2 || len(got) != 2 {
		t.Fatalf("after failed append: %d records, next %d, %v", len(got), next, err)
	}
	if err := l.Append(context.Background(), bodies("c", 1)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openTestLog(t, dir, nil)
	if got, _, _ := replayAll(t, l, 0); len(got) != 3 || string(got[2]) != "c-0-" {
		t.Fatalf("reopened log holds %q", got)
	}
}

func TestFileLogSnapshots(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, nil)
	ctx := context.Background()
	replayAll(t, l, 0)
	l.Append(ctx, bodies("a", 3))
	if err := l.PrepareSnapshot(ctx, 2); err == nil {
		t.Fatal("snapshot at an index other than the log's next succeeded")
	}
	if err := l.SaveSnapshot(ctx, 2, nil); err == nil {
		t.Fatal("snapshot where no segment starts succeeded")
	}
	if err := snapshot(l, 3, []byte("s3")); err != nil {
		t.Fatal(err)
	}
	l.Append(ctx, bodies("b", 2))
	if err := snapshot(l, 5, []byte("s5")); err != nil {
		t.Fatal(err)
	}
	l.Append(ctx, bodies("c", 1))
	l.Close()

	names := func() []string {
		es, _ := os.ReadDir(dir)
		var out []string
		for _, e := range es {
			out = append(out, e.Name())
		}
		return out
	}
	want := []string{"00000000000000000005.log", "00000000000000000005.snapshot"}
	if got := names(); !reflect.DeepEqual(got, want) {
		t.Fatalf("files %v, want %v", got, want)
	}

	l = openTestLog(t, dir, nil)
	idx, data, err := l.LoadSnapshot(ctx)
	if err != nil || idx != 5 || string(data) != "s5" {
		t.Fatalf("LoadSnapshot = %d %q %v", idx, data, err)
	}
	got, next, err := replayAll(t, l, idx)
	if err != nil || next != 6 || len(got) != 1 || string(got[0]) != "c-0-" {
		t.Fatalf("replay after snapshot: %q next %d %v", got, next, err)
	}
	l.Close()

	// A damaged newest snapshot is skipped; with the records before it
	// gone, replay reports the gap instead of inventing state.
	flip(t, filepath.Join(dir, want[1]), 30)
	logs := &logBuffer{}
	l = openTestLog(t, dir, logs)
	idx, data, err = l.LoadSnapshot(ctx)
	if err != nil || idx != 0 || data != nil {
		t.Fatalf("LoadSnapshot of damaged snapshot = %d %q %v", idx, data, err)
	}
	if !strings.Contains(logs.String(), "skipping unreadable snapshot") {
		t.Fatalf("no warning: %s", logs.String())
	}
	if _, _, err := replayAll(t, l, 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("replay with missing records: %v, want ErrCorrupt", err)
	}
}
