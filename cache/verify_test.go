package cache_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/diskless-sidecar/sidecar/cache"
)

// truth is a Checker that compares each range with the object's real
// bytes, and counts its calls.
type truth struct {
	obj   []byte
	rs    []cache.Range
	calls atomic.Int64
}

func (c *truth) Check(i int, p []byte) error {
	c.calls.Add(1)
	off := c.rs[i].Off
	if !bytes.Equal(p, c.obj[off:off+int64(len(p))]) {
		return fmt.Errorf("range %d at %d: bytes differ from the object's", i, off)
	}
	return nil
}

// flipping is a store whose answers covering byte at of key have it
// flipped, the next times answers (−1: all).
type flipping struct {
	*store
	mu    sync.Mutex
	key   string
	at    int64
	times int
}

func (s *flipping) set(key string, at int64, times int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key, s.at, s.times = key, at, times
}

func (s *flipping) ReadRange(ctx context.Context, key string, off int64, p []byte) (int, int64, error) {
	n, size, err := s.store.ReadRange(ctx, key, off, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.times != 0 && key == s.key && off <= s.at && s.at < off+int64(n) {
		p[s.at-off] ^= 1
		if s.times > 0 {
			s.times--
		}
	}
	return n, size, err
}

// read reads rs of obj with a truth checker and returns it.
func read(t *testing.T, c *cache.Cache, obj cache.Object, data []byte, rs ...[2]int64) (*truth, []cache.Range, error) {
	t.Helper()
	ranges := make([]cache.Range, len(rs))
	for i, r := range rs {
		ranges[i] = cache.Range{Off: r[0], P: make([]byte, r[1])}
	}
	ck := &truth{obj: data, rs: ranges}
	err := c.ReadRanges(t.Context(), obj, ranges, ck)
	return ck, ranges, err
}

// TestVerifiedBytesNotRechecked: a checked range is marked verified in the
// blocks it came from, so a hit on verified bytes calls no check, and a
// range with any unverified part is checked whole; Put blocks are
// verified from the start.
func TestVerifiedBytesNotRechecked(t *testing.T) {
	const B = 16
	s := newStore()
	data := object(1, 3*B)
	s.put(t, "obj", data)
	c := newCache(t, cache.Config{BlockBytes: B, MaxBytes: 8 * B}, s)
	obj := cache.Object{Key: "obj", Size: 3 * B, WrittenMs: -1}
	for i, step := range []struct {
		rs    [][2]int64
		calls int64
	}{
		{[][2]int64{{5, 15}}, 1},          // [5, 20): loaded, checked
		{[][2]int64{{5, 15}}, 0},          // the same bytes: hits, verified
		{[][2]int64{{20, 10}}, 1},         // [20, 30): block 1 only partly verified
		{[][2]int64{{5, 25}}, 0},          // [5, 30): [16, 20) and [20, 30) merged
		{[][2]int64{{8, 2}, {40, 8}}, 1},  // one range verified, one not
		{[][2]int64{{0, 5}, {30, 10}}, 2}, // two ranges with unverified parts
		{[][2]int64{{0, 3 * B}}, 0},       // all verified by now
		{[][2]int64{{0, 3*B - 1}, {1, 1}}, 0},
	} {
		ck, _, err := read(t, c, obj, data, step.rs...)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := ck.calls.Load(); got != step.calls {
			t.Errorf("step %d %v: %d checks, want %d", i, step.rs, got, step.calls)
		}
	}
	c.Put("put", object(2, 2*B))
	if ck, _, err := read(t, c, cache.Object{Key: "put", WrittenMs: -1}, object(2, 2*B), [2]int64{3, 20}); err != nil || ck.calls.Load() != 0 {
		t.Fatalf("read of a Put object: %v, %d checks; want none (Put blocks are verified)", err, ck.calls.Load())
	}
}

// TestCorruptAnswerReadAgain: one answer with a byte flipped fails its
// check, the range is read again and served right; the bad block was
// never cached, and later reads are hits without checks. A bad block
// cached by a reader that does not check is dropped the same way.
func TestCorruptAnswerReadAgain(t *testing.T) {
	const B = 16
	for _, cachedFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("cached by an unchecked read first=%v", cachedFirst), func(t *testing.T) {
			s := &flipping{store: newStore()}
			data := object(3, 3*B)
			s.put(t, "obj", data)
			c := newCache(t, cache.Config{BlockBytes: B, MaxBytes: 8 * B}, s)
			obj := cache.Object{Key: "obj", Size: 3 * B, WrittenMs: -1}
			s.set("obj", B+3, 1)
			if cachedFirst {
				if err := readAt(t.Context(), c, "obj", make([]byte, 4), B); err != nil {
					t.Fatal(err)
				}
			}
			s.takeReads()
			ck, rs, err := read(t, c, obj, data, [2]int64{10, 20})
			if err != nil || rs[0].Err != nil {
				t.Fatalf("ReadRanges = %v (range: %v), want the range read again and served", err, rs[0].Err)
			}
			if ck.calls.Load() != 2 {
				t.Errorf("%d checks, want 2 (the bad answer, the good one)", ck.calls.Load())
			}
			st := c.Stats()
			// The check is of the range: either block may be the bad
			// one, so both are read again.
			wantReads := 4 // blocks 0 and 1, then both again
			if cachedFirst {
				wantReads = 3 // block 0 (block 1 a hit), then both again
				if st.Dropped.Load() != 1 {
					t.Errorf("%d blocks dropped, want 1", st.Dropped.Load())
				}
			}
			if got := len(s.takeReads()); got != wantReads || st.CheckFailures.Load() != 1 || st.Rereads.Load() != 1 || st.CorruptRanges.Load() != 0 {
				t.Errorf("%d store reads, %d check failures, %d rereads, %d corrupt; want %d, 1, 1, 0",
					got, st.CheckFailures.Load(), st.Rereads.Load(), st.CorruptRanges.Load(), wantReads)
			}
			for range 3 {
				ck, _, err := read(t, c, obj, data, [2]int64{10, 20})
				if err != nil || ck.calls.Load() != 0 {
					t.Fatalf("later read: %v, %d checks; want a verified hit", err, ck.calls.Load())
				}
			}
			if got := s.takeReads(); len(got) != 0 {
				t.Errorf("later reads cost %v, want no store read", got)
			}
		})
	}
}

