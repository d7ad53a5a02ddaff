// Package cache is the range-read block cache in front of the object store
// (DESIGN §Fetch step 3).
//
// Objects are immutable (SPEC §7), so a cached block never goes stale and
// the cache needs no invalidation for correctness. Each object is cut into
// fixed-size aligned blocks:
//
//	object  |<------------ B ------------>|<------------ B ------------>|<--- short --->|
//	block   0                             1                             2          end of object
//	bytes   [0, B)                        [B, 2B)                       [2B, size)
//
// A read is served from the blocks it overlaps. A missing block is loaded
// whole with one ranged read of [i·B, (i+1)·B); the store answers with the
// bytes the object holds there and the object's size (DESIGN §The read
// contract), so every block knows whether its object ends in it: the last
// block (short, or full up to the end) is cached as the last, and later
// reads past the end cost nothing. The end is learnt only from the size the
// store reports, never from a short answer: a load that fails, or whose
// answer does not hold exactly the bytes its size implies, caches nothing,
// since a false end would make reads across it fail without a GET until
// the block is evicted.
//
// Loads are single-flight: concurrent misses on one block share one read,
// and its error, if any, goes to every waiter and is not cached. A load runs
// on a goroutine owned by the Cache, detached from the reader that started
// it: a reader whose ctx is done returns at once, and the load goes on for
// the others; it is cancelled only when no reader waits for it any more (or
// at Close). A read spanning several blocks starts all their loads before
// waiting for the first, so they proceed in parallel.
//
// The cache is bounded by the bytes of block data it holds, evicting the
// least recently used block. Buffers of loads in flight are outside the
// bound: at most one block per distinct missing block being read.
//
// # Reads older than the cache's reach
//
// A consumer that lags far behind the producers reads data whose blocks
// were evicted long ago. Loading them would cost a GET per block, read
// whole blocks for a partition's few bytes, and push the hot tail that the
// other consumers are reading out of the cache, for data that nobody is
// likely to read again before it is itself evicted. ReadRanges therefore
// takes the time the data was written — its commit time, ms since the Unix
// epoch (diskless.BatchCoordinate.LogAppendTime) — and decides:
//
//   - The cache's reach is the last-use time of its least recently used
//     block (set when a block is cached, by Put or a load, and at every
//     hit): any block not used since then is gone, so data written before
//     it cannot be cached unless a read has used it since.
//   - A read is beyond reach when the cache is full (one more block would
//     evict) and the data was written before the reach. It is then served,
//     unless every block it needs is cached or loading, by one ranged read
//     of exactly the bytes that bound the ranges (ranges more than a block
//     apart get a read each, so over-read stays below one block per gap).
//     Nothing is cached and nothing is evicted; the LRU order is untouched.
//   - Every other read goes through the blocks.
//
// This needs no state beyond a timestamp per block, holds across restarts
// (an empty cache is not full, so after a restart old data is read through
// the blocks until the cache fills, which is right: it evicts nothing), and
// follows the cache's size and the traffic on its own: the reach is
// however far back the bytes it holds go. The two clocks compared are the
// coordinator's (commit) and this cache's (Config.Now); skew of a few ms
// is immaterial against reaches of seconds. Concurrent bypassed reads of
// the same bytes are not coalesced: lagging consumers rarely read the same
// old bytes at the same moment.
package cache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"time"
)

// RangeReader is what the cache needs from the object store:
// objstore.Store satisfies it, with its read contract (DESIGN §The read
// contract): on success p[:n] holds the object's bytes from off, n =
// min(len(p), size−off), and size is the object's size in bytes; no short
// read without an error. It must honour ctx.
type RangeReader interface {
	ReadRange(ctx context.Context, key string, off int64, p []byte) (n int, size int64, err error)
}

// ErrClosed is returned (wrapped) by reads after, or cut short by, Close.
var ErrClosed = errors.New("cache: closed")

// errAbandoned cancels a load that no reader waits for any more.
var errAbandoned = errors.New("cache: load abandoned by every reader")

// Cache is a bounded, single-flight block cache over a RangeReader. It is
// safe for concurrent use. Close releases it.
type Cache struct {
	blockSize int64
	maxBytes  int64
	now       func() time.Time
	r         RangeReader
	stats     Stats
	loaders   sync.WaitGroup // one per load goroutine; Add only under mu while open

	// mu covers the block index, the LRU list, the loads in flight and
	// their waiter counts. It is never held across a store read or a copy
	// of block data.
	mu struct {
		sync.Mutex
		blocks map[blockKey]*block
		lru    block // sentinel: lru.next is the most recently used block
		bytes  int64 // sum of len(data) over blocks
		loads  map[blockKey]*load
		closed bool
	}
}

