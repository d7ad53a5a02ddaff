package cache_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/objstore"
	"github.com/diskless-sidecar/sidecar/objstore/objstoretest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var _ cache.RangeReader = objstore.Store(nil)

// store is an objstoretest.Memory that records every ranged read, so tests can
// pin what a scenario costs in GETs. Faults and delays come from
// Memory.SetFault.
type store struct {
	*objstoretest.Memory
	mu    sync.Mutex
	reads []readCall
}

type readCall struct {
	key string
	off int64
	len int
}

func newStore() *store { return &store{Memory: objstoretest.NewMemory()} }

func (s *store) ReadRange(ctx context.Context, key string, off int64, p []byte) (int, int64, error) {
	s.mu.Lock()
	s.reads = append(s.reads, readCall{key, off, len(p)})
	s.mu.Unlock()
	return s.Memory.ReadRange(ctx, key, off, p)
}

// takeReads returns and forgets the reads recorded so far.
func (s *store) takeReads() []readCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reads
	s.reads = nil
	return r
}

func (s *store) put(t testing.TB, key string, data []byte) {
	t.Helper()
	if err := s.Memory.Put(context.Background(), key, data); err != nil {
		t.Fatal(err)
	}
}

func object(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// readAt reads len(p) bytes of object key at off through the blocks: one
// range, with an unknown commit time, which never bypasses them.
func readAt(ctx context.Context, c *cache.Cache, key string, p []byte, off int64) error {
	return c.ReadRanges(ctx, cache.Object{Key: key, WrittenMs: -1}, []cache.Range{{Off: off, P: p}}, nil)
}

// wantEnd checks that err is the error of a read the object ends before:
// it wraps io.ErrUnexpectedEOF and not io.EOF.
func wantEnd(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		t.Fatalf("%s: %v; want an error wrapping io.ErrUnexpectedEOF (the object ends first)", what, err)
	}
}