// TestPersistentCorruptionCachesNothing: while every answer of block 1 is
// corrupt, a range over it fails (Range.Err, ErrCorrupt) after two reads,
// the call's other range is served, and no block of the bad range is
// cached; once the store answers right, the range is served.
func TestPersistentCorruptionCachesNothing(t *testing.T) {
	const B = 16
	s := &flipping{store: newStore()}
	data := object(4, 3*B)
	s.put(t, "obj", data)
	c := newCache(t, cache.Config{BlockBytes: B, MaxBytes: 8 * B}, s)
	obj := cache.Object{Key: "obj", Size: 3 * B, WrittenMs: -1}
	s.set("obj", B+3, -1)
	for range 2 {
		_, rs, err := read(t, c, obj, data, [2]int64{B + 1, 8}, [2]int64{2*B + 2, 5})
		if !errors.Is(err, cache.ErrCorrupt) || !errors.Is(rs[0].Err, cache.ErrCorrupt) || rs[1].Err != nil {
			t.Fatalf("ReadRanges = %v; ranges %v, %v; want ErrCorrupt for the first only", err, rs[0].Err, rs[1].Err)
		}
		if !bytes.Equal(rs[1].P, data[2*B+2:2*B+7]) {
			t.Fatal("the good range's bytes are wrong")
		}
		if got := c.Stats().BytesCached.Load(); got != B {
			t.Fatalf("%d bytes cached, want %d (block 2 only)", got, B)
		}
	}
	if st := c.Stats(); st.CorruptRanges.Load() != 2 || st.Rereads.Load() != 2 {
		t.Errorf("%d corrupt ranges, %d rereads; want 2, 2", st.CorruptRanges.Load(), st.Rereads.Load())
	}
	s.set("", 0, 0)
	if _, rs, err := read(t, c, obj, data, [2]int64{B + 1, 8}); err != nil || rs[0].Err != nil {
		t.Fatalf("after the store recovered: %v", err)
	}
}

