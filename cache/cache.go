// Package cache is the range-read block cache in front of the object store
// (DESIGN §Fetch step 3).
//
// Objects are immutable (SPEC §7), so a cached block never goes stale. Each
// object is cut into fixed-size aligned blocks:
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
// store reports, never from a short answer, and when the reader knows the
// object's size (Object.Size, from the commit) a store answering another
// size fails the load: a truncated or replaced object never leaves a false
// end cached.
//
// Loads are single-flight: concurrent misses on one block share one read,
// and its error, if any, goes to every waiter and is not cached. A load runs
// on a goroutine owned by the Cache, detached from the reader that started
// it: a reader whose ctx is done returns at once, and the load goes on for
// the others; it is cancelled only when no reader waits for it any more (or
// at Close). A read spanning several blocks starts all their loads before
// waiting for the first, so they proceed in parallel.
//
// # Verification before trust
//
// Bytes read from the store are checked before they are kept or served
// (DESIGN §Fetch step 3): a reader passes a Checker, which verifies the
// bytes of each of its ranges (for fetch: every batch against its
// coordinate, CRC-32C included). A block a checking reader loaded is
// cached only once a check over it has passed; every block remembers the
// byte ranges of it that have passed (verified intervals), so a later hit
// on them is not checked again; only a range with an unverified part is.
// A range whose check fails has its unverified blocks dropped and is read
// from the store once more; if it fails again its blocks are dropped
// again, nothing of it is cached, and the range reports the failure
// (Range.Err, ErrCorrupt). A whole object read with one GET (catch-up
// reads, below) is checked whole by Config.CheckObject (every batch's
// framing and CRC-32C) and, once it passes, cached as verified. Objects
// this sidecar uploaded (Put) never came from the store and are verified
// by construction.
//
// The cache is bounded by the bytes of block data it holds, evicting the
// least recently used block. Buffers of loads in flight are outside the
// bound: at most one block per distinct missing block being read, and the
// catch-up reads in flight.
//
// # Reads older than the cache's reach
//
// A consumer that lags far behind the producers reads data whose blocks
// were evicted long ago. Loading them into the LRU would push out the hot
// tail that the other consumers are reading, for data that nobody is
// likely to read again soon; reading each partition's range with its own
// GET (as every fetch of a lagging consumer needs a few partitions of many
// objects) would cost a GET per partition per object. ReadRanges therefore
// takes the time the data was written — its commit time, ms since the Unix
// epoch (diskless.RunCoordinate.LogAppendTime) — and decides:
//
//   - The cache's reach is the last-use time of its least recently used
//     block (set when a block is cached, by Put or a load, and at every
//     hit): any block not used since then is gone, so data written before
//     it cannot be cached unless a read has used it since.
//   - A read is beyond reach when the cache is full (one more block would
//     evict) and the data was written before the reach. Unless every block
//     it needs is cached or loading, the whole object is then read with
//     one GET (single-flight: concurrent readers of it share the read) into
//     the catch-up segment, a small LRU of whole objects of its own
//     (Config.CatchUpMaxBytes), outside the main LRU: the other partitions
//     of that object, read by later fetches of the same consumer or by
//     other lagging consumers, are hits, and nothing in the main LRU is
//     evicted or reordered. ReadAhead starts such a read for the object a
//     sequential reader will need next, so the store's first-byte latency
//     is hidden.
//   - With the catch-up segment disabled, an object too large for it (over
//     half of it) or of unknown size, a read beyond reach is served by one
//     ranged read of exactly the bytes that bound the ranges (one per
//     cluster of ranges less than a block apart) and cached nowhere.
//   - Every other read goes through the blocks.
//
// This needs no state beyond a timestamp per block, holds across restarts
// (an empty cache is not full, so after a restart old data is read through
// the blocks until the cache fills, which is right: it evicts nothing), and
// follows the cache's size and the traffic on its own: the reach is
// however far back the bytes it holds go. The two clocks compared are the
// coordinator's (commit) and this cache's (Config.Now); skew of a few ms
// is immaterial against reaches of seconds.
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

// ErrCorrupt is wrapped by the error of ReadRanges when a range failed its
// check on two reads from the store (see Range.Err).
var ErrCorrupt = errors.New("cache: bytes read from the store failed their check twice")

// errAbandoned cancels a load that no reader waits for any more.
var errAbandoned = errors.New("cache: load abandoned by every reader")

// maxReadAheads bounds the read-aheads (ReadAhead) in flight: one object
// ahead for a sequential reader, and one more for a second reader.
const maxReadAheads = 2

// Object names the object a read is of.
type Object struct {
	// Key is the object key.
	Key string
	// Size is the object's size in bytes as its commit recorded it
	// (diskless.RunCoordinate.FileSize); 0 means unknown. When known, a
	// store answering another size fails the read (the object was
	// truncated or replaced), a range past it fails without a GET, and a
	// catch-up read can take the whole object.
	Size int64
	// WrittenMs is when the data was written to the store: its commit
	// time in ms since the Unix epoch (diskless.RunCoordinate.LogAppendTime;
	// the oldest, if the ranges were committed at different times);
	// negative means unknown, which always reads through the blocks.
	WrittenMs int64
	// SequentialEnd, when positive, says one reader reads the object front
	// to back up to this byte and is then done with it: a segment object
	// (its data's end; the index after it is read first). A read of a range
	// ending there finishes the object, which the catch-up segment then
	// evicts first; and the object is read whole into the catch-up segment
	// (or read ahead) only if it fits beside the other such objects not
	// finished yet, else it is read by exact ranged reads — evicting an
	// object a reader is still reading would read it again, whole, at its
	// next fetch. Such an object is not put in the cache when written, so
	// once the cache is full a read of it is beyond reach whatever
	// WrittenMs says.
	SequentialEnd int64
}