func newCache(t testing.TB, cfg cache.Config, r cache.RangeReader) *cache.Cache {
	t.Helper()
	c, err := cache.New(cfg, r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// gate makes every ReadRange of s block until the returned release is called
// (or the read's ctx is done), and returns a function reporting how many
// reads are blocked. Call it inside the synctest bubble.
func gate(s *store) (release func(), blocked func() int) {
	ch := make(chan struct{})
	var mu sync.Mutex
	n := 0
	s.SetFault(func(ctx context.Context, op objstoretest.Op, _ string) error {
		if op != objstoretest.OpReadRange {
			return nil
		}
		mu.Lock()
		n++
		mu.Unlock()
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// TestReadsMatchTheObject checks the cache against the object's bytes on
// every combination of object size, offset and length around block
// boundaries, cold and warm: a range inside the object reads its bytes, one
// the object ends before fails as such; and a cold read costs at most one
// ranged read per block it overlaps, each one aligned and whole.
func TestReadsMatchTheObject(t *testing.T) {
	const B = 16
	for _, size := range []int{0, 1, B - 1, B, B + 1, 2 * B, 3*B + 5} {
		obj := object(uint64(size), size)
		m := objstoretest.NewMemory()
		if err := m.Put(t.Context(), "obj", obj); err != nil {
			t.Fatal(err)
		}
		// Separate recorders: the warm cache's abandoned loads may still
		// run while the cold cache is measured.
		s := &store{Memory: m}
		warm := newCache(t, cache.Config{BlockBytes: B, MaxBytes: 1 << 20}, &store{Memory: m})
		for off := 0; off <= size+B+1; off++ {
			for _, n := range []int{1, 2, B - 1, B, B + 1, 2*B + 3, 5 * B} {
				name := fmt.Sprintf("size=%d/off=%d/len=%d", size, off, n)
				cold := newCache(t, cache.Config{BlockBytes: B, MaxBytes: 1 << 20}, s)
				s.takeReads()
				for _, c := range []*cache.Cache{cold, warm} {
					p := make([]byte, n)
					err := readAt(t.Context(), c, "obj", p, int64(off))
					if off+n > size {
						wantEnd(t, name, err)
					} else if err != nil || !bytes.Equal(p, obj[off:off+n]) {
						t.Fatalf("%s: read = %v (%x); want %x", name, err, p, obj[off:off+n])
					}
					if c == cold {
						reads := s.takeReads()
						if blocks := (off+n-1)/B - off/B + 1; len(reads) > blocks {
							t.Fatalf("%s: %d store reads for %d blocks", name, len(reads), blocks)
						}
						for _, r := range reads {
							if r.off%B != 0 || r.len != B {
								t.Fatalf("%s: store read of %d bytes at %d, want whole aligned blocks", name, r.len, r.off)
							}
						}
					}
				}
				cold.Close()
			}
		}
	}
}

func TestReadArguments(t *testing.T) {
	s := newStore()
	s.put(t, "obj", object(1, 100))
	c := newCache(t, cache.Config{BlockBytes: 16}, s)
	if err := readAt(t.Context(), c, "obj", make([]byte, 1), -1); err == nil {
		t.Errorf("negative offset: %v; want an error", err)
	}
	if err := readAt(t.Context(), c, "obj", nil, 1000); err != nil {
		t.Errorf("empty read: %v; want nil", err)
	}
	if err := readAt(t.Context(), c, "obj", make([]byte, 10), 1<<63-5); err == nil {
		t.Errorf("overflowing range: %v; want an error", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := readAt(ctx, c, "obj", make([]byte, 1), 0); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v", err)
	}
	if got := s.takeReads(); len(got) != 0 {
		t.Errorf("%d store reads for invalid or empty reads", len(got))
	}
}

func TestMissingObjectNotCached(t *testing.T) {
	s := newStore()
	c := newCache(t, cache.Config{BlockBytes: 16}, s)
	for range 2 {
		if err := readAt(t.Context(), c, "nope", make([]byte, 4), 0); !errors.Is(err, objstore.ErrNotExist) {
			t.Fatalf("read = %v, want ErrNotExist", err)
		}
	}
	if got := c.Stats().StoreReads.Load(); got != 2 {
		t.Fatalf("%d store reads, want 2 (errors are not cached)", got)
	}
}

// TestSingleFlight: N readers miss the same block at once; the store sees
// exactly one read.
func TestSingleFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const B, readers = 64, 32
		s := newStore()
		obj := object(2, 3*B)
		s.put(t, "obj", obj)
		c := newCache(t, cache.Config{BlockBytes: B}, s)
		release, blocked := gate(s)

		var wg sync.WaitGroup
		for i := range readers {
			wg.Go(func() {
				off := B + i%B // different ranges, all in block 1
				p := make([]byte, B-i%B)
				if err := readAt(context.Background(), c, "obj", p, int64(off)); err != nil || !bytes.Equal(p, obj[off:off+len(p)]) {
					t.Errorf("reader %d: read = %v", i, err)
				}
			})
		}
		synctest.Wait() // every reader is waiting on the one load
		if got := blocked(); got != 1 {
			t.Fatalf("%d store reads in flight, want 1", got)
		}
		release()
		wg.Wait()

		st := c.Stats()
		if st.StoreReads.Load() != 1 || st.Misses.Load() != readers || st.Coalesced.Load() != readers-1 {
			t.Fatalf("store reads %d, misses %d, coalesced %d; want 1, %d, %d",
				st.StoreReads.Load(), st.Misses.Load(), st.Coalesced.Load(), readers, readers-1)
		}
		if got := s.takeReads(); len(got) != 1 || got[0] != (readCall{"obj", B, B}) {
			t.Fatalf("store reads %v, want one of block 1", got)
		}
	})
}

// TestFailedLoad: a failed load reaches every waiter, is not cached, and
// the next read tries again.
func TestFailedLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const readers = 8
		s := newStore()
		s.put(t, "obj", object(3, 100))
		c := newCache(t, cache.Config{BlockBytes: 32}, s)
		errBoom := errors.New("boom")
		ch := make(chan struct{})
		s.SetFault(func(context.Context, objstoretest.Op, string) error {
			<-ch
			return errBoom
		})
		var wg sync.WaitGroup
		for range readers {
			wg.Go(func() {
				if err := readAt(context.Background(), c, "obj", make([]byte, 10), 5); !errors.Is(err, errBoom) {
					t.Errorf("read = %v; want the load's error", err)
				}
			})
		}
		synctest.Wait()
		close(ch)
		wg.Wait()
		if st := c.Stats(); st.StoreReads.Load() != 1 || st.BytesCached.Load() != 0 {
			t.Fatalf("store reads %d, bytes cached %d; want 1, 0", st.StoreReads.Load(), st.BytesCached.Load())
		}

		s.SetFault(nil)
		if err := readAt(context.Background(), c, "obj", make([]byte, 10), 5); err != nil {
			t.Fatalf("read after the fault = %v", err)
		}
		if got := c.Stats().StoreReads.Load(); got != 2 {
			t.Fatalf("%d store reads, want 2 (the failure was not cached)", got)
		}
	})
}