// TestTruncatedObjectLeavesNoEnd: a store answering a smaller size than
// the commit's (a truncated object) fails the read, is read once more,
// and caches nothing — in particular no end-of-object mark — so that once
// the object is restored every range reads; a range past the committed
// size fails without a GET.
func TestTruncatedObjectLeavesNoEnd(t *testing.T) {
	const B = 16
	s := newStore()
	data := object(5, 3*B)
	s.put(t, "obj", data[:B+5])
	c := newCache(t, cache.Config{BlockBytes: B, MaxBytes: 8 * B}, s)
	obj := cache.Object{Key: "obj", Size: 3 * B, WrittenMs: -1}
	for _, r := range [][2]int64{{B + 1, 2}, {0, 4}, {B + 10, 20}} {
		_, _, err := read(t, c, obj, data, r)
		if err == nil || errors.Is(err, cache.ErrCorrupt) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("read %v of the truncated object = %v; want a failed read (io.ErrUnexpectedEOF), not ErrCorrupt", r, err)
		}
	}
	if st := c.Stats(); st.BytesCached.Load() != 0 || st.SizeMismatches.Load() < 6 {
		t.Fatalf("%d bytes cached, %d size mismatches; want none cached, every answer (each read twice) refused",
			st.BytesCached.Load(), st.SizeMismatches.Load())
	}
	s.put(t, "obj", data)
	if _, rs, err := read(t, c, obj, data, [2]int64{0, 3 * B}); err != nil || !bytes.Equal(rs[0].P, data) {
		t.Fatalf("after the object was restored: %v", err)
	}
	s.takeReads()
	if _, _, err := read(t, c, obj, data, [2]int64{3*B - 1, 2}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("range past the committed size = %v, want io.ErrUnexpectedEOF", err)
	}
	if got := s.takeReads(); len(got) != 0 {
		t.Fatalf("a range past the committed size cost %v", got)
	}
}

// TestCatchUpReadsWholeObjectOnce: data older than the cache's reach is
// read with one GET of the whole object into the catch-up segment, so the
// ranges later fetches need of it (other partitions) are hits; the main
// LRU is neither filled nor reordered; concurrent readers share the GET;
// the whole object is checked by CheckObject, not range by range.
func TestCatchUpReadsWholeObjectOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newReachFixture(t, 4)
		var objectChecks atomic.Int64
		f.c.Close()
		f.c = newCache(t, cache.Config{BlockBytes: rB, MaxBytes: 4 * rB, Now: f.clk.now,
			CheckObject: func(key string, b []byte) error {
				objectChecks.Add(1)
				if !bytes.Equal(b, f.old) {
					return errors.New("not the object")
				}
				return nil
			}}, f.s)
		fillFresh(f.c, f.clk)
		obj := cache.Object{Key: "old", Size: 3 * rB, WrittenMs: oldWrite}
		f.s.takeReads()
		release, blocked := gate(f.s)
		var wg sync.WaitGroup
		checks := make([]*truth, 5)
		for i := range checks {
			wg.Go(func() {
				ck, rs, err := read(t, f.c, obj, f.old, [2]int64{int64(i) * 7, 9})
				if err != nil || !bytes.Equal(rs[0].P, f.old[i*7:i*7+9]) {
					t.Errorf("reader %d: %v", i, err)
				}
				checks[i] = ck
			})
		}
		synctest.Wait()
		if blocked() != 1 {
			t.Fatalf("%d GETs waiting, want 1 shared by the 5 readers", blocked())
		}
		release()
		wg.Wait()
		f.s.SetFault(nil)
		if got := f.s.takeReads(); fmt.Sprint(got) != fmt.Sprint([]readCall{{"old", 0, 3 * rB}}) {
			t.Fatalf("store reads %v, want one of the whole object", got)
		}
		for i, ck := range checks {
			if ck.calls.Load() != 0 {
				t.Errorf("reader %d: %d range checks, want 0 (the whole object was checked)", i, ck.calls.Load())
			}
		}
		// Later reads of the other parts: hits.
		ck, _, err := read(t, f.c, obj, f.old, [2]int64{40, 8}, [2]int64{0, 3})
		if err != nil || ck.calls.Load() != 0 || len(f.s.takeReads()) != 0 {
			t.Fatalf("later read: %v, %d checks; want verified hits", err, ck.calls.Load())
		}
		st := f.c.Stats()
		if objectChecks.Load() != 1 || st.CatchUpReads.Load() != 1 || st.CatchUpBytesCached.Load() != 3*rB ||
			st.Evictions.Load() != 0 || st.BytesCached.Load() != 4*rB || st.Misses.Load() != 0 {
			t.Fatalf("%d object checks, %d catch-up reads, %d bytes in the segment, %d evictions, %d bytes cached, %d misses; "+
				"want 1, 1, %d, 0, %d, 0", objectChecks.Load(), st.CatchUpReads.Load(), st.CatchUpBytesCached.Load(),
				st.Evictions.Load(), st.BytesCached.Load(), st.Misses.Load(), 3*rB, 4*rB)
		}
		f.hot(t, 4)
	})
}