// blockKey names block index of object key.
type blockKey struct {
	key   string
	index int64
}

// block is one cached block. data and last are immutable once the block is
// published; readers copy from it without the lock, also after it is
// evicted.
type block struct {
	bk   blockKey
	data []byte // len ≤ blockSize; < blockSize only for the object's last block
	// last is set when the object ends at the end of data (the store said
	// so by its size).
	last bool
	// lastUse is when the block was cached or last hit, ms since the Unix
	// epoch by Config.Now; guarded by Cache.mu.
	lastUse    int64
	prev, next *block // LRU links, guarded by Cache.mu
}

// load is one block read in flight.
type load struct {
	bk     blockKey
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when blk and err are set

	waiters  int  // readers waiting or about to wait, guarded by Cache.mu
	finished bool // guarded by Cache.mu

	blk *block // set before done is closed; empty data when the object ended before the block
	err error
}

// New returns a cache over r. It fails if cfg is invalid (see
// Config.Validate).
func New(cfg Config, r RangeReader) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	cfg = cfg.withDefaults()
	c := &Cache{blockSize: cfg.BlockBytes, maxBytes: cfg.MaxBytes, now: cfg.Now, r: r}
	c.mu.blocks = make(map[blockKey]*block)
	c.mu.loads = make(map[blockKey]*load)
	c.mu.lru.next, c.mu.lru.prev = &c.mu.lru, &c.mu.lru
	return c, nil
}

// Stats returns the cache's counters, updated live.
func (c *Cache) Stats() *Stats { return &c.stats }

// ref is one block a read needs: cached (blk) or being loaded (ld), in
// which case the read holds one of ld's waiter counts until it waits or
// releases it.
type ref struct {
	blk *block
	ld  *load
}

// checkRange refuses a negative offset and a range whose end overflows.
func checkRange(key string, off int64, n int) error {
	switch {
	case off < 0:
		return fmt.Errorf("cache: read %s: negative offset %d", key, off)
	case off > math.MaxInt64-int64(n):
		return fmt.Errorf("cache: read %s: offset %d + %d bytes overflows", key, off, n)
	}
	return nil
}

// Range is one byte range of an object for ReadRanges: len(P) bytes at
// byte offset Off, read into P.
type Range struct {
	Off int64
	P   []byte
}

// ReadRanges fills every range of rs, whole, from object key. writtenMs is
// when the data was written to the store: its commit time in ms since the
// Unix epoch (diskless.BatchCoordinate.LogAppendTime; the oldest, if the
// ranges were committed at different times); negative means unknown.
//
// Data older than the cache's reach (see the package comment) that is not
// all cached is read straight from the store, with one ranged read that
// bounds the ranges (one per cluster of ranges less than a block apart),
// and not cached: counted in Stats.BypassReads and BypassReadBytes as well
// as StoreReads and StoreReadBytes, and in neither Hits nor Misses. It runs
// on the caller's goroutine with ctx, and Close does not cut it short.
// Other data is read through the blocks, all blocks of all ranges loading
// in parallel; writtenMs < 0 always reads through them.
//
// Ranges may come in any order and overlap; empty ones are ignored.
// Errors: a range the object ends before filling (io.ErrUnexpectedEOF),
// errors of the store wrapped (objstore.ErrNotExist among them), ctx's
// error, ErrClosed, an invalid range. After an error, which ranges were
// filled is unspecified.
func (c *Cache) ReadRanges(ctx context.Context, key string, writtenMs int64, rs []Range) error {
	for i := range rs {
		if err := checkRange(key, rs[i].Off, len(rs[i].P)); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cache: read %s: %w", key, err)
	}
	now := c.now().UnixMilli()
	var (
		buf     [8]ref
		refs    = buf[:0]
		nbuf    [4]int
		perRead = nbuf[:0] // refs of each range, in order
	)
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return fmt.Errorf("cache: read %s: %w", key, ErrClosed)
	}
	if c.beyondReachLocked(writtenMs) && !c.coveredLocked(key, rs) {
		c.mu.Unlock()
		return c.bypass(ctx, key, rs)
	}
	for i := range rs {
		n := len(refs)
		if len(rs[i].P) > 0 {
			refs = c.acquireLocked(ctx, key, rs[i].Off, int64(len(rs[i].P)), now, refs)
		}
		perRead = append(perRead, len(refs)-n)
	}
	c.mu.Unlock()

	var err error
	for i := range rs {
		rr := refs[:perRead[i]]
		refs = refs[perRead[i]:]
		if err != nil {
			c.releaseAll(rr)
			continue
		}
		err = c.fill(ctx, key, rs[i].P, rs[i].Off, rr)
	}
	return err
}