// TestWaiterCancelled: a reader that gives up returns at once; the load
// goes on for the others and its block is cached.
func TestWaiterCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore()
		obj := object(4, 64)
		s.put(t, "obj", obj)
		c := newCache(t, cache.Config{BlockBytes: 64}, s)
		release, _ := gate(s)

		ctxA, cancelA := context.WithCancel(context.Background())
		doneA := make(chan error, 1)
		go func() {
			doneA <- readAt(ctxA, c, "obj", make([]byte, 8), 0)
		}()
		doneB := make(chan error, 1)
		go func() {
			p := make([]byte, 8)
			err := readAt(context.Background(), c, "obj", p, 8)
			if err == nil && !bytes.Equal(p, obj[8:16]) {
				err = errors.New("wrong bytes")
			}
			doneB <- err
		}()
		synctest.Wait()
		cancelA()
		synctest.Wait()
		select {
		case err := <-doneA:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled reader: %v, want context.Canceled", err)
			}
		default:
			t.Fatal("cancelled reader still waits for the load")
		}
		release()
		if err := <-doneB; err != nil {
			t.Fatalf("other reader: %v", err)
		}
		if err := readAt(context.Background(), c, "obj", make([]byte, 64), 0); err != nil {
			t.Fatalf("read = %v", err)
		}
		if got := c.Stats().StoreReads.Load(); got != 1 {
			t.Fatalf("%d store reads, want 1: the load survived one reader and was cached", got)
		}
	})
}

// TestAbandonedLoadCancelled: when the last waiter gives up, the load is
// cancelled, and the next reader starts a new one instead of joining it.
func TestAbandonedLoadCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore()
		s.put(t, "obj", object(5, 64))
		c := newCache(t, cache.Config{BlockBytes: 64}, s)
		loadCtxDone := make(chan struct{})
		s.SetFault(func(ctx context.Context, _ objstoretest.Op, _ string) error {
			<-ctx.Done()
			close(loadCtxDone)
			return ctx.Err()
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- readAt(ctx, c, "obj", make([]byte, 8), 0)
		}()
		synctest.Wait() // the load is in the store
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("read = %v, want context.Canceled", err)
		}
		<-loadCtxDone // the store saw the load cancelled
		synctest.Wait()

		s.SetFault(nil)
		if err := readAt(context.Background(), c, "obj", make([]byte, 8), 0); err != nil {
			t.Fatalf("read after abandoning = %v", err)
		}
		if got := c.Stats().StoreReads.Load(); got != 2 {
			t.Fatalf("%d store reads, want 2", got)
		}
	})
}

func TestLRU(t *testing.T) {
	const B = 16
	s := newStore()
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		s.put(t, k, object(uint64(k[0]), B)) // one full block each
	}
	c := newCache(t, cache.Config{BlockBytes: B, MaxBytes: 4 * B}, s)
	read := func(key string) {
		t.Helper()
		if err := readAt(t.Context(), c, key, make([]byte, B), 0); err != nil {
			t.Fatalf("read(%s) = %v", key, err)
		}
		if got := c.Stats().BytesCached.Load(); got > 4*B {
			t.Fatalf("%d bytes cached, bound is %d", got, 4*B)
		}
	}
	for _, k := range []string{"a", "b", "c", "d", "a", "e"} { // a used again: b is the LRU
		read(k)
	}
	if got := c.Stats().Evictions.Load(); got != 1 {
		t.Fatalf("%d evictions, want 1", got)
	}
	s.takeReads()
	for _, k := range []string{"a", "c", "d", "e"} {
		read(k)
	}
	if got := s.takeReads(); len(got) != 0 {
		t.Fatalf("reads of cached blocks went to the store: %v", got)
	}
	read("b")
	if got := s.takeReads(); len(got) != 1 || got[0].key != "b" {
		t.Fatalf("store reads %v, want one of the evicted block b", got)
	}
	if got := c.Stats().BytesCached.Load(); got != 4*B {
		t.Fatalf("%d bytes cached, want %d", got, 4*B)
	}
}