// Range is one byte range of an object for ReadRanges: len(P) bytes at
// byte offset Off, read into P. Err is set by ReadRanges: nil, or the
// error (wrapping ErrCorrupt and the Checker's error) of a range whose
// bytes failed their check on both reads.
type Range struct {
	Off int64
	P   []byte
	Err error
}

// Checker verifies what ReadRanges read: Check(i, p) is called with range
// i's index and its bytes (p is rs[i].P, filled) and returns nil if they
// are right. It is called only for ranges with bytes not verified before,
// possibly from several goroutines at once for different calls, never
// concurrently within one ReadRanges call. Check must not keep p.
type Checker interface {
	Check(i int, p []byte) error
}

// Cache is a bounded, single-flight block cache over a RangeReader. It is
// safe for concurrent use. Close releases it.
type Cache struct {
	blockSize   int64
	maxBytes    int64
	catchUpMax  int64 // 0: no catch-up segment
	now         func() time.Time
	checkObject func(key string, object []byte) error
	r           RangeReader
	stats       Stats
	loaders     sync.WaitGroup // one per load goroutine; Add only under mu while open

	// mu covers the block index, both LRU lists, the loads in flight and
	// their waiter counts, and every block's verified intervals. It is
	// never held across a store read, a check or a copy of block data.
	mu struct {
		sync.Mutex
		blocks  map[blockKey]*block
		lru     block // sentinel: lru.next is the most recently used block
		bytes   int64 // sum of len(data) over the blocks in lru
		catchUp block // sentinel of the catch-up segment's LRU
		cuBytes int64 // sum of len(data) over the blocks in catchUp
		loads   map[blockKey]*load
		aheads  int // read-aheads in flight
		closed  bool
		// seq holds the objects with a SequentialEnd in, or being
		// loaded into, the catch-up segment.
		seq map[string]*seqObject
	}
}

// seqObject is an object read front to back by one reader
// (Object.SequentialEnd) in the catch-up segment.
type seqObject struct {
	size     int64 // the object's size: what it takes there once loaded
	blocks   int   // its blocks cached in the catch-up segment
	loading  bool  // a whole-object load of it is in flight
	finished bool  // a read reached its SequentialEnd
}

// blockKey names block index of object key.
type blockKey struct {
	key   string
	index int64
}

// block is one block of an object. data, last and catchUp are immutable
// once the block is published (to a load's waiters or the cache); readers
// copy from it without the lock, also after it is evicted.
type block struct {
	bk   blockKey
	data []byte // len ≤ blockSize; < blockSize only for the object's last block
	// last is set when the object ends at the end of data (the store said
	// so by its size).
	last bool
	// catchUp: the block belongs to the catch-up segment.
	catchUp bool
	// cached: the block is in Cache.mu.blocks; guarded by Cache.mu.
	cached bool
	// verified holds the byte ranges of the block, as object offsets,
	// whose check passed (all of it for a Put block or a checked whole
	// object); guarded by Cache.mu.
	verified intervals
	// lastUse is when the block was cached or last hit, ms since the Unix
	// epoch by Config.Now; guarded by Cache.mu.
	lastUse    int64
	prev, next *block // LRU links, guarded by Cache.mu
}

func (b *block) start(blockSize int64) int64 { return b.bk.index * blockSize }

// load is one read in flight of blocks [first, first+n) of an object: one
// block (a miss), or a whole object (a catch-up read).
type load struct {
	key      string
	first, n int64
	size     int64 // the object's expected size; 0 unknown
	// catchUp: the blocks go into the catch-up segment; whole: the read
	// is of the whole object, checked by Config.CheckObject.
	catchUp, whole bool
	// trusted: cache the blocks when the load ends (no checking reader
	// started it, or the whole object passed its check).
	trusted bool
	// ahead: a read-ahead, which no reader started and which is not
	// cancelled when its waiters leave.
	ahead  bool
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when blks, verified and err are set

	waiters  int  // readers waiting or about to wait, guarded by Cache.mu
	finished bool // guarded by Cache.mu

	// Set before done is closed, immutable after. blks[i] is block
	// first+i; a block the object ends before is empty. verified: every
	// block is verified whole.
	blks     []*block
	verified bool
	err      error
}

// New returns a cache over r. It fails if cfg is invalid (see
// Config.Validate).
func New(cfg Config, r RangeReader) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	cfg = cfg.withDefaults()
	c := &Cache{blockSize: cfg.BlockBytes, maxBytes: cfg.MaxBytes, now: cfg.Now, r: r,
		checkObject: cfg.CheckObject, catchUpMax: max(cfg.CatchUpMaxBytes, 0)}
	c.mu.blocks = make(map[blockKey]*block)
	c.mu.loads = make(map[blockKey]*load)
	c.mu.seq = make(map[string]*seqObject)
	c.mu.lru.next, c.mu.lru.prev = &c.mu.lru, &c.mu.lru
	c.mu.catchUp.next, c.mu.catchUp.prev = &c.mu.catchUp, &c.mu.catchUp
	return c, nil
}

// Stats returns the cache's counters, updated live.
func (c *Cache) Stats() *Stats { return &c.stats }