// TestCatchUpObjectFailingItsCheck: a whole object whose first answer
// fails CheckObject is read once more; one failing twice is not cached
// whole: its readers check their own ranges, are served when those are
// right, and cache only the blocks those ranges cover.
func TestCatchUpObjectFailingItsCheck(t *testing.T) {
	for _, tc := range []struct {
		name     string
		flips    int
		reads    int
		segment  int64 // bytes in the catch-up segment after
		rangeChk int64
	}{
		{"one bad answer", 1, 2, 3 * rB, 0},
		{"every answer bad, outside the range", -1, 2, rB, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &flipping{store: newStore()}
			clk := &clock{}
			old := object(42, 3*rB)
			s.put(t, "old", old)
			c := newCache(t, cache.Config{BlockBytes: rB, MaxBytes: 4 * rB, Now: clk.now,
				CheckObject: func(_ string, b []byte) error {
					if !bytes.Equal(b, old) {
						return errors.New("bad")
					}
					return nil
				}}, s)
			fillFresh(c, clk)
			s.set("old", 2*rB+1, tc.flips) // in block 2; the read is in block 0
			ck, rs, err := read(t, c, cache.Object{Key: "old", Size: 3 * rB, WrittenMs: oldWrite}, old, [2]int64{2, 5})
			if err != nil || !bytes.Equal(rs[0].P, old[2:7]) {
				t.Fatalf("ReadRanges = %v", err)
			}
			if got := len(s.takeReads()); got != tc.reads || ck.calls.Load() != tc.rangeChk || c.Stats().CatchUpBytesCached.Load() != tc.segment {
				t.Fatalf("%d store reads, %d range checks, %d bytes in the segment; want %d, %d, %d",
					got, ck.calls.Load(), c.Stats().CatchUpBytesCached.Load(), tc.reads, tc.rangeChk, tc.segment)
			}
		})
	}
}

// fillFresh fills c, a cache of 4·rB, with four objects of one block
// written at 1000…1003 ms, and sets clk to 2000 ms: data written before
// then is beyond the cache's reach.
func fillFresh(c *cache.Cache, clk *clock) {
	for i := range 4 {
		clk.set(1000 + int64(i))
		c.Put(fmt.Sprintf("new%d", i), object(uint64(i), rB))
	}
	clk.set(2000)
}