// TestBoundUnderConcurrency reads random ranges of many objects from many
// goroutines through a small cache: data stays correct and the byte bound
// holds.
func TestBoundUnderConcurrency(t *testing.T) {
	const B, maxBytes, objects = 64, 10 * 64, 20
	s := newStore()
	data := make([][]byte, objects)
	for i := range data {
		data[i] = object(uint64(i), 100+i*37)
		s.put(t, fmt.Sprint(i), data[i])
	}
	c := newCache(t, cache.Config{BlockBytes: B, MaxBytes: maxBytes}, s)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 2))
			for range 500 {
				i := r.IntN(objects)
				off := r.IntN(len(data[i]))
				p := make([]byte, 1+r.IntN(3*B))
				err := readAt(context.Background(), c, fmt.Sprint(i), p, int64(off))
				if off+len(p) > len(data[i]) {
					if !errors.Is(err, io.ErrUnexpectedEOF) {
						t.Errorf("read(%d, %d bytes at %d) across the end = %v", i, len(p), off, err)
						return
					}
				} else if err != nil || !bytes.Equal(p, data[i][off:off+len(p)]) {
					t.Errorf("read(%d, %d bytes at %d) = %v", i, len(p), off, err)
					return
				}
				if got := c.Stats().BytesCached.Load(); got > maxBytes {
					t.Errorf("%d bytes cached, bound is %d", got, maxBytes)
					return
				}
			}
		})
	}
	wg.Wait()
	if st := c.Stats(); st.Evictions.Load() == 0 || st.Hits.Load() == 0 {
		t.Fatalf("workload did not exercise the cache: %d evictions, %d hits", st.Evictions.Load(), st.Hits.Load())
	}
}

// TestShortLastBlock: the last block comes back short, with the object's
// size, is cached as the last, and reads past the end of the object within
// it or beyond cost nothing (and fail as reads the object ends before).
func TestShortLastBlock(t *testing.T) {
	const B = 16
	s := newStore()
	obj := object(6, 2*B+8)
	s.put(t, "obj", obj)
	c := newCache(t, cache.Config{BlockBytes: B}, s)

	p := make([]byte, 8)
	if err := readAt(t.Context(), c, "obj", p, 2*B); err != nil || !bytes.Equal(p, obj[2*B:]) {
		t.Fatalf("read(last 8 bytes) = %v", err)
	}
	if got := s.takeReads(); len(got) != 1 || got[0] != (readCall{"obj", 2 * B, B}) {
		t.Fatalf("store reads %v, want one whole-block read at %d", got, 2*B)
	}
	for _, r := range []struct{ off, n int }{{2*B + 3, 10}, {2*B + 8, 1}, {2*B + 15, 1}, {B + 4, 3 * B}} {
		wantEnd(t, fmt.Sprintf("read(%d bytes at %d)", r.n, r.off), readAt(t.Context(), c, "obj", make([]byte, r.n), int64(r.off)))
	}
	if got := s.takeReads(); len(got) != 1 || got[0].off != B {
		t.Fatalf("store reads %v, want only block 1 (reads past the end are free)", got)
	}
	if got := c.Stats().BytesCached.Load(); got != B+8 { // blocks 1 and 2
		t.Fatalf("%d bytes cached, want %d", got, B+8)
	}
}

// TestObjectEndsOnBlockBoundary: a full last block is known as the last
// by the size the store reports. The first read past it loads it and, in
// parallel, the block after it, which the read gives up on once block 1
// says the object ends; later reads load nothing.
func TestObjectEndsOnBlockBoundary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const B = 16
		s := newStore()
		s.put(t, "obj", object(7, 2*B))
		c := newCache(t, cache.Config{BlockBytes: B}, s)
		for i, wantReads := range []int{2, 0} {
			wantEnd(t, fmt.Sprintf("round %d", i), readAt(t.Context(), c, "obj", make([]byte, B), B+4))
			synctest.Wait() // the abandoned load of block 2 has reached the store
			if got := s.takeReads(); len(got) != wantReads {
				t.Fatalf("round %d: store reads %v, want %d", i, got, wantReads)
			}
		}
	})
}

// TestSpanningReadLoadsInParallel: a read over several missing blocks
// issues all their reads before waiting for any.
func TestSpanningReadLoadsInParallel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const B = 16
		s := newStore()
		obj := object(8, 5*B)
		s.put(t, "obj", obj)
		c := newCache(t, cache.Config{BlockBytes: B}, s)
		release, blocked := gate(s)
		done := make(chan struct{})
		p := make([]byte, 4*B+2)
		go func() {
			defer close(done)
			if err := readAt(context.Background(), c, "obj", p, B/2); err != nil {
				t.Errorf("read = %v", err)
			}
		}()
		synctest.Wait()
		if got := blocked(); got != 5 {
			t.Fatalf("%d store reads in flight, want 5", got)
		}
		release()
		<-done
		if !bytes.Equal(p, obj[B/2:B/2+len(p)]) {
			t.Fatal("spanning read returned wrong bytes")
		}
	})
}