// ref is one block a read needs: cached (blk) or being loaded (ld, block
// index idx), in which case the read holds one of ld's waiter counts until
// it waits or releases it. verified: blk's part that the range needs had
// passed a check when it was acquired.
type ref struct {
	blk      *block
	ld       *load
	idx      int64
	verified bool
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

// mode is how one ReadRanges call reads what is not cached.
type mode int

const (
	throughBlocks mode = iota // per-block loads into the main LRU
	catchUpRead               // one whole-object load into the catch-up segment
	bypassRead                // exact ranged reads, cached nowhere
)

// ReadRanges fills every range of rs, whole, from object obj, checking
// with check (nil: the bytes are trusted as read) every range whose bytes
// have not passed a check before (see the package comment).
//
// Data older than the cache's reach that is not all cached is read with
// one GET of the whole object into the catch-up segment (Stats.CatchUpReads)
// or, when that cannot be, straight from the store with one ranged read
// that bounds the ranges (Stats.BypassReads; one per cluster of ranges
// less than a block apart) and not cached; both are also in StoreReads and
// StoreReadBytes and in neither Hits nor Misses. A bypass read runs on the
// caller's goroutine with ctx, and Close does not cut it short. Other data
// is read through the blocks, all blocks of all ranges loading in
// parallel.
//
// Ranges may come in any order and overlap; empty ones are ignored.
// A range whose check fails is read from the store once more; if it fails
// again, its Err is set and ReadRanges, having read the other ranges,
// returns an error wrapping ErrCorrupt. Other errors fail the call: a range
// the object ends before filling (io.ErrUnexpectedEOF), a store answering
// another size than obj.Size, errors of the store wrapped
// (objstore.ErrNotExist among them), ctx's error, ErrClosed, an invalid
// range. After an error, which ranges were filled is unspecified, except
// that with ErrCorrupt every range without Err is filled and checked.
func (c *Cache) ReadRanges(ctx context.Context, obj Object, rs []Range, check Checker) error {
	for i := range rs {
		rs[i].Err = nil
		if err := checkRange(obj.Key, rs[i].Off, len(rs[i].P)); err != nil {
			return err
		}
		if end := rs[i].Off + int64(len(rs[i].P)); obj.Size > 0 && end > obj.Size && len(rs[i].P) > 0 {
			return fmt.Errorf("cache: read %s [%d, %d): object ends at %d: %w", obj.Key, rs[i].Off, end, obj.Size, io.ErrUnexpectedEOF)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cache: read %s: %w", obj.Key, err)
	}
	var (
		buf     [8]ref
		nbuf    [4]int
		perRead = nbuf[:0] // refs of each range, in order
	)
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return fmt.Errorf("cache: read %s: %w", obj.Key, ErrClosed)
	}
	m := c.modeLocked(ctx, obj, rs, check != nil)
	if m == bypassRead {
		c.mu.Unlock()
		return c.bypass(ctx, obj, rs, check)
	}
	now := c.now().UnixMilli()
	refs := buf[:0]
	for i := range rs {
		n := len(refs)
		if len(rs[i].P) > 0 {
			refs = c.acquireLocked(ctx, obj, rs[i].Off, int64(len(rs[i].P)), now, m, check != nil, refs)
		}
		perRead = append(perRead, len(refs)-n)
	}
	if o := c.mu.seq[obj.Key]; o != nil && obj.SequentialEnd > 0 {
		for i := range rs {
			if end := rs[i].Off + int64(len(rs[i].P)); rs[i].Off < obj.SequentialEnd && end == obj.SequentialEnd {
				o.finished = true
			}
		}
	}
	c.mu.Unlock()

	var err, corrupt error
	for i := range rs {
		rr := refs[:perRead[i]]
		refs = refs[perRead[i]:]
		if err != nil {
			c.releaseAll(rr)
			continue
		}
		if err = c.fill(ctx, obj.Key, rs[i].P, rs[i].Off, rr); err != nil {
			continue
		}
		if check == nil || allVerified(rr) {
			c.accept(rs[i].Off, int64(len(rs[i].P)), rr, check != nil)
			continue
		}
		cerr := check.Check(i, rs[i].P)
		if cerr == nil {
			c.accept(rs[i].Off, int64(len(rs[i].P)), rr, true)
			continue
		}
		c.stats.CheckFailures.Add(1)
		c.drop(rr)
		if err = c.reread(ctx, obj, rs, i, check); err != nil {
			continue
		}
		if rs[i].Err != nil && corrupt == nil {
			corrupt = rs[i].Err
		}
	}
	if err == nil && corrupt != nil {
		err = corrupt
	}
	return err
}

// reread reads range i of rs again from the store after its check failed
// (the blocks it came from dropped), and checks it again: on a second
// failure the range's Err is set and its blocks dropped again. The error
// returned is the read's, not the check's.
func (c *Cache) reread(ctx context.Context, obj Object, rs []Range, i int, check Checker) error {
	c.stats.Rereads.Add(1)
	r := &rs[i]
	var buf [4]ref
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return fmt.Errorf("cache: read %s: %w", obj.Key, ErrClosed)
	}
	m := c.modeLocked(ctx, obj, rs[i:i+1], true)
	var refs []ref
	if m != bypassRead {
		refs = c.acquireLocked(ctx, obj, r.Off, int64(len(r.P)), c.now().UnixMilli(), m, true, buf[:0])
	}
	c.mu.Unlock()
	if m == bypassRead {
		if err := c.readStore(ctx, obj, r.P, r.Off); err != nil {
			return err
		}
	} else if err := c.fill(ctx, obj.Key, r.P, r.Off, refs); err != nil {
		return err
	}
	if allVerified(refs) && m != bypassRead {
		// A concurrent reader replaced the bad blocks with checked ones.
		c.accept(r.Off, int64(len(r.P)), refs, true)
		return nil
	}
	cerr := check.Check(i, r.P)
	if cerr == nil {
		c.accept(r.Off, int64(len(r.P)), refs, true)
		return nil
	}
	c.stats.CheckFailures.Add(1)
	c.stats.CorruptRanges.Add(1)
	c.drop(refs)
	r.Err = fmt.Errorf("%w: %s [%d, %d): %w", ErrCorrupt, obj.Key, r.Off, r.Off+int64(len(r.P)), cerr)
	return nil
}