// beyondReachLocked reports whether data written at writtenMs (ms; < 0:
// unknown) is older than the cache's reach: the cache is full, and its
// least recently used block was last used after the data was written.
func (c *Cache) beyondReachLocked(writtenMs int64) bool {
	if writtenMs < 0 || c.mu.bytes+c.blockSize <= c.maxBytes {
		return false // room to spare: caching evicts nothing
	}
	tail := c.mu.lru.prev
	return tail != &c.mu.lru && writtenMs < tail.lastUse
}

// coveredLocked reports whether every block rs needs of object key is
// cached or being loaded, so reading through the cache costs no GET.
func (c *Cache) coveredLocked(key string, rs []Range) bool {
	for i := range rs {
		if len(rs[i].P) == 0 {
			continue
		}
		first, last := rs[i].Off/c.blockSize, (rs[i].Off+int64(len(rs[i].P))-1)/c.blockSize
		for j := first; j <= last; j++ {
			bk := blockKey{key, j}
			if b := c.mu.blocks[bk]; b != nil {
				if b.last {
					break
				}
				continue
			}
			if c.mu.loads[bk] == nil {
				return false
			}
		}
	}
	return true
}

// bypass reads rs straight from the store without caching (see
// ReadRanges): ranges in offset order, those less than a block apart
// together, with one ranged read of the bytes that bound them; a lone
// range is read straight into its buffer.
func (c *Cache) bypass(ctx context.Context, key string, rs []Range) error {
	order := make([]int, 0, len(rs))
	for i := range rs {
		if len(rs[i].P) > 0 {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(rs[a].Off, rs[b].Off) })
	for len(order) > 0 {
		lo := rs[order[0]].Off
		hi := lo + int64(len(rs[order[0]].P))
		k := 1
		for ; k < len(order); k++ {
			r := &rs[order[k]]
			if r.Off-hi > c.blockSize {
				break
			}
			hi = max(hi, r.Off+int64(len(r.P)))
		}
		if k == 1 {
			if err := c.readStore(ctx, key, rs[order[0]].P, lo); err != nil {
				return err
			}
		} else {
			buf := make([]byte, hi-lo)
			if err := c.readStore(ctx, key, buf, lo); err != nil {
				return err
			}
			for _, i := range order[:k] {
				copy(rs[i].P, buf[rs[i].Off-lo:])
			}
		}
		order = order[k:]
	}
	return nil
}

// readStore fills p from the store at off, bypassing the blocks, and
// counts the read.
func (c *Cache) readStore(ctx context.Context, key string, p []byte, off int64) error {
	c.stats.StoreReads.Add(1)
	c.stats.BypassReads.Add(1)
	n, size, err := c.r.ReadRange(ctx, key, off, p)
	if err == nil {
		c.stats.StoreReadBytes.Add(int64(n))
		c.stats.BypassReadBytes.Add(int64(n))
		switch want := min(int64(len(p)), max(size-off, 0)); {
		case int64(n) != want:
			err = fmt.Errorf("the store returned %d bytes of an object of %d, breaking its read contract", n, size)
		case n < len(p):
			err = fmt.Errorf("object ends at %d: %w", size, io.ErrUnexpectedEOF)
		}
	}
	if err != nil {
		return fmt.Errorf("cache: read %s [%d, %d) bypassing the cache: %w", key, off, off+int64(len(p)), err)
	}
	return nil
}