// TestCatchUpSegmentBound: the catch-up segment keeps at most
// CatchUpMaxBytes, evicting its least recently used objects, and never
// touches the main LRU; an object over half of it is read by exact
// bypassed reads instead.
func TestCatchUpSegmentBound(t *testing.T) {
	s := newStore()
	clk := &clock{}
	c := newCache(t, cache.Config{BlockBytes: rB, MaxBytes: 4 * rB, CatchUpMaxBytes: 6 * rB, Now: clk.now}, s)
	fillFresh(c, clk)
	for i := range 3 {
		key := fmt.Sprintf("old%d", i)
		data := object(uint64(10+i), 3*rB)
		s.put(t, key, data)
		if _, _, err := read(t, c, cache.Object{Key: key, Size: 3 * rB, WrittenMs: oldWrite}, data, [2]int64{1, 2}); err != nil {
			t.Fatal(err)
		}
	}
	st := c.Stats()
	if st.CatchUpBytesCached.Load() != 6*rB || st.CatchUpEvictions.Load() != 3 || st.Evictions.Load() != 0 || st.CatchUpReads.Load() != 3 {
		t.Fatalf("segment %d bytes, %d catch-up evictions, %d evictions, %d catch-up reads; want %d, 3, 0, 3",
			st.CatchUpBytesCached.Load(), st.CatchUpEvictions.Load(), st.Evictions.Load(), st.CatchUpReads.Load(), 6*rB)
	}
	big := object(20, 4*rB)
	s.put(t, "big", big)
	s.takeReads()
	if _, _, err := read(t, c, cache.Object{Key: "big", Size: 4 * rB, WrittenMs: oldWrite}, big, [2]int64{1, 2}); err != nil {
		t.Fatal(err)
	}
	if got := s.takeReads(); fmt.Sprint(got) != fmt.Sprint([]readCall{{"big", 1, 2}}) || c.Stats().BypassReads.Load() != 1 {
		t.Fatalf("an object over half the segment cost %v, want one exact bypassed read", got)
	}
}

// TestCatchUpEvictsObjects: a reader catching up over objects of half the
// catch-up segment, each hinted (ReadAhead) when it starts the one before,
// reads each object once: when the third is loaded, the object it has
// finished goes, not the blocks of the one it is reading that it has not
// reached yet (older, by their load, than the finished object's last
// reads: a block LRU would evict them and read the object again).
func TestCatchUpEvictsObjects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore()
		clk := &clock{}
		c := newCache(t, cache.Config{BlockBytes: rB, MaxBytes: 4 * rB, CatchUpMaxBytes: 6 * rB, Now: clk.now}, s)
		fillFresh(c, clk)
		objs := make([]cache.Object, 4)
		datas := make([][]byte, 4)
		for i := range objs {
			objs[i] = cache.Object{Key: fmt.Sprintf("seg%d", i), Size: 3 * rB, WrittenMs: oldWrite}
			datas[i] = object(uint64(50+i), 3*rB)
			s.put(t, objs[i].Key, datas[i])
		}
		s.takeReads()
		for i := range 3 {
			for blk := range int64(3) {
				if _, _, err := read(t, c, objs[i], datas[i], [2]int64{blk * rB, rB}); err != nil {
					t.Fatal(err)
				}
				if blk == 0 {
					c.ReadAhead(objs[i+1]) // fetch's hint: the next object, as the reader starts this one
					synctest.Wait()
				}
			}
		}
		var want []readCall
		for i := range 4 {
			want = append(want, readCall{objs[i].Key, 0, 3 * rB})
		}
		if got := s.takeReads(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("store reads %v, want each object once: %v", got, want)
		}
		if st := c.Stats(); st.CatchUpBytesCached.Load() != 6*rB || st.CatchUpEvictions.Load() != 6 {
			t.Fatalf("segment %d bytes, %d catch-up evictions; want %d, 6 (two whole objects)",
				st.CatchUpBytesCached.Load(), st.CatchUpEvictions.Load(), 6*rB)
		}
	})
}

