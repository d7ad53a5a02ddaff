package cache_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/objstore"
	"github.com/diskless-sidecar/sidecar/objstore/objstoretest"
)

// clock is a settable clock in ms since the Unix epoch.
type clock struct{ ms atomic.Int64 }

func (c *clock) now() time.Time   { return time.UnixMilli(c.ms.Load()) }
func (c *clock) set(ms int64)     { c.ms.Store(ms) }
func (c *clock) advance(ms int64) { c.ms.Add(ms) }

// counts is a snapshot of the counters a scenario is pinned by.
type counts struct {
	hits, misses, evictions, reads, readBytes, bypass, bypassBytes, cached int64
}

func snapshot(c *cache.Cache) counts {
	s := c.Stats()
	return counts{s.Hits.Load(), s.Misses.Load(), s.Evictions.Load(), s.StoreReads.Load(),
		s.StoreReadBytes.Load(), s.BypassReads.Load(), s.BypassReadBytes.Load(), s.BytesCached.Load()}
}

func (a counts) sub(b counts) counts {
	return counts{a.hits - b.hits, a.misses - b.misses, a.evictions - b.evictions, a.reads - b.reads,
		a.readBytes - b.readBytes, a.bypass - b.bypass, a.bypassBytes - b.bypassBytes, a.cached}
}

// reachFixture is a cache of 4 blocks of 16 bytes over a recording store,
// with objects "new0".."new<fill-1>" (one block each) uploaded and put at
// t = 1000, 1001, … ms, and "old" (3 blocks) in the store only, written at
// t = 500. The clock then reads 2000.
type reachFixture struct {
	s   *store
	c   *cache.Cache
	clk *clock
	old []byte
}

const (
	rB       = 16
	oldWrite = 500
)

func newReachFixture(t *testing.T, fill int) *reachFixture {
	t.Helper()
	f := &reachFixture{s: newStore(), clk: &clock{}, old: object(42, 3*rB)}
	f.s.put(t, "old", f.old)
	f.c = newCache(t, cache.Config{BlockBytes: rB, MaxBytes: 4 * rB, Now: f.clk.now}, f.s)
	for i := range fill {
		f.clk.set(1000 + int64(i))
		key, obj := fmt.Sprintf("new%d", i), object(uint64(i), rB)
		f.s.put(t, key, obj) // uploaded, then put into the cache, as produce does
		f.c.Put(key, obj)
	}
	f.clk.set(2000)
	return f
}