// fill copies [off, off+len(p)) of object key into p from refs, the blocks
// acquireLocked returned for that range, waiting for loads, and gives up
// the loads it does not wait for. The object ending before p is full is an
// error wrapping io.ErrUnexpectedEOF.
func (c *Cache) fill(ctx context.Context, key string, p []byte, off int64, refs []ref) (err error) {
	n := 0
	for i := range refs {
		if err != nil || n == len(p) {
			// Done early (error, or the object ended): give up our
			// interest in the loads we will not wait for.
			if refs[i].ld != nil {
				c.release(refs[i].ld)
			}
			continue
		}
		b := refs[i].blk
		if b == nil {
			if b, err = c.wait(ctx, refs[i].ld); err != nil {
				err = fmt.Errorf("cache: read %s: %w", key, err)
				continue
			}
		}
		start := b.bk.index * c.blockSize
		if inner := off + int64(n) - start; inner < int64(len(b.data)) {
			n += copy(p[n:], b.data[inner:])
		}
		if n < len(p) && b.last {
			err = fmt.Errorf("cache: read %s [%d, %d): object ends at %d: %w",
				key, off, off+int64(len(p)), start+int64(len(b.data)), io.ErrUnexpectedEOF)
		}
	}
	return err
}

// releaseAll gives up the loads of refs without waiting for them.
func (c *Cache) releaseAll(refs []ref) {
	for i := range refs {
		if refs[i].ld != nil {
			c.release(refs[i].ld)
		}
	}
}

// acquireLocked appends to refs, in order, every block overlapping
// [off, off+length) up to the object's end if known: cached blocks (marked
// used at nowMs) or loads, started if need be, with a waiter count taken.
func (c *Cache) acquireLocked(ctx context.Context, key string, off, length, nowMs int64, refs []ref) []ref {
	first, last := off/c.blockSize, (off+length-1)/c.blockSize
	for i := first; i <= last; i++ {
		bk := blockKey{key, i}
		if b := c.mu.blocks[bk]; b != nil {
			c.stats.Hits.Add(1)
			b.lastUse = nowMs
			c.unlinkLocked(b)
			c.pushFrontLocked(b)
			refs = append(refs, ref{blk: b})
			if b.last {
				break // blocks beyond the object's end are not worth a GET
			}
			continue
		}
		c.stats.Misses.Add(1)
		l := c.mu.loads[bk]
		if l == nil {
			l = c.startLoadLocked(ctx, bk)
		} else {
			c.stats.Coalesced.Add(1)
		}
		l.waiters++
		refs = append(refs, ref{ld: l})
	}
	return refs
}

// startLoadLocked starts loading bk on a new goroutine. The load's context
// keeps the values of the reader's ctx (for tracing) but not its
// cancellation; see release.
func (c *Cache) startLoadLocked(ctx context.Context, bk blockKey) *load {
	lctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	l := &load{bk: bk, cancel: cancel, done: make(chan struct{})}
	c.mu.loads[bk] = l
	c.loaders.Add(1)
	go c.load(lctx, l)
	return l
}

// load reads one block from the store and publishes the outcome.
func (c *Cache) load(ctx context.Context, l *load) {
	defer c.loaders.Done()
	defer l.cancel(nil)
	buf := make([]byte, c.blockSize)
	start := l.bk.index * c.blockSize
	c.stats.StoreReads.Add(1)
	n, size, err := c.r.ReadRange(ctx, l.bk.key, start, buf)
	var b *block
	if err == nil {
		c.stats.StoreReadBytes.Add(int64(n))
		if want := min(c.blockSize, max(size-start, 0)); int64(n) != want {
			// The end is learnt from the size only: an answer that does
			// not match it could make a false end.
			err = fmt.Errorf("the store returned %d bytes of an object of %d, breaking its read contract", n, size)
		} else {
			data := buf[:n]
			if n < len(buf) {
				data = slices.Clone(data) // do not pin a partly unused buffer
			}
			b = &block{bk: l.bk, data: data, last: start+int64(n) >= size}
		}
	}
	if err != nil {
		if errors.Is(context.Cause(ctx), ErrClosed) {
			err = fmt.Errorf("%w: %w", ErrClosed, err)
		}
		err = fmt.Errorf("load block %d [%d, %d): %w", l.bk.index, start, start+c.blockSize, err)
	}
	if b != nil {
		b.lastUse = c.now().UnixMilli() // unpublished yet: finish takes the lock after
	}
	c.finish(l, b, err)
}

// finish publishes a load's outcome to its waiters and, on success, caches
// the block.
func (c *Cache) finish(l *load, b *block, err error) {
	c.mu.Lock()
	if c.mu.loads[l.bk] == l {
		delete(c.mu.loads, l.bk)
	}
	l.finished = true
	if err == nil && !c.mu.closed {
		b = c.insertLocked(b)
	}
	l.blk, l.err = b, err
	c.mu.Unlock()
	close(l.done)
}

