package cache

import "sync/atomic"

// Stats counts a Cache's work since New. The fields are updated atomically
// and may be read at any time; internal/telemetry exports them as
// OpenTelemetry metrics (DESIGN §Observability). Hits and misses count
// blocks: a read spanning three blocks makes three lookups.
type Stats struct {
	// Hits counts block lookups served from the cache (either segment).
	Hits atomic.Int64
	// Misses counts block lookups that found no cached block and read
	// through the blocks; each either started a load or joined one in
	// flight. Lookups served by a catch-up read are not counted.
	Misses atomic.Int64
	// Coalesced counts misses that joined a load already in flight.
	Coalesced atomic.Int64
	// Evictions counts blocks evicted to stay within Config.MaxBytes.
	Evictions atomic.Int64
	// BytesCached is the bytes of block data currently cached in the main
	// LRU (a gauge), bounded by Config.MaxBytes.
	BytesCached atomic.Int64
	// StoreReads counts ranged reads issued to the RangeReader (object
	// GETs): block loads, catch-up reads and bypassed reads, re-reads
	// included.
	StoreReads atomic.Int64
	// StoreReadBytes counts the bytes those reads returned.
	StoreReadBytes atomic.Int64
	// BypassReads counts the StoreReads that served data older than the
	// cache's reach without caching it (Cache.ReadRanges). They are neither
	// hits nor misses.
	BypassReads atomic.Int64
	// BypassReadBytes counts the bytes those reads returned (also in
	// StoreReadBytes).
	BypassReadBytes atomic.Int64
	// CatchUpReads counts the StoreReads that read a whole object into the
	// catch-up segment for data older than the cache's reach, read-aheads
	// included.
	CatchUpReads atomic.Int64
	// CatchUpReadBytes counts the bytes those reads returned (also in
	// StoreReadBytes).
	CatchUpReadBytes atomic.Int64
	// ReadAheads counts the catch-up reads started by Cache.ReadAhead.
	ReadAheads atomic.Int64
	// CatchUpEvictions counts blocks evicted from the catch-up segment to
	// stay within Config.CatchUpMaxBytes.
	CatchUpEvictions atomic.Int64
	// CatchUpBytesCached is the bytes of block data currently in the
	// catch-up segment (a gauge).
	CatchUpBytesCached atomic.Int64
	// CheckFailures counts checks that failed: a range's (Checker) or a
	// whole object's (Config.CheckObject).
	CheckFailures atomic.Int64
	// Rereads counts reads from the store made again because the first
	// answer failed its check or had the wrong size.
	Rereads atomic.Int64
	// CorruptRanges counts ranges that failed their check on both reads
	// (answered with Range.Err, ErrCorrupt).
	CorruptRanges atomic.Int64
	// SizeMismatches counts store answers whose object size differed from
	// the one the reader gave (Object.Size).
	SizeMismatches atomic.Int64
	// Dropped counts cached blocks removed because a range over them
	// failed its check.
	Dropped atomic.Int64
}