// hot checks that every "new" block put is still cached: reading it costs
// no store read.
func (f *reachFixture) hot(t *testing.T, n int) {
	t.Helper()
	f.s.takeReads()
	for i := range n {
		if err := readAt(t.Context(), f.c, fmt.Sprintf("new%d", i), make([]byte, rB), 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.s.takeReads(); len(got) != 0 {
		t.Fatalf("hot blocks were evicted: reading them cost %v", got)
	}
}

func TestReadRangesReach(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fill      int   // new objects put, one block each; 4 fills the cache
		written   int64 // the data's commit time
		pre       func(f *reachFixture)
		rs        [][2]int64 // (off, len) of "old"
		wantReads []readCall
		want      counts // deltas; cached is absolute
	}{
		{
			name: "full cache, data older than the LRU block: one exact read, nothing cached",
			fill: 4, written: oldWrite, rs: [][2]int64{{5, 20}},
			wantReads: []readCall{{"old", 5, 20}},
			want:      counts{reads: 1, readBytes: 20, bypass: 1, bypassBytes: 20, cached: 4 * rB},
		},
		{
			name: "ranges less than a block apart: one read bounding them",
			fill: 4, written: oldWrite, rs: [][2]int64{{30, 4}, {2, 3}, {20, 6}},
			wantReads: []readCall{{"old", 2, 32}},
			want:      counts{reads: 1, readBytes: 32, bypass: 1, bypassBytes: 32, cached: 4 * rB},
		},
		{
			name: "ranges more than a block apart: one read each",
			fill: 4, written: oldWrite, rs: [][2]int64{{40, 8}, {0, 4}},
			wantReads: []readCall{{"old", 0, 4}, {"old", 40, 8}},
			want:      counts{reads: 2, readBytes: 12, bypass: 2, bypassBytes: 12, cached: 4 * rB},
		},
		{
			name: "empty cache after a restart: old data read through the blocks",
			fill: 0, written: oldWrite, rs: [][2]int64{{5, 20}},
			wantReads: []readCall{{"old", 0, rB}, {"old", rB, rB}},
			want:      counts{misses: 2, reads: 2, readBytes: 2 * rB, cached: 2 * rB},
		},
		{
			name: "cache with room: no eviction, read through the blocks",
			fill: 2, written: oldWrite, rs: [][2]int64{{0, 10}},
			wantReads: []readCall{{"old", 0, rB}},
			want:      counts{misses: 1, reads: 1, readBytes: rB, cached: 3 * rB},
		},
		{
			name: "data younger than the LRU block: read through the blocks",
			fill: 4, written: 1000, rs: [][2]int64{{0, 10}},
			wantReads: []readCall{{"old", 0, rB}},
			want:      counts{misses: 1, evictions: 1, reads: 1, readBytes: rB, cached: 4 * rB},
		},
		{
			name: "unknown write time: read through the blocks",
			fill: 4, written: -1, rs: [][2]int64{{0, 10}},
			wantReads: []readCall{{"old", 0, rB}},
			want:      counts{misses: 1, evictions: 1, reads: 1, readBytes: rB, cached: 4 * rB},
		},
		{
			name: "old data still cached: served by hits, no read",
			fill: 4, written: oldWrite, rs: [][2]int64{{3, 5}},
			pre: func(f *reachFixture) {
				// An earlier read through the blocks, made while the
				// data was young enough, cached block 0 of "old".
				_ = readAt(context.Background(), f.c, "old", make([]byte, 1), 0)
				f.s.takeReads()
			},
			want: counts{hits: 1, cached: 4 * rB},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newReachFixture(t, tc.fill)
			if tc.pre != nil {
				tc.pre(f)
			}
			before := snapshot(f.c)
			rs := make([]cache.Range, len(tc.rs))
			for i, r := range tc.rs {
				rs[i] = cache.Range{Off: r[0], P: make([]byte, r[1])}
			}
			if err := f.c.ReadRanges(t.Context(), cache.Object{Key: "old", WrittenMs: tc.written}, rs, nil); err != nil {
				t.Fatalf("ReadRanges = %v", err)
			}
			for _, r := range rs {
				if want := f.old[r.Off : r.Off+int64(len(r.P))]; !bytes.Equal(r.P, want) {
					t.Fatalf("range at %d: wrong bytes", r.Off)
				}
			}
			got := f.s.takeReads() // block loads run in parallel: order by offset
			slices.SortFunc(got, func(a, b readCall) int { return cmp.Compare(a.off, b.off) })
			if fmt.Sprint(got) != fmt.Sprint(tc.wantReads) {
				t.Errorf("store reads %v, want %v", got, tc.wantReads)
			}
			if got := snapshot(f.c).sub(before); got != tc.want {
				t.Errorf("counters %+v, want %+v", got, tc.want)
			}
			if tc.want.bypass > 0 {
				f.hot(t, tc.fill) // the bypassed read evicted nothing
			}
		})
	}
}