// TestPutThenRead: an object put into the cache is read without a single
// store read, including past its end.
func TestPutThenRead(t *testing.T) {
	const B = 16
	s := newStore()
	c := newCache(t, cache.Config{BlockBytes: B}, s)
	obj := object(9, 2*B+5)
	c.Put("obj", bytes.Clone(obj)) // Put takes ownership of its buffer
	for _, r := range []struct{ off, n int }{{0, len(obj)}, {B - 1, 3}, {2 * B, 5}, {2 * B, 100}, {2*B + 5, 1}} {
		p := make([]byte, r.n)
		err := readAt(t.Context(), c, "obj", p, int64(r.off))
		if r.off+r.n > len(obj) {
			wantEnd(t, fmt.Sprintf("read(%d bytes at %d)", r.n, r.off), err)
		} else if err != nil || !bytes.Equal(p, obj[r.off:r.off+r.n]) {
			t.Errorf("read(%d bytes at %d) = %v", r.n, r.off, err)
		}
	}
	if got := s.takeReads(); len(got) != 0 {
		t.Fatalf("store reads after Put: %v, want none", got)
	}
	if st := c.Stats(); st.BytesCached.Load() != int64(len(obj)) || st.Misses.Load() != 0 {
		t.Fatalf("bytes cached %d, misses %d; want %d, 0", st.BytesCached.Load(), st.Misses.Load(), len(obj))
	}
}

func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore()
		s.put(t, "obj", object(10, 64))
		c, err := cache.New(cache.Config{BlockBytes: 64}, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := readAt(context.Background(), c, "obj", make([]byte, 1), 0); err != nil {
			t.Fatal(err)
		}
		s.put(t, "other", object(11, 64))
		gate(s) // never released: Close must cancel the load
		done := make(chan error, 1)
		go func() {
			done <- readAt(context.Background(), c, "other", make([]byte, 1), 0)
		}()
		synctest.Wait()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, cache.ErrClosed) {
			t.Fatalf("read in flight at Close: %v, want ErrClosed", err)
		}
		if err := readAt(context.Background(), c, "obj", make([]byte, 1), 0); !errors.Is(err, cache.ErrClosed) {
			t.Fatalf("read after Close: %v, want ErrClosed", err)
		}
		c.Put("new", []byte("x"))
		if got := c.Stats().BytesCached.Load(); got != 0 {
			t.Fatalf("%d bytes cached after Close", got)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     cache.Config
		wantKey string // "" means valid
	}{
		{"zero is all defaults", cache.Config{}, ""},
		{"small", cache.Config{BlockBytes: 1, MaxBytes: 1}, ""},
		{"big block raises default max", cache.Config{BlockBytes: 512 << 20}, ""},
		{"negative block", cache.Config{BlockBytes: -1}, "diskless.cache.block.bytes"},
		{"huge block", cache.Config{BlockBytes: cache.MaxBlockBytes + 1}, "diskless.cache.block.bytes"},
		{"max below block", cache.Config{BlockBytes: 1 << 20, MaxBytes: 1 << 19}, "diskless.cache.max.bytes"},
		{"negative max", cache.Config{MaxBytes: -1}, "diskless.cache.max.bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantKey == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantKey) {
				t.Fatalf("Validate = %v, want an error naming %s", err, tt.wantKey)
			}
			if _, err := cache.New(tt.cfg, newStore()); err == nil {
				t.Fatal("New accepted an invalid config")
			}
		})
	}
}

// TestDrop: Drop removes the blocks of the keys named and no other.
func TestDrop(t *testing.T) {
	c, err := cache.New(cache.Config{BlockBytes: 4096, MaxBytes: 1 << 20}, objstoretest.NewMemory())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Put("a", make([]byte, 3*4096-10))
	c.Put("b", make([]byte, 4096))
	if n := c.Drop([]string{"a", "zz"}); n != 3 {
		t.Fatalf("dropped %d blocks, want 3", n)
	}
	if got := c.Stats().BytesCached.Load(); got != 4096 {
		t.Fatalf("%d bytes cached after the drop, want 4", got)
	}
}