// allVerified reports whether every block of refs had its part verified.
func allVerified(refs []ref) bool {
	for i := range refs {
		if !refs[i].verified {
			return false
		}
	}
	return true
}

// modeLocked decides how a read of rs from obj reads what is not cached,
// and for a catch-up read starts (or finds) the whole-object load.
// checked says whether the reader checks what it reads.
func (c *Cache) modeLocked(ctx context.Context, obj Object, rs []Range, checked bool) mode {
	if !c.beyondReachLocked(obj) || c.coveredLocked(obj.Key, rs) {
		return throughBlocks
	}
	if !c.catchUpFitsLocked(obj) || !c.sequentialFitsLocked(obj) {
		return bypassRead
	}
	c.startCatchUpLocked(ctx, obj, false, checked)
	return catchUpRead
}

// catchUpFitsLocked reports whether obj can be read whole into the
// catch-up segment: it is enabled, obj's size is known and at most half
// the segment (so an object being read does not evict the one before it).
func (c *Cache) catchUpFitsLocked(obj Object) bool {
	return c.catchUpMax > 0 && obj.Size > 0 && obj.Size <= c.catchUpMax/2
}

// sequentialFitsLocked reports whether obj, if read front to back by one
// reader (Object.SequentialEnd), fits in the catch-up segment beside the
// other such objects there or loading that are not finished: an object
// read by sequential readers of several partitions at once must not evict
// the one another of them is in the middle of.
func (c *Cache) sequentialFitsLocked(obj Object) bool {
	if obj.SequentialEnd <= 0 {
		return true
	}
	open := obj.Size
	for key, o := range c.mu.seq {
		if key != obj.Key && !o.finished {
			open += o.size
		}
	}
	return open <= c.catchUpMax
}

// startCatchUpLocked starts one load of the whole of obj into the catch-up
// segment, for its blocks neither cached nor loading (blocks cached or
// loading in the middle are read again but not replaced), unless there are
// none. ahead marks a read-ahead. It returns whether it started one.
func (c *Cache) startCatchUpLocked(ctx context.Context, obj Object, ahead, checked bool) bool {
	n := (obj.Size + c.blockSize - 1) / c.blockSize
	missing := false
	for i := range n {
		bk := blockKey{obj.Key, i}
		if c.mu.blocks[bk] == nil && c.mu.loads[bk] == nil {
			missing = true
			break
		}
	}
	if !missing {
		return false
	}
	l := &load{key: obj.Key, first: 0, n: n, size: obj.Size, catchUp: true, whole: true, ahead: ahead,
		trusted: !checked || c.checkObject == nil}
	if obj.SequentialEnd > 0 {
		o := c.mu.seq[obj.Key]
		if o == nil {
			o = &seqObject{size: obj.Size}
			c.mu.seq[obj.Key] = o
		}
		o.loading, o.finished = true, false
	}
	if ahead {
		c.mu.aheads++
		c.stats.ReadAheads.Add(1)
	}
	c.startLoadLocked(ctx, l)
	return true
}