// TestBypassKeepsLRUOrder: a bypassed read neither inserts nor promotes, so
// the block that was least recently used before it is the one evicted next.
func TestBypassKeepsLRUOrder(t *testing.T) {
	f := newReachFixture(t, 4)
	if err := f.c.ReadRanges(t.Context(), cache.Object{Key: "old", WrittenMs: oldWrite}, []cache.Range{{Off: 0, P: make([]byte, 3*rB)}}, nil); err != nil {
		t.Fatal(err)
	}
	f.clk.set(3000)
	f.s.put(t, "newer", object(99, rB))
	f.c.Put("newer", object(99, rB)) // evicts the LRU block: new0, as before the read
	f.s.takeReads()
	for _, k := range []string{"new1", "new2", "new3", "newer", "new0"} {
		if err := readAt(t.Context(), f.c, k, make([]byte, rB), 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.s.takeReads(); len(got) != 1 || got[0].key != "new0" {
		t.Fatalf("store reads %v, want only new0 (evicted)", got)
	}
}

// TestReadRangesMatchesReaderAt checks ReadRanges on both paths against
// bytes.Reader: whole ranges, ranges that run past the object's end
// (io.ErrUnexpectedEOF), empty ranges.
func TestReadRangesMatchesReaderAt(t *testing.T) {
	const B = 16
	obj := object(7, 3*B+5)
	for _, bypass := range []bool{false, true} {
		for _, rs := range [][][2]int64{
			{{0, 3*B + 5}},
			{{B - 1, 2}, {0, 1}, {3 * B, 5}},
			{{7, 0}, {B, B}},
			{{2 * B, B + 5}, {2 * B, 3}}, // overlapping
			{{3 * B, 6}},                 // one byte past the end
			{{B, 2}, {3*B + 5, 1}},       // starts at the end
		} {
			name := fmt.Sprintf("bypass=%v/%v", bypass, rs)
			s := newStore()
			s.put(t, "obj", obj)
			clk := &clock{}
			c := newCache(t, cache.Config{BlockBytes: B, MaxBytes: B, Now: clk.now}, s)
			written := int64(-1)
			if bypass {
				clk.set(10)
				c.Put("filler", object(1, B)) // full, LRU used at 10
				written = 5
			}
			ranges := make([]cache.Range, len(rs))
			var wantErr bool
			for i, r := range rs {
				ranges[i] = cache.Range{Off: r[0], P: make([]byte, r[1])}
				wantErr = wantErr || r[0]+r[1] > int64(len(obj))
			}
			err := c.ReadRanges(t.Context(), cache.Object{Key: "obj", WrittenMs: written}, ranges, nil)
			if wantErr {
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Errorf("%s: ReadRanges = %v, want io.ErrUnexpectedEOF", name, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: ReadRanges = %v", name, err)
				continue
			}
			for _, r := range ranges {
				if !bytes.Equal(r.P, obj[r.Off:r.Off+int64(len(r.P))]) {
					t.Errorf("%s: range at %d: wrong bytes", name, r.Off)
				}
			}
			if got := c.Stats().BypassReads.Load() > 0; got != bypass {
				t.Errorf("%s: bypassed %v, want %v", name, got, bypass)
			}
		}
	}
}

// TestBypassErrors: a failed bypassed read returns the store's error, is
// counted, caches nothing, and the next read tries again.
func TestBypassErrors(t *testing.T) {
	f := newReachFixture(t, 4)
	errBoom := errors.New("boom")
	f.s.SetFault(func(_ context.Context, op objstoretest.Op, key string) error {
		if op == objstoretest.OpReadRange && key == "old" {
			return errBoom
		}
		return nil
	})
	rs := []cache.Range{{Off: 1, P: make([]byte, 10)}}
	if err := f.c.ReadRanges(t.Context(), cache.Object{Key: "old", WrittenMs: oldWrite}, rs, nil); !errors.Is(err, errBoom) {
		t.Fatalf("ReadRanges = %v, want the store's error", err)
	}
	if err := f.c.ReadRanges(t.Context(), cache.Object{Key: "missing", WrittenMs: oldWrite}, rs, nil); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("ReadRanges(missing) = %v, want ErrNotExist", err)
	}
	f.s.SetFault(nil)
	if err := f.c.ReadRanges(t.Context(), cache.Object{Key: "old", WrittenMs: oldWrite}, rs, nil); err != nil || !bytes.Equal(rs[0].P, f.old[1:11]) {
		t.Fatalf("ReadRanges after the fault = %v", err)
	}
	if got := snapshot(f.c); got.bypass != 3 || got.reads != 3 || got.evictions != 0 || got.cached != 4*rB {
		t.Fatalf("counters %+v, want 3 bypassed reads, no eviction", got)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := f.c.ReadRanges(ctx, cache.Object{Key: "old", WrittenMs: oldWrite}, rs, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: %v", err)
	}
	if err := f.c.ReadRanges(t.Context(), cache.Object{Key: "old", WrittenMs: oldWrite}, []cache.Range{{Off: -1, P: make([]byte, 1)}}, nil); err == nil {
		t.Fatal("negative offset accepted")
	}
	f.c.Close()
	if err := f.c.ReadRanges(t.Context(), cache.Object{Key: "old", WrittenMs: oldWrite}, rs, nil); !errors.Is(err, cache.ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
}

// TestReadRangesUnderConcurrency mixes bypassed and cached multi-range
// reads with single reads through the blocks and Put from many goroutines on a small cache while
// the clock moves: data stays correct, the bound holds, both paths run.
func TestReadRangesUnderConcurrency(t *testing.T) {
	const B, maxBytes, objects = 64, 6 * 64, 16
	s := newStore()
	data := make([][]byte, objects)
	for i := range data {
		data[i] = object(uint64(i), 100+i*41)
		s.put(t, fmt.Sprint(i), data[i])
	}
	clk := &clock{}
	clk.set(1000)
	c := newCache(t, cache.Config{BlockBytes: B, MaxBytes: maxBytes, Now: clk.now}, s)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 3))
			for range 400 {
				clk.advance(1)
				i := r.IntN(objects)
				key, obj := fmt.Sprint(i), data[i]
				switch r.IntN(8) {
				case 0:
					c.Put(fmt.Sprintf("put-%d-%d", g, r.IntN(4)), object(uint64(g), 1+r.IntN(3*B)))
					continue
				case 1:
					off := r.IntN(len(obj))
					p := make([]byte, 1+r.IntN(len(obj)-off))
					if err := readAt(context.Background(), c, key, p, int64(off)); err != nil || !bytes.Equal(p, obj[off:off+len(p)]) {
						t.Errorf("read(%s, %d bytes at %d) = %v", key, len(p), off, err)
						return
					}
					continue
				}
				rs := make([]cache.Range, 1+r.IntN(3))
				for j := range rs {
					off := r.IntN(len(obj))
					rs[j] = cache.Range{Off: int64(off), P: make([]byte, r.IntN(len(obj)-off+1))}
				}
				written := clk.ms.Load() - int64(r.IntN(3000)) // young or old
				if err := c.ReadRanges(context.Background(), cache.Object{Key: key, WrittenMs: written}, rs, nil); err != nil {
					t.Errorf("ReadRanges(%s) = %v", key, err)
					return
				}
				for _, rg := range rs {
					if !bytes.Equal(rg.P, obj[rg.Off:rg.Off+int64(len(rg.P))]) {
						t.Errorf("ReadRanges(%s) at %d: wrong bytes", key, rg.Off)
						return
					}
				}
				if got := c.Stats().BytesCached.Load(); got > maxBytes {
					t.Errorf("%d bytes cached, bound is %d", got, maxBytes)
					return
				}
			}
		})
	}
	wg.Wait()
	if st := c.Stats(); st.BypassReads.Load() == 0 || st.Hits.Load() == 0 || st.Evictions.Load() == 0 {
		t.Fatalf("workload did not exercise both paths: %d bypassed, %d hits, %d evictions",
			st.BypassReads.Load(), st.Hits.Load(), st.Evictions.Load())
	}
}