// wait waits for l's outcome or for ctx to be done, and gives up the
// caller's waiter count.
func (c *Cache) wait(ctx context.Context, l *load) (*block, error) {
	select {
	case <-l.done:
		return l.blk, l.err
	case <-ctx.Done():
		c.release(l)
		return nil, ctx.Err()
	}
}

// release gives up one waiter count of l without waiting. When no reader
// waits any more and the load is still running, nobody wants the block:
// the load is cancelled and forgotten, so the next reader starts afresh
// rather than joining a cancelled load.
func (c *Cache) release(l *load) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l.waiters--
	if l.waiters > 0 || l.finished {
		return
	}
	if c.mu.loads[l.bk] == l {
		delete(c.mu.loads, l.bk)
	}
	l.cancel(errAbandoned)
}

// Put caches object key, just uploaded by this sidecar, so that its first
// readers need no GET (DESIGN §Fetch step 3). data must be the whole
// object, and Put takes ownership of it: objects are immutable (SPEC §7),
// so the cached blocks are sub-slices of data, not copies, and the caller
// must never modify data afterwards. (Copying would be a second full copy
// of every produced byte on the produce path.) The blocks are accounted
// and evicted one by one; the backing array is freed when the last of them
// is evicted. Blocks already cached are kept. Put after Close does nothing.
func (c *Cache) Put(key string, data []byte) {
	if len(data) == 0 {
		return
	}
	now := c.now().UnixMilli()
	blocks := make([]*block, 0, (int64(len(data))+c.blockSize-1)/c.blockSize)
	for i := int64(0); i*c.blockSize < int64(len(data)); i++ {
		start := i * c.blockSize
		end := min(start+c.blockSize, int64(len(data)))
		blocks = append(blocks, &block{bk: blockKey{key, i}, data: data[start:end:end], last: end == int64(len(data)), lastUse: now})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return
	}
	for _, b := range blocks {
		c.insertLocked(b)
	}
}

// insertLocked caches b as the most recently used block, evicting least
// recently used ones to stay within maxBytes, and returns the block now
// cached under b's key (b, or one cached before). An empty b (the object
// ends before the block) is not cached: the object's last block, which
// says so, is.
func (c *Cache) insertLocked(b *block) *block {
	if len(b.data) == 0 {
		return b
	}
	if old := c.mu.blocks[b.bk]; old != nil {
		return old
	}
	c.mu.blocks[b.bk] = b
	c.pushFrontLocked(b)
	c.mu.bytes += int64(len(b.data))
	for c.mu.bytes > c.maxBytes {
		victim := c.mu.lru.prev
		if victim == b {
			panic("cache: a single block exceeds the cache size") // Validate ensures MaxBytes ≥ BlockBytes
		}
		c.removeLocked(victim)
		c.stats.Evictions.Add(1)
	}
	// Set once, after eviction: observers never see the bound exceeded.
	c.stats.BytesCached.Store(c.mu.bytes)
	return b
}

func (c *Cache) removeLocked(b *block) {
	c.unlinkLocked(b)
	delete(c.mu.blocks, b.bk)
	c.mu.bytes -= int64(len(b.data))
}

func (c *Cache) pushFrontLocked(b *block) {
	head := &c.mu.lru
	b.prev, b.next = head, head.next
	head.next.prev = b
	head.next = b
}

func (c *Cache) unlinkLocked(b *block) {
	b.prev.next = b.next
	b.next.prev = b.prev
	b.prev, b.next = nil, nil
}

// Close cancels the loads in flight, waits for their goroutines to return
// and drops every cached block. Reads waiting on a cancelled load fail with
// ErrClosed; later reads fail with ErrClosed; later Puts do nothing. Close
// is idempotent and always returns nil.
func (c *Cache) Close() error {
	c.mu.Lock()
	if !c.mu.closed {
		c.mu.closed = true
		for _, l := range c.mu.loads {
			l.cancel(ErrClosed)
		}
		for b := c.mu.lru.next; b != &c.mu.lru; {
			next := b.next
			c.removeLocked(b)
			b = next
		}
		c.stats.BytesCached.Store(0)
	}
	c.mu.Unlock()
	c.loaders.Wait()
	return nil
}
