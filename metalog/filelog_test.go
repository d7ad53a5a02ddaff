package metalog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

func openTestLog(t *testing.T, dir string, logs *logBuffer) *FileLog {
	t.Helper()
	logger := discardLogger()
	if logs != nil {
		logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	l, err := OpenFileLog(dir, logger)
	if err != nil {
		t.Fatalf("OpenFileLog: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func replayAll(t *testing.T, l *FileLog, from int64) ([][]byte, int64, error) {
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
	syncs := countSyncs(l)
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
	if got := syncs.Load(); got != 2 {
		t.Fatalf("%d data fsyncs for 2 appends", got)
	}
	// A group of many records is still one fsync.
	if err := l.Append(context.Background(), bodies("g3", 50)); err != nil {
		t.Fatal(err)
	}
	if got := syncs.Load(); got != 3 {
		t.Fatalf("%d data fsyncs for 3 appends", got)
	}
	want = append(want, bodies("g3", 50)...)
	l.Close()

	l = openTestLog(t, dir, nil)
	got, next, err := replayAll(t, l, 0)
	if err != nil {
		t.Fatal(err)
	}
	if next != 58 || !reflect.DeepEqual(got, want) {
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

// segLayout is where the frames and group ends of an undamaged segment
// are.
type segLayout struct {
	frames []int64 // frames[i]: offset of record i of the segment
	ends   []int64 // ends[g]: offset of the group end of group g
	size   int64
}

// segmentLayout walks an undamaged segment.
func segmentLayout(t *testing.T, path string) segLayout {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lay := segLayout{size: int64(len(b))}
	for off := segmentHeaderSize; off < len(b); {
		if isGroupEnd(b[off:]) {
			lay.ends = append(lay.ends, int64(off))
			off += groupEndSize
			continue
		}
		_, n, err := decodeFrame(b[off:])
		if err != nil {
			t.Fatalf("frame at %d: %v", off, err)
		}
		lay.frames = append(lay.frames, int64(off))
		off += n
	}
	return lay
}

// TestFileLogDamagedLastSegment damages the only (so the last) segment,
// written as two groups: records 0 … 10 and 11 … 21. Damage that a crash
// can cause — bad bytes in the last group, in any order, or after it,
// with no complete group after them — is a torn group: reopening keeps
// exactly the groups before it, truncates the rest with a warning, and
// appends after them. Damage followed by a complete group, or by bytes a
// later append wrote after the damaged group's end, is in acknowledged
// records: reopening fails with ErrCorrupt naming the file and byte
// offset, and leaves the file alone.
func TestFileLogDamagedLastSegment(t *testing.T) {
	records := bodies("r", 22)
	n := len(records)
	cases := []struct {
		name   string
		damage func(t *testing.T, path string, lay segLayout)
		// keep is how many records survive a torn tail; −1: the log is
		// corrupt at byte corruptAt(lay).
		keep      int
		corruptAt func(lay segLayout) int64
	}{
		{"clean", func(*testing.T, string, segLayout) {}, n, nil},
		{"torn: half a frame header", func(t *testing.T, p string, lay segLayout) { truncate(t, p, lay.frames[n-1]+4) }, 11, nil},
		{"torn: half a body", func(t *testing.T, p string, lay segLayout) { truncate(t, p, lay.ends[1]-3) }, 11, nil},
		{"torn: group end missing", func(t *testing.T, p string, lay segLayout) { truncate(t, p, lay.ends[1]) }, 11, nil},
		{"torn: half a group end", func(t *testing.T, p string, lay segLayout) { truncate(t, p, lay.ends[1]+groupEndSize/2) }, 11, nil},
		{"torn: bad group end crc", func(t *testing.T, p string, lay segLayout) { flip(t, p, lay.size-1) }, 11, nil},
		{"torn: bad group end count", func(t *testing.T, p string, lay segLayout) { flip(t, p, lay.ends[1]+7) }, 11, nil},
		{"torn: group end zeroed", func(t *testing.T, p string, lay segLayout) { zero(t, p, lay.ends[1], groupEndSize) }, 11, nil},
		{"torn: bad crc in last frame", func(t *testing.T, p string, lay segLayout) { flip(t, p, lay.ends[1]-1) }, 11, nil},
		{"torn: bad length in last frame", func(t *testing.T, p string, lay segLayout) { flip(t, p, lay.frames[n-1]) }, 11, nil},
		{"torn: middle frame of the last group", func(t *testing.T, p string, lay segLayout) {
			flip(t, p, lay.frames[16]+frameHeaderSize+1)
		}, 11, nil},
		{"torn: middle frame of the last group zeroed", func(t *testing.T, p string, lay segLayout) {
			zero(t, p, lay.frames[16], lay.frames[17]-lay.frames[16])
		}, 11, nil},
		{"torn: first frame of the last group", func(t *testing.T, p string, lay segLayout) { flip(t, p, lay.frames[11]+5) }, 11, nil},
		{"torn: zeros appended", func(t *testing.T, p string, lay segLayout) { appendBytes(t, p, make([]byte, 100)) }, n, nil},
		{"torn: length too large appended", func(t *testing.T, p string, lay segLayout) {
			appendBytes(t, p, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1})
		}, n, nil},
		{"torn: valid frames appended without a group end", func(t *testing.T, p string, lay segLayout) {
			appendBytes(t, p, appendFrame(appendFrame(nil, []byte("x")), []byte("y")))
		}, n, nil},
		{"torn: zeroed last two frames and group end", func(t *testing.T, p string, lay segLayout) {
			zero(t, p, lay.frames[n-2], lay.size-lay.frames[n-2])
		}, 11, nil},
		{"corrupt: bad crc in frame 7 of 22", func(t *testing.T, p string, lay segLayout) { flip(t, p, lay.frames[8]-1) },
			-1, func(lay segLayout) int64 { return lay.frames[7] }},
		{"corrupt: bad crc in the last frame of the first group", func(t *testing.T, p string, lay segLayout) { flip(t, p, lay.ends[0]-1) },
			-1, func(lay segLayout) int64 { return lay.frames[10] }},
		{"corrupt: bad length in frame 7", func(t *testing.T, p string, lay segLayout) { flip(t, p, lay.frames[7]+1) },
			-1, func(lay segLayout) int64 { return lay.frames[7] }},
		{"corrupt: zeroed frame 3", func(t *testing.T, p string, lay segLayout) {
			zero(t, p, lay.frames[3], lay.frames[4]-lay.frames[3])
		}, -1, func(lay segLayout) int64 { return lay.frames[3] }},
		{"corrupt: frame 7 cut out", func(t *testing.T, p string, lay segLayout) {
			b, _ := os.ReadFile(p)
			os.WriteFile(p, append(b[:lay.frames[7]:lay.frames[7]], b[lay.frames[7]+5:]...), 0o644)
		}, -1, func(lay segLayout) int64 { return lay.frames[7] }},
		{"corrupt: first group end", func(t *testing.T, p string, lay segLayout) { flip(t, p, lay.ends[0]+20) },
			-1, func(lay segLayout) int64 { return lay.ends[0] }},
		{"corrupt: first group end missing", func(t *testing.T, p string, lay segLayout) {
			b, _ := os.ReadFile(p)
			os.WriteFile(p, append(b[:lay.ends[0]:lay.ends[0]], b[lay.ends[0]+groupEndSize:]...), 0o644)
		}, -1, func(lay segLayout) int64 { return lay.ends[0] }},
		{"corrupt: damaged first group, then a torn one", func(t *testing.T, p string, lay segLayout) {
			flip(t, p, lay.frames[5]+frameHeaderSize)
			truncate(t, p, lay.frames[15])
		}, -1, func(lay segLayout) int64 { return lay.frames[5] }},
		{"corrupt: damaged first group end, then a torn group", func(t *testing.T, p string, lay segLayout) {
			flip(t, p, lay.ends[0]+20)
			truncate(t, p, lay.frames[15])
		}, -1, func(lay segLayout) int64 { return lay.ends[0] }},
		{"corrupt: damaged last group, written past its end", func(t *testing.T, p string, lay segLayout) {
			flip(t, p, lay.frames[16]+frameHeaderSize)
			appendBytes(t, p, make([]byte, 10))
		}, -1, func(lay segLayout) int64 { return lay.frames[16] }},
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
			lay := segmentLayout(t, path)
			if len(lay.frames) != n || len(lay.ends) != 2 {
				t.Fatalf("segment holds %d frames and %d group ends", len(lay.frames), len(lay.ends))
			}
			tc.damage(t, path, lay)
			damaged, _ := os.ReadFile(path)

			logs := &logBuffer{}
			l = openTestLog(t, dir, logs)
			got, next, err := replayAll(t, l, 0)
			if tc.keep < 0 {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("replay: %v, want ErrCorrupt", err)
				}
				if want := fmt.Sprintf("%s at byte %d ", path, tc.corruptAt(lay)); !strings.Contains(err.Error(), want) {
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
			wantSize := map[int]int64{11: lay.frames[11], n: lay.size}[tc.keep]
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

// writeGroups appends one group per element of groups to a fresh log in
// dir, closes it and returns the segment's path and the byte offset of
// every record's frame (format-agnostic: group ends are skipped).
func writeGroups(t *testing.T, dir string, groups ...[][]byte) (string, []int64) {
	t.Helper()
	l := openTestLog(t, dir, nil)
	if _, _, err := replayAll(t, l, 0); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if err := l.Append(context.Background(), g); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	path := l.segmentPath(0)
	return path, frameOffsets(t, path)
}

// reopenKeeps reopens the log in dir and checks that replay succeeds with
// exactly want, that the segment ends right after them (at size), that a
// warning named the bytes dropped, and that an append after the repair
// survives another reopen.
func reopenKeeps(t *testing.T, dir string, want [][]byte, size int64) {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("%020d%s", 0, segmentSuffix))
	before, _ := os.Stat(path)
	logs := &logBuffer{}
	l := openTestLog(t, dir, logs)
	got, next, err := replayAll(t, l, 0)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if next != int64(len(want)) || !reflect.DeepEqual(got, want) {
		t.Fatalf("kept %d records (next %d), want %d", len(got), next, len(want))
	}
	if after, _ := os.Stat(path); after.Size() != size {
		t.Fatalf("segment is %d bytes after repair, want %d", after.Size(), size)
	}
	if w := fmt.Sprintf("dropped_bytes=%d", before.Size()-size); !strings.Contains(logs.String(), w) {
		t.Fatalf("no warning naming %s:\n%s", w, logs.String())
	}
	extra := []byte("appended after the repair")
	if err := l.Append(context.Background(), [][]byte{extra}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openTestLog(t, dir, nil)
	got, next, err = replayAll(t, l, 0)
	if err != nil || next != int64(len(want))+1 || !reflect.DeepEqual(got, append(slices.Clone(want), extra)) {
		t.Fatalf("after re-append and reopen: %d records (next %d), %v", len(got), next, err)
	}
}

// longBodies returns n bodies of 100 bytes, so that cutting a group end's
// worth of bytes from the end of a segment cuts into one frame only when
// there are no group ends.
func longBodies(prefix string, n int) [][]byte {
	out := bodies(prefix, n)
	for i := range out {
		out[i] = append(out[i], bytes.Repeat([]byte{'.'}, 100-len(out[i]))...)
	}
	return out
}

// TestFileLogTornGroupDropped: a power loss while the last group was being
// written persisted its pages out of order — its middle frame is torn,
// the frames after it and its group end made it. Its fsync never
// returned, so this is a torn tail: the whole group goes, earlier groups
// stay, and appends go on. (Before group ends, the valid frame after the
// torn one made this ErrCorrupt.)
func TestFileLogTornGroupDropped(t *testing.T) {
	dir := t.TempDir()
	g1, g2, g3 := longBodies("a", 3), longBodies("b", 4), longBodies("c", 3)
	path, frames := writeGroups(t, dir, g1, g2, g3)
	flip(t, path, frames[8]+frameHeaderSize+10) // the middle frame of g3
	reopenKeeps(t, dir, slices.Concat(g1, g2), frames[7])
}

// TestFileLogCorruptGroupBeforeCompleteGroup: the same damage in a group
// followed by a complete group is not a torn tail — the later group was
// fsynced after it, so it held acknowledged records: ErrCorrupt, log
// untouched.
func TestFileLogCorruptGroupBeforeCompleteGroup(t *testing.T) {
	dir := t.TempDir()
	path, frames := writeGroups(t, dir, longBodies("a", 3), longBodies("b", 3), longBodies("c", 2))
	flip(t, path, frames[4]+frameHeaderSize+10) // the middle frame of the second group
	damaged, _ := os.ReadFile(path)
	l := openTestLog(t, dir, nil)
	_, _, err := replayAll(t, l, 0)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("%s at byte %d ", path, frames[4])) {
		t.Fatalf("replay: %v, want ErrCorrupt naming byte %d", err, frames[4])
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, damaged) {
		t.Fatal("corrupt segment was modified")
	}
}

// TestFileLogGroupEndMissing: the last group's frames are all valid but
// its group end never made it (a crash after the frames' pages, before
// the end's): the group was not acknowledged, so it goes whole.
func TestFileLogGroupEndMissing(t *testing.T) {
	dir := t.TempDir()
	g1, g2 := longBodies("a", 3), longBodies("b", 3)
	path, frames := writeGroups(t, dir, g1, g2)
	st, _ := os.Stat(path)
	truncate(t, path, st.Size()-groupEndSize)
	reopenKeeps(t, dir, g1, frames[3])
}

// TestFileLogTornGroupEnd: the last group end itself is torn (cut short,
// or its bytes garbled): the group goes whole. A torn group end followed
// by a complete group is corruption.
func TestFileLogTornGroupEnd(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string, size int64)
	}{
		{"cut short", func(t *testing.T, p string, size int64) { truncate(t, p, size-groupEndSize/2) }},
		{"garbled", func(t *testing.T, p string, size int64) { flip(t, p, size-groupEndSize/2) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			g1, g2 := longBodies("a", 3), longBodies("b", 3)
			path, frames := writeGroups(t, dir, g1, g2)
			st, _ := os.Stat(path)
			tc.damage(t, path, st.Size())
			reopenKeeps(t, dir, g1, frames[3])
		})
	}
	t.Run("followed by a complete group", func(t *testing.T) {
		dir := t.TempDir()
		path, frames := writeGroups(t, dir, longBodies("a", 3), longBodies("b", 3), longBodies("c", 3))
		end := frames[6] - groupEndSize // the second group's end
		flip(t, path, end+groupEndSize/2)
		l := openTestLog(t, dir, nil)
		if _, _, err := replayAll(t, l, 0); !errors.Is(err, ErrCorrupt) ||
			!strings.Contains(err.Error(), fmt.Sprintf("%s at byte %d ", path, end)) {
			t.Fatalf("replay: %v, want ErrCorrupt naming byte %d", err, end)
		}
	})
}

// TestScanGroupEnds pins the scan that tells a torn group from
// corruption: group ends at any offset, their own CRC checked, across
// read windows.
func TestScanGroupEnds(t *testing.T) {
	ge := appendGroupEnd(nil, groupEnd{count: 2, first: 7, length: 100, groupCRC: 0xabcd})
	bad := slices.Clone(ge)
	bad[10] ^= 1
	cases := []struct {
		name string
		data []byte
		from int64
		want int64
	}{
		{"empty", nil, 0, -1},
		{"zeros", make([]byte, 3*groupEndSize), 0, -1},
		{"group end at start", ge, 0, 0},
		{"after garbage", append([]byte{'D', 'S', 'G', 3}, ge...), 0, 4},
		{"from skips it", append([]byte{1, 2, 3}, ge...), 4, -1},
		{"cut short", ge[:groupEndSize-1], 0, -1},
		{"bad crc", bad, 0, -1},
		{"bad one, then a good one", append(slices.Clone(bad), ge...), 0, groupEndSize},
		{"a frame is not a group end", appendFrame(nil, []byte("DSGE")), 0, -1},
		{"across windows", append(make([]byte, scanWindow-4), ge...), 0, scanWindow - 4},
		{"in the second window", append(make([]byte, scanWindow+100), ge...), 0, scanWindow + 100},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := scanGroupEnds(bytes.NewReader(tc.data), tc.from, int64(len(tc.data)), func(int64, groupEnd) (bool, error) {
				return true, nil
			})
			if err != nil || got != tc.want {
				t.Fatalf("scanGroupEnds = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

// encodeGroup returns the frames and group end that Append writes for
// bodies, the first of which has record index first.
func encodeGroup(first int64, bodies ...[]byte) []byte {
	var b []byte
	for _, body := range bodies {
		b = appendFrame(b, body)
	}
	return appendGroupEnd(b, groupEnd{count: uint32(len(bodies)), first: first, length: int64(len(b)),
		groupCRC: crc32.Checksum(b, castagnoli)})
}

func TestDecodeGroupEndCorruption(t *testing.T) {
	good := appendGroupEnd(nil, groupEnd{count: 3, first: 42, length: 300, groupCRC: 0x1234})
	// mutate changes a field and recomputes the group end's own CRC, so
	// that only the field is wrong.
	mutate := func(f func(b []byte)) []byte {
		b := slices.Clone(good)
		f(b)
		binary.BigEndian.PutUint32(b[28:], crc32.Checksum(b[:28], castagnoli))
		return b
	}
	cases := []struct {
		name    string
		b       []byte
		wantErr error
	}{
		{"good", good, nil},
		{"empty", nil, errFrameShort},
		{"short", good[:groupEndSize-1], errFrameShort},
		{"bad magic", mutate(func(b []byte) { b[3] = 'X' }), errGroupEnd},
		{"bad crc", func() []byte { b := slices.Clone(good); b[29] ^= 1; return b }(), errGroupEnd},
		{"flipped field", func() []byte { b := slices.Clone(good); b[9] ^= 1; return b }(), errGroupEnd},
		{"count 0", mutate(func(b []byte) { binary.BigEndian.PutUint32(b[4:], 0) }), errGroupEnd},
		{"negative first", mutate(func(b []byte) { b[8] = 0x80 }), errGroupEnd},
		{"length below count frames", mutate(func(b []byte) { binary.BigEndian.PutUint64(b[16:], 3*(frameHeaderSize+1)-1) }), errGroupEnd},
		{"negative length", mutate(func(b []byte) { b[16] = 0x80 }), errGroupEnd},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, err := decodeGroupEnd(tc.b)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if err == nil && g != (groupEnd{count: 3, first: 42, length: 300, groupCRC: 0x1234}) {
				t.Fatalf("decoded %+v", g)
			}
		})
	}
}

// FuzzGroupReader: whatever the bytes, reading groups does not panic, and
// every group it returns re-encodes to exactly the bytes it consumed.
func FuzzGroupReader(f *testing.F) {
	f.Add(encodeGroup(0, []byte("a"), []byte("bc")))
	f.Add(append(encodeGroup(0, []byte("a")), encodeGroup(1, []byte("xyz"), []byte("q"), []byte("r"))...))
	f.Add(encodeGroup(0, []byte("a"))[:20])
	f.Fuzz(func(t *testing.T, b []byte) {
		gr := newGroupReader(bytes.NewReader(b), 0, int64(len(b)))
		idx := int64(0)
		for {
			from := gr.off
			bodies, err := gr.next(idx)
			if err == io.EOF {
				if gr.off != int64(len(b)) {
					t.Fatalf("EOF at %d of %d bytes", gr.off, len(b))
				}
				return
			}
			if err != nil {
				if !isFrameError(err) {
					t.Fatalf("not a frame error: %v", err)
				}
				if gr.bad < gr.start || gr.bad > int64(len(b)) || gr.start != from {
					t.Fatalf("bad at %d, group at %d, from %d", gr.bad, gr.start, from)
				}
				return
			}
			if again := encodeGroup(idx, bodies...); !bytes.Equal(again, b[from:gr.off]) {
				t.Fatalf("group at %d re-encodes differently", from)
			}
			idx += int64(len(bodies))
		}
	})
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
		{"group end missing", func(t *testing.T, p string) {
			st, _ := os.Stat(p)
			truncate(t, p, st.Size()-groupEndSize)
		}},
		{"bad group end", func(t *testing.T, p string) {
			st, _ := os.Stat(p)
			flip(t, p, st.Size()-1)
		}},
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
func snapshot(l *FileLog, index int64, data []byte) error {
	ctx := context.Background()
	if err := l.PrepareSnapshot(ctx, index); err != nil {
		return err
	}
	if err := l.WriteSnapshot(ctx, index, data); err != nil {
		return err
	}
	return l.TruncateBefore(ctx, index)
}

// countSyncs counts the data fsyncs of l's appends from now on.
func countSyncs(l *FileLog) *atomic.Int64 {
	var n atomic.Int64
	sync := l.fsync
	l.fsync = func(f *os.File) error {
		n.Add(1)
		return sync(f)
	}
	return &n
}

func writeSegment(t *testing.T, path string, base int64, bodies [][]byte) {
	t.Helper()
	b := append(segmentHeader(base), encodeGroup(base, bodies...)...)
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
	l.fsync = func(*os.File) error { return errors.New("injected fsync failure") }
	if err := l.Append(context.Background(), bodies("b", 3)); err == nil {
		t.Fatal("append with failing fsync succeeded")
	}
	l.fsync = (*os.File).Sync
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
	if err := l.WriteSnapshot(ctx, 2, nil); err == nil {
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
	idx, data, err := l.ReadSnapshot(ctx)
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
	idx, data, err = l.ReadSnapshot(ctx)
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