// beyondReachLocked reports whether obj's data, written at obj.WrittenMs
// (ms; < 0: unknown), is older than the cache's reach: the cache is full,
// and its least recently used block was last used after the data was
// written. An object read front to back (Object.SequentialEnd: a segment
// object) is beyond reach whenever the cache is full: it is not put in the
// cache when written, as WAL objects are, so only a read could have
// cached it, and its data's write time (from the WAL objects it was
// copied from) says nothing about that.
func (c *Cache) beyondReachLocked(obj Object) bool {
	if c.mu.bytes+c.blockSize <= c.maxBytes {
		return false // room to spare: caching evicts nothing
	}
	if obj.SequentialEnd > 0 {
		return true
	}
	tail := c.mu.lru.prev
	return obj.WrittenMs >= 0 && tail != &c.mu.lru && obj.WrittenMs < tail.lastUse
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

// ReadAhead hints that a reader catching up will soon read obj, the object
// after the one it is reading: if obj's data is beyond the cache's reach
// (see the package comment) and obj would be read whole into the catch-up
// segment, and some block of it is neither cached nor loading, the whole
// object is loaded now, in the background, so that the reader finds it
// there (or its read in flight) instead of waiting for the store's first
// byte. At most maxReadAheads run at once; other hints are dropped. It
// never blocks and never fails; a read-ahead's GET is counted in
// Stats.ReadAheads, CatchUpReads and StoreReads.
func (c *Cache) ReadAhead(obj Object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed || c.mu.aheads >= maxReadAheads || !c.catchUpFitsLocked(obj) || !c.sequentialFitsLocked(obj) ||
		!c.beyondReachLocked(obj) {
		return
	}
	c.startCatchUpLocked(context.Background(), obj, true, true)
}

// bypass reads rs straight from the store without caching (see
// ReadRanges): ranges in offset order, those less than a block apart
// together, with one ranged read of the bytes that bound them; a lone
// range is read straight into its buffer. Each range is then checked; one
// that fails is read alone once more.
func (c *Cache) bypass(ctx context.Context, obj Object, rs []Range, check Checker) error {
	order := make([]int, 0, len(rs))
	for i := range rs {
		if len(rs[i].P) > 0 {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(rs[a].Off, rs[b].Off) })
	for rest := order; len(rest) > 0; {
		lo := rs[rest[0]].Off
		hi := lo + int64(len(rs[rest[0]].P))
		k := 1
		for ; k < len(rest); k++ {
			r := &rs[rest[k]]
			if r.Off-hi > c.blockSize {
				break
			}
			hi = max(hi, r.Off+int64(len(r.P)))
		}
		if k == 1 {
			if err := c.readStore(ctx, obj, rs[rest[0]].P, lo); err != nil {
				return err
			}
		} else {
			buf := make([]byte, hi-lo)
			if err := c.readStore(ctx, obj, buf, lo); err != nil {
				return err
			}
			for _, i := range rest[:k] {
				copy(rs[i].P, buf[rs[i].Off-lo:])
			}
		}
		rest = rest[k:]
	}
	if check == nil {
		return nil
	}
	var corrupt error
	for _, i := range order {
		r := &rs[i]
		if check.Check(i, r.P) == nil {
			continue
		}
		c.stats.CheckFailures.Add(1)
		c.stats.Rereads.Add(1)
		if err := c.readStore(ctx, obj, r.P, r.Off); err != nil {
			return err
		}
		cerr := check.Check(i, r.P)
		if cerr == nil {
			continue
		}
		c.stats.CheckFailures.Add(1)
		c.stats.CorruptRanges.Add(1)
		r.Err = fmt.Errorf("%w: %s [%d, %d): %w", ErrCorrupt, obj.Key, r.Off, r.Off+int64(len(r.P)), cerr)
		if corrupt == nil {
			corrupt = r.Err
		}
	}
	return corrupt
}

// readStore fills p from the store at off, bypassing the blocks, and
// counts the read.
func (c *Cache) readStore(ctx context.Context, obj Object, p []byte, off int64) error {
	c.stats.StoreReads.Add(1)
	c.stats.BypassReads.Add(1)
	n, size, err := c.r.ReadRange(ctx, obj.Key, off, p)
	if err == nil {
		c.stats.StoreReadBytes.Add(int64(n))
		c.stats.BypassReadBytes.Add(int64(n))
		err = answerError(obj.Size, off, int64(len(p)), n, size)
		if err == nil && n < len(p) {
			err = fmt.Errorf("object ends at %d: %w", size, io.ErrUnexpectedEOF)
		}
	}
	if err != nil {
		return fmt.Errorf("cache: read %s [%d, %d) bypassing the cache: %w", obj.Key, off, off+int64(len(p)), err)
	}
	return nil
}

// answerError checks a store's answer to a read of want bytes at off: n
// bytes of an object of size, expected to be of expect bytes (0: unknown).
func answerError(expect, off, want int64, n int, size int64) error {
	switch {
	case expect > 0 && size != expect:
		return fmt.Errorf("the store says the object is %d bytes, its commit says %d: %w", size, expect, io.ErrUnexpectedEOF)
	case int64(n) != min(want, max(size-off, 0)):
		// The end is learnt from the size only: an answer that does not
		// match it could make a false end.
		return fmt.Errorf("the store returned %d bytes of an object of %d, breaking its read contract", n, size)
	}
	return nil
}

// fill copies [off, off+len(p)) of object key into p from refs, the blocks
// acquireLocked returned for that range, waiting for loads (and taking up
// their blocks and verification into refs), and gives up the loads it does
// not wait for. The object ending before p is full is an error wrapping
// io.ErrUnexpectedEOF.
func (c *Cache) fill(ctx context.Context, key string, p []byte, off int64, refs []ref) (err error) {
	n := 0
	for i := range refs {
		if err != nil || n == len(p) {
			// Done early (error, or the object ended): give up our
			// interest in the loads we will not wait for.
			if refs[i].ld != nil {
				c.release(refs[i].ld)
				refs[i].ld = nil
			}
			continue
		}
		if refs[i].blk == nil {
			l := refs[i].ld
			refs[i].ld = nil
			if err = c.wait(ctx, l); err != nil {
				err = fmt.Errorf("cache: read %s: %w", key, err)
				continue
			}
			refs[i].blk, refs[i].verified = l.blks[refs[i].idx-l.first], l.verified
		}
		b := refs[i].blk
		start := b.start(c.blockSize)
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

// accept records that [off, off+length) passed its check (checked) or was
// read by a reader that does not check, in the blocks of refs it came
// from: a checked part is marked verified, and blocks a checking load left
// uncached are cached.
func (c *Cache) accept(off, length int64, refs []ref, checked bool) {
	if allCached(refs) && (!checked || allVerified(refs)) {
		return // the hit path: nothing to record, no lock
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range refs {
		b := refs[i].blk
		if b == nil {
			continue
		}
		if checked {
			start := b.start(c.blockSize)
			b.verified.add(max(off, start), min(off+length, start+int64(len(b.data))))
		}
		if !b.cached && !c.mu.closed && c.mu.blocks[b.bk] == nil {
			c.insertLocked(b)
		}
	}
	c.publishSizeLocked()
}

// allCached reports whether every block of refs was a hit. (cached is
// read without the lock: a stale true only skips recording a check.)
func allCached(refs []ref) bool {
	for i := range refs {
		if refs[i].blk == nil || refs[i].ld != nil || !refs[i].fromCache() {
			return false
		}
	}
	return true
}

// fromCache: the ref was a hit when acquired (no load).
func (r *ref) fromCache() bool { return r.idx < 0 }

// drop removes from the cache the blocks of refs whose part was not
// verified: the bytes of a range failed their check, and any of those may
// be the bad one.
func (c *Cache) drop(refs []ref) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range refs {
		b := refs[i].blk
		if b == nil || refs[i].verified {
			continue
		}
		if b.cached && c.mu.blocks[b.bk] == b {
			c.removeLocked(b)
			c.stats.Dropped.Add(1)
		}
	}
	c.publishSizeLocked()
}

// releaseAll gives up the loads of refs without waiting for them.
func (c *Cache) releaseAll(refs []ref) {
	for i := range refs {
		if refs[i].ld != nil {
			c.release(refs[i].ld)
			refs[i].ld = nil
		}
	}
}

// acquireLocked appends to refs, in order, every block overlapping
// [off, off+length) of obj up to the object's end if known: cached blocks
// (marked used at nowMs) or loads, started if need be (one block each,
// into the main LRU or, for a catch-up read, the catch-up segment), with a
// waiter count taken. checked says whether the reader checks its bytes.
func (c *Cache) acquireLocked(ctx context.Context, obj Object, off, length, nowMs int64, m mode, checked bool, refs []ref) []ref {
	first, last := off/c.blockSize, (off+length-1)/c.blockSize
	for i := first; i <= last; i++ {
		bk := blockKey{obj.Key, i}
		if b := c.mu.blocks[bk]; b != nil {
			c.stats.Hits.Add(1)
			if b.catchUp {
				c.unlinkLocked(b)
				c.pushFrontLocked(&c.mu.catchUp, b)
			} else {
				b.lastUse = nowMs
				c.unlinkLocked(b)
				c.pushFrontLocked(&c.mu.lru, b)
			}
			start := b.start(c.blockSize)
			ok := b.verified.covers(max(off, start), min(off+length, start+int64(len(b.data))))
			refs = append(refs, ref{blk: b, idx: -1, verified: ok})
			if b.last {
				break // blocks beyond the object's end are not worth a GET
			}
			continue
		}
		l := c.mu.loads[bk]
		if l == nil {
			l = &load{key: obj.Key, first: i, n: 1, size: obj.Size, catchUp: m == catchUpRead, trusted: !checked}
			c.startLoadLocked(ctx, l)
		} else if !l.catchUp {
			c.stats.Coalesced.Add(1)
		}
		if !l.catchUp {
			c.stats.Misses.Add(1) // a catch-up read is neither a hit nor a miss
		}
		l.waiters++
		refs = append(refs, ref{ld: l, idx: i})
	}
	return refs
}

// startLoadLocked registers l for each of its blocks neither cached nor
// loading and starts it on a new goroutine. The load's context keeps the
// values of the reader's ctx (for tracing) but not its cancellation; see
// release.
func (c *Cache) startLoadLocked(ctx context.Context, l *load) {
	lctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	l.cancel, l.done = cancel, make(chan struct{})
	for i := l.first; i < l.first+l.n; i++ {
		bk := blockKey{l.key, i}
		if c.mu.blocks[bk] == nil && c.mu.loads[bk] == nil {
			c.mu.loads[bk] = l
		}
	}
	c.loaders.Add(1)
	go c.load(lctx, l)
}

// load reads l's blocks from the store and publishes the outcome. A read
// whose answer has the wrong size, or a whole object that fails
// Config.CheckObject, is read once more.
func (c *Cache) load(ctx context.Context, l *load) {
	defer c.loaders.Done()
	defer l.cancel(nil)
	var (
		blks     []*block
		verified bool
		err      error
	)
	for attempt := 0; attempt < 2; attempt++ {
		var retry bool
		blks, verified, retry, err = c.loadOnce(ctx, l)
		if !retry || attempt == 1 || ctx.Err() != nil {
			break
		}
		c.stats.Rereads.Add(1)
	}
	if err != nil {
		if errors.Is(context.Cause(ctx), ErrClosed) {
			err = fmt.Errorf("%w: %w", ErrClosed, err)
		}
		start := l.first * c.blockSize
		err = fmt.Errorf("load blocks %d–%d [%d, %d): %w", l.first, l.first+l.n-1, start, start+l.n*c.blockSize, err)
	}
	c.finish(l, blks, verified, err)
}

// loadOnce is one read of l's blocks. retry says whether the answer is
// worth reading again (its size differs from l's, or a whole object failed
// its check); a whole object that fails its check twice is handed to the
// waiters unverified, for their own checks.
func (c *Cache) loadOnce(ctx context.Context, l *load) (blks []*block, verified, retry bool, err error) {
	start := l.first * c.blockSize
	want := l.n * c.blockSize
	if l.whole {
		want = l.size
	}
	buf := make([]byte, want)
	c.stats.StoreReads.Add(1)
	if l.catchUp {
		c.stats.CatchUpReads.Add(1)
	}
	n, size, err := c.r.ReadRange(ctx, l.key, start, buf)
	if err != nil {
		return nil, false, false, err
	}
	c.stats.StoreReadBytes.Add(int64(n))
	if l.catchUp {
		c.stats.CatchUpReadBytes.Add(int64(n))
	}
	if err := answerError(l.size, start, want, n, size); err != nil {
		c.stats.SizeMismatches.Add(1)
		return nil, false, true, err
	}
	data := buf[:n]
	if l.whole && c.checkObject != nil {
		if cerr := c.checkObject(l.key, data); cerr != nil {
			// Read once more; after a second failure the waiters get
			// the bytes unverified, for their own checks.
			c.stats.CheckFailures.Add(1)
			return c.cut(l, data, size), false, true, nil
		}
		verified = true
	}
	if !l.whole && n < len(buf) {
		data = slices.Clone(data) // do not pin a partly unused buffer
	}
	return c.cut(l, data, size), verified, false, nil
}

// cut makes l's blocks from data, the object's bytes from block l.first,
// of an object of size bytes.
func (c *Cache) cut(l *load, data []byte, size int64) []*block {
	blks := make([]*block, l.n)
	for i := range l.n {
		s := min(i*c.blockSize, int64(len(data)))
		e := min(s+c.blockSize, int64(len(data)))
		bk := blockKey{l.key, l.first + i}
		blks[i] = &block{bk: bk, data: data[s:e:e], last: bk.index*c.blockSize+(e-s) >= size, catchUp: l.catchUp}
	}
	return blks
}

// finish publishes a load's outcome to its waiters and, for a trusted load
// or a whole object that passed its check, caches the blocks.
func (c *Cache) finish(l *load, blks []*block, verified bool, err error) {
	now := c.now().UnixMilli()
	c.mu.Lock()
	for i := l.first; i < l.first+l.n; i++ {
		if bk := (blockKey{l.key, i}); c.mu.loads[bk] == l {
			delete(c.mu.loads, bk)
		}
	}
	l.finished = true
	if l.ahead {
		c.mu.aheads--
	}
	if err == nil {
		for i, b := range blks {
			b.lastUse = now
			if verified {
				start := b.start(c.blockSize)
				b.verified.add(start, start+int64(len(b.data)))
			}
			if (l.trusted || verified) && !c.mu.closed {
				blks[i] = c.insertLocked(b)
			}
		}
		c.publishSizeLocked()
	}
	if o := c.mu.seq[l.key]; o != nil && l.catchUp && l.whole {
		o.loading = false
		if o.blocks == 0 {
			delete(c.mu.seq, l.key)
		}
	}
	l.blks, l.verified, l.err = blks, verified, err
	c.mu.Unlock()
	close(l.done)
}

// wait waits for l's outcome or for ctx to be done, and gives up the
// caller's waiter count.
func (c *Cache) wait(ctx context.Context, l *load) error {
	select {
	case <-l.done:
		return l.err
	case <-ctx.Done():
		c.release(l)
		return ctx.Err()
	}
}

// release gives up one waiter count of l without waiting. When no reader
// waits any more and the load is still running, nobody wants the blocks:
// the load is cancelled and forgotten, so the next reader starts afresh
// rather than joining a cancelled load. A read-ahead is not cancelled.
func (c *Cache) release(l *load) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l.waiters--
	if l.waiters > 0 || l.finished || l.ahead {
		return
	}
	for i := l.first; i < l.first+l.n; i++ {
		if bk := (blockKey{l.key, i}); c.mu.loads[bk] == l {
			delete(c.mu.loads, bk)
		}
	}
	l.cancel(errAbandoned)
}

// Put caches object key, just uploaded by this sidecar, so that its first
// readers need no GET (DESIGN §Fetch step 3). data must be the whole
// object, and Put takes ownership of it: objects are immutable (SPEC §7),
// so the cached blocks are sub-slices of data, not copies, and the caller
// must never modify data afterwards. (Copying would be a second full copy
// of every produced byte on the produce path.) Its blocks are verified
// (they never came from the store: produce checked every batch). The
// blocks are accounted and evicted one by one; the backing array is freed
// when the last of them is evicted. Blocks already cached are kept. Put
// after Close does nothing.
func (c *Cache) Put(key string, data []byte) {
	if len(data) == 0 {
		return
	}
	now := c.now().UnixMilli()
	blocks := make([]*block, 0, (int64(len(data))+c.blockSize-1)/c.blockSize)
	for i := int64(0); i*c.blockSize < int64(len(data)); i++ {
		start := i * c.blockSize
		end := min(start+c.blockSize, int64(len(data)))
		b := &block{bk: blockKey{key, i}, data: data[start:end:end], last: end == int64(len(data)), lastUse: now}
		b.verified.add(start, end)
		blocks = append(blocks, b)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return
	}
	for _, b := range blocks {
		c.insertLocked(b)
	}
	c.publishSizeLocked()
}

// insertLocked caches b as the most recently used block of its segment,
// evicting least recently used ones of that segment to stay within its
// bound, and returns the block now cached under b's key (b, or one cached
// before). An empty b (the object ends before the block) is not cached:
// the object's last block, which says so, is.
func (c *Cache) insertLocked(b *block) *block {
	if len(b.data) == 0 {
		return b
	}
	if old := c.mu.blocks[b.bk]; old != nil {
		return old
	}
	c.mu.blocks[b.bk] = b
	b.cached = true
	if b.catchUp {
		c.pushFrontLocked(&c.mu.catchUp, b)
		c.mu.cuBytes += int64(len(b.data))
		if o := c.mu.seq[b.bk.key]; o != nil {
			o.blocks++
		}
		for c.mu.cuBytes > c.catchUpMax {
			victim := c.catchUpVictimLocked(b.bk.key)
			if victim == "" {
				break // Validate and catchUpFitsLocked keep an object within the segment
			}
			for v := c.mu.catchUp.next; v != &c.mu.catchUp; {
				next := v.next
				if v.bk.key == victim {
					c.removeLocked(v)
					c.stats.CatchUpEvictions.Add(1)
				}
				v = next
			}
		}
		return b
	}
	c.pushFrontLocked(&c.mu.lru, b)
	c.mu.bytes += int64(len(b.data))
	for c.mu.bytes > c.maxBytes {
		victim := c.mu.lru.prev
		if victim == b {
			panic("cache: a single block exceeds the cache size") // Validate ensures MaxBytes ≥ BlockBytes
		}
		c.removeLocked(victim)
		c.stats.Evictions.Add(1)
	}
	return b
}

// catchUpVictimLocked returns the object the catch-up segment evicts
// next, other than keep, whose blocks then all go (an object partly gone
// would be read whole again): the least recently used — the one whose
// most recently used block is the furthest back — of the objects their
// sequential reader finished (Object.SequentialEnd), else of the other
// objects, else of those a sequential reader is still in. Objects, not
// blocks: the next object a reader will need may be loaded (read ahead)
// while it reads the current one, so the blocks of the current one it has
// not reached yet are older than the last reads of the object it
// finished, and a block LRU would evict them and read the object again
// (TestCatchUpEvictsObjects: objects of half the segment, each read once).
// "" when there is none.
func (c *Cache) catchUpVictimLocked(keep string) string {
	seen := make(map[string]struct{}, 8)
	// The least recently used of each kind, in the order they go: objects
	// their sequential reader finished, other objects (read by any number
	// of readers, in any order), objects a sequential reader is in.
	var finished, other, open string
	for v := c.mu.catchUp.next; v != &c.mu.catchUp; v = v.next {
		if _, ok := seen[v.bk.key]; ok || v.bk.key == keep {
			continue
		}
		seen[v.bk.key] = struct{}{}
		switch o := c.mu.seq[v.bk.key]; {
		case o == nil:
			other = v.bk.key
		case o.finished:
			finished = v.bk.key
		default:
			open = v.bk.key
		}
	}
	return cmp.Or(finished, other, open)
}

// publishSizeLocked sets the size gauges, once after a change: observers
// never see a bound exceeded.
func (c *Cache) publishSizeLocked() {
	c.stats.BytesCached.Store(c.mu.bytes)
	c.stats.CatchUpBytesCached.Store(c.mu.cuBytes)
}

// Drop removes the cached blocks of the object keys (a disabled topic's,
// SPEC §10) and returns how many it removed. Readers copying from a block
// already found keep their copy (blocks are immutable); a load in flight
// still caches its block. Cost: one pass over the cached blocks.
func (c *Cache) Drop(keys []string) int {
	if len(keys) == 0 {
		return 0
	}
	drop := make(map[string]bool, len(keys))
	for _, k := range keys {
		drop[k] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for bk, b := range c.mu.blocks {
		if drop[bk.key] {
			c.removeLocked(b)
			n++
		}
	}
	c.publishSizeLocked()
	return n
}

func (c *Cache) removeLocked(b *block) {
	c.unlinkLocked(b)
	delete(c.mu.blocks, b.bk)
	b.cached = false
	if b.catchUp {
		c.mu.cuBytes -= int64(len(b.data))
		if o := c.mu.seq[b.bk.key]; o != nil {
			if o.blocks--; o.blocks <= 0 && !o.loading {
				delete(c.mu.seq, b.bk.key)
			}
		}
	} else {
		c.mu.bytes -= int64(len(b.data))
	}
}

func (c *Cache) pushFrontLocked(head, b *block) {
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
// ErrClosed; later reads fail with ErrClosed; later Puts and ReadAheads do
// nothing. Close is idempotent and always returns nil.
func (c *Cache) Close() error {
	c.mu.Lock()
	if !c.mu.closed {
		c.mu.closed = true
		for _, l := range c.mu.loads {
			l.cancel(ErrClosed)
		}
		for _, head := range []*block{&c.mu.lru, &c.mu.catchUp} {
			for b := head.next; b != head; {
				next := b.next
				c.removeLocked(b)
				b = next
			}
		}
		c.publishSizeLocked()
	}
	c.mu.Unlock()
	c.loaders.Wait()
	return nil
}

// intervals is a sorted set of disjoint, non-adjacent byte ranges [lo, hi).
type intervals []interval

type interval struct{ lo, hi int64 }

// covers reports whether [lo, hi) lies inside one interval (an empty range
// always does).
func (s intervals) covers(lo, hi int64) bool {
	if lo >= hi {
		return true
	}
	i, _ := slices.BinarySearchFunc(s, lo, func(v interval, lo int64) int { return cmp.Compare(v.hi, lo+1) })
	return i < len(s) && s[i].lo <= lo && hi <= s[i].hi
}

// add adds [lo, hi) to the set, merging what it touches.
func (s *intervals) add(lo, hi int64) {
	if lo >= hi {
		return
	}
	v := *s
	// first interval that ends at or after lo, first that starts after hi
	i, _ := slices.BinarySearchFunc(v, lo, func(x interval, lo int64) int { return cmp.Compare(x.hi, lo) })
	j := i
	for j < len(v) && v[j].lo <= hi {
		lo, hi = min(lo, v[j].lo), max(hi, v[j].hi)
		j++
	}
	*s = slices.Replace(v, i, j, interval{lo, hi})
}