// TestSequentialObjectBeyondReach: an object read front to back
// (Object.SequentialEnd: a segment object, not put in the cache when
// written) is beyond reach once the cache is full, whatever its data's
// write time: its first read takes it whole into the catch-up segment
// (one GET) instead of reading blocks into the main LRU; a WAL object of
// the same write time, within reach, is read through the blocks.
func TestSequentialObjectBeyondReach(t *testing.T) {
	f := newReachFixture(t, 4)
	seq := cache.Object{Key: "old", Size: 3 * rB, WrittenMs: 1500, SequentialEnd: 3*rB - 4} // 1500: after the reach (1000)
	f.s.takeReads()
	if _, _, err := read(t, f.c, seq, f.old, [2]int64{1, 2}); err != nil {
		t.Fatal(err)
	}
	if got := f.s.takeReads(); fmt.Sprint(got) != fmt.Sprint([]readCall{{"old", 0, 3 * rB}}) || f.c.Stats().CatchUpReads.Load() != 1 {
		t.Fatalf("a sequential object within the data's reach cost %v, %d catch-up reads; want one whole GET into the catch-up segment",
			got, f.c.Stats().CatchUpReads.Load())
	}
	f.hot(t, 4)

	g := newReachFixture(t, 4)
	g.s.takeReads()
	if _, _, err := read(t, g.c, cache.Object{Key: "old", Size: 3 * rB, WrittenMs: 1500}, g.old, [2]int64{1, 2}); err != nil {
		t.Fatal(err)
	}
	if got := g.s.takeReads(); fmt.Sprint(got) != fmt.Sprint([]readCall{{"old", 0, rB}}) {
		t.Fatalf("a WAL object within reach cost %v; want its block", got)
	}
}
