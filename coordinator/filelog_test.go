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

// TestFileLogTornTail damages the end of the only segment in the ways a
// crash can, and checks that reopening keeps exactly the intact records,
// truncates the rest with a warning, and appends after them.
func TestFileLogTornTail(t *testing.T) {
	records := bodies("r", 4)
	frameSizes := make([]int, len(records))
	for i, b := range records {
		frameSizes[i] = frameHeaderSize + len(b)
	}
	lastFrame := int64(frameSizes[3])
	cases := []struct {
		name   string
		damage func(t *testing.T, path string, size int64)
		// keep is how many records survive.
		keep int
	}{
		{"clean", func(*testing.T, string, int64) {}, 4},
		{"half a frame header", func(t *testing.T, p string, size int64) { truncate(t, p, size-lastFrame+4) }, 3},
		{"half a body", func(t *testing.T, p string, size int64) { truncate(t, p, size-3) }, 3},
		{"bad crc in last frame", func(t *testing.T, p string, size int64) { flip(t, p, size-1) }, 3},
		{"bad crc in earlier frame", func(t *testing.T, p string, size int64) { flip(t, p, size-lastFrame-1) }, 2},
		{"zeros appended", func(t *testing.T, p string, size int64) { appendBytes(t, p, make([]byte, 100)) }, 4},
		{"length too large appended", func(t *testing.T, p string, size int64) {
			appendBytes(t, p, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1})
		}, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openTestLog(t, dir, nil)
			replayAll(t, l, 0)
			if err := l.Append(context.Background(), records); err != nil {
				t.Fatal(err)
			}
			l.Close()
			path := l.segmentPath(0)
			st, _ := os.Stat(path)
			tc.damage(t, path, st.Size())
			damaged, _ := os.Stat(path)

			logs := &logBuffer{}
			l = openTestLog(t, dir, logs)
			got, next, err := replayAll(t, l, 0)
			if err != nil {
				t.Fatalf("replay: %v", err)
			}
			if next != int64(tc.keep) || !reflect.DeepEqual(got, records[:tc.keep]) {
				t.Fatalf("kept %d records (next %d), want %d", len(got), next, tc.keep)
			}
			wantSize := int64(segmentHeaderSize)
			for _, n := range frameSizes[:tc.keep] {
				wantSize += int64(n)
			}
			after, _ := os.Stat(path)
			if after.Size() != wantSize {
				t.Fatalf("file is %d bytes after repair, want %d", after.Size(), wantSize)
			}
			dropped := damaged.Size() - wantSize
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
			if err := l.SaveSnapshot(context.Background(), 3, []byte("state")); err != nil {
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
	if err := l.SaveSnapshot(ctx, 2, nil); err == nil {
		t.Fatal("snapshot at an index other than the log's next succeeded")
	}
	if err := l.SaveSnapshot(ctx, 3, []byte("s3")); err != nil {
		t.Fatal(err)
	}
	l.Append(ctx, bodies("b", 2))
	if err := l.SaveSnapshot(ctx, 5, []byte("s5")); err != nil {
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
