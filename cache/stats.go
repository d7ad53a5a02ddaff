package cache

import "sync/atomic"

// Stats counts a Cache's work since New. The fields are updated atomically
// and may be read at any time; internal/telemetry exports them as
// OpenTelemetry metrics (DESIGN §Observability). Hits and misses count
// blocks: a read spanning three blocks makes three lookups.
type Stats struct {
	// Hits counts block lookups served from the cache.
	Hits atomic.Int64
	// Misses counts block lookups that found no cached block; each either
	// started a load or joined one in flight.
	Misses atomic.Int64
	// Coalesced counts misses that joined a load already in flight.
	Coalesced atomic.Int64
	// Evictions counts blocks evicted to stay within Config.MaxBytes.
	Evictions atomic.Int64
	// BytesCached is the bytes of block data currently cached (a gauge).
	BytesCached atomic.Int64
	// StoreReads counts ranged reads issued to the RangeReader (object
	// GETs): block loads and bypassed reads.
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
}