// TestCatchUpSequentialReaders: readers of several partitions catching
// up at once over objects each read front to back by one of them
// (Object.SequentialEnd: segment objects), each of half the catch-up
// segment, each hinted as its reader reaches the previous one's end (as
// fetch does): with two readers every object is read once, whole — the
// finished object goes first, a hint that would evict an object a reader
// is in is dropped; a third reader, for whom no room is left, is served by
// exact ranged reads instead of evicting the others' objects (which they
// would read again).
func TestCatchUpSequentialReaders(t *testing.T) {
	for _, readers := range []int{1, 2, 3} {
		t.Run(fmt.Sprint(readers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newStore()
				clk := &clock{}
				c := newCache(t, cache.Config{BlockBytes: rB, MaxBytes: 4 * rB, CatchUpMaxBytes: 6 * rB, Now: clk.now}, s)
				fillFresh(c, clk)
				const objects, end = 3, 3*rB - 4 // data, then a 4-byte "index"
				objs := make([][]cache.Object, readers)
				datas := make([][][]byte, readers)
				for r := range readers {
					for i := range objects {
						o := cache.Object{Key: fmt.Sprintf("r%d-seg%d", r, i), Size: 3 * rB, WrittenMs: oldWrite, SequentialEnd: end}
						d := object(uint64(100*r+i), 3*rB)
						s.put(t, o.Key, d)
						objs[r], datas[r] = append(objs[r], o), append(datas[r], d)
					}
				}
				s.takeReads()
				for i := range objects {
					for blk := range int64(3) {
						for r := range readers {
							if blk == 2 && i+1 < objects {
								c.ReadAhead(objs[r][i+1])
								synctest.Wait()
							}
							rg := [2]int64{blk * rB, min(rB, end-blk*rB)}
							if _, _, err := read(t, c, objs[r][i], datas[r][i], rg); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
				whole := map[string]int{}
				exact, bytesRead := 0, 0
				for _, rd := range s.takeReads() {
					bytesRead += rd.len
					if rd.off == 0 && rd.len == 3*rB {
						whole[rd.key]++
					} else {
						exact++
					}
				}
				for r := range readers {
					for _, o := range objs[r] {
						if n := whole[o.Key]; n > 1 || (readers < 3 && n != 1) {
							t.Errorf("%s read whole %d times, want once", o.Key, n)
						}
					}
				}
				// The third reader's exact reads: at most its objects' data
				// again.
				if (readers < 3) != (exact == 0) || bytesRead > (readers+1)*objects*3*rB {
					t.Errorf("%d readers: %d exact ranged reads, %d bytes read for %d of objects", readers, exact, bytesRead, readers*objects*3*rB)
				}
			})
		})
	}
}

// TestReadAhead: a hint for an object beyond the cache's reach loads it
// whole in the background (one GET), so the read that follows costs none;
// a hint for data within reach, of unknown size or already cached does
// nothing; at most two run at once.
func TestReadAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newReachFixture(t, 4)
		obj := cache.Object{Key: "old", Size: 3 * rB, WrittenMs: oldWrite}
		f.s.takeReads()
		f.c.ReadAhead(cache.Object{Key: "old", Size: 3 * rB, WrittenMs: 1500}) // within reach
		f.c.ReadAhead(cache.Object{Key: "old", WrittenMs: oldWrite})           // size unknown
		synctest.Wait()
		if got := f.s.takeReads(); len(got) != 0 {
			t.Fatalf("hints that should do nothing cost %v", got)
		}
		f.c.ReadAhead(obj)
		synctest.Wait()
		if got := f.s.takeReads(); fmt.Sprint(got) != fmt.Sprint([]readCall{{"old", 0, 3 * rB}}) {
			t.Fatalf("read-ahead cost %v, want one GET of the whole object", got)
		}
		f.c.ReadAhead(obj) // cached now
		if _, _, err := read(t, f.c, obj, f.old, [2]int64{17, 20}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := f.s.takeReads(); len(got) != 0 || f.c.Stats().ReadAheads.Load() != 1 {
			t.Fatalf("after the read-ahead: %v, %d read-aheads; want no GET, 1", got, f.c.Stats().ReadAheads.Load())
		}

		release, blocked := gate(f.s)
		for i := range 3 {
			key := fmt.Sprintf("ahead%d", i)
			f.s.put(t, key, object(uint64(30+i), 2*rB))
			f.c.ReadAhead(cache.Object{Key: key, Size: 2 * rB, WrittenMs: oldWrite})
		}
		synctest.Wait()
		if blocked() != 2 {
			t.Fatalf("%d read-aheads in flight, want 2", blocked())
		}
		release()
		synctest.Wait()
	})
}
