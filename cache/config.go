package cache

import (
	"errors"
	"fmt"
	"time"
)

// Defaults for Config's zero fields, and limits.
const (
	// DefaultBlockBytes is 4 MiB. A miss costs one GET of a whole block, so
	// the block size trades GETs per MiB served against over-read and miss
	// latency. WAL objects are at most 8 MiB at the default
	// diskless.append.buffer.max.bytes (SPEC §11), and every partition in an
	// object is read by its own consumers, so blocks of 4 MiB load a full
	// object in two GETs; a miss takes ~20 ms to first byte plus ~45 ms at
	// ~93 MB/s per connection (SPEC §13), against ~190 ms for Inkless's
	// 16 MiB blocks; and the default cache holds 64 blocks, fine-grained
	// enough for LRU to keep the hot tail.
	DefaultBlockBytes = 4 << 20
	// DefaultMaxBytes is 256 MiB: about 8 s of one sidecar's peak ingest at
	// the default sealing (8 MiB per 250 ms, SPEC §11), enough for consumers
	// that keep up with the tail, and small enough for a default that works
	// on any machine. Lagging consumers need more; size it to the memory
	// you can give.
	DefaultMaxBytes = 256 << 20
	// DefaultCatchUpMaxBytes is 256 MiB: two segment objects of the
	// default 128 MiB (coordinator.DefaultSegmentBytes), each read whole
	// with one GET by a consumer lagging over consolidated data — one
	// being read, one read ahead: 8 GETs per GiB fetched —, or 32 WAL
	// objects of the default 8 MiB buffer. A consumer catching up on many
	// partitions of WAL objects reads them at positions a few objects
	// apart (each fetch moves each partition by about its share of one
	// object), and each object is read whole once; the segment must hold
	// the objects from the rearmost partition's to the foremost's, and the
	// one read ahead. It holds nothing while no consumer lags.
	DefaultCatchUpMaxBytes = 256 << 20
	// MaxBlockBytes bounds BlockBytes: a block is one allocation and one
	// GET; larger blocks only add latency.
	MaxBlockBytes = 1 << 30
)

// Config configures a Cache. A zero field takes its default; New validates
// the result.
type Config struct {
	// BlockBytes is the block size in bytes, in [1, MaxBlockBytes]. Block i
	// of an object covers bytes [i·BlockBytes, (i+1)·BlockBytes); a miss
	// reads one whole block with one ranged read. Key
	// diskless.cache.block.bytes; default DefaultBlockBytes.
	BlockBytes int64
	// MaxBytes bounds the bytes of cached block data, ≥ BlockBytes. Key
	// diskless.cache.max.bytes; default DefaultMaxBytes.
	MaxBytes int64
	// CatchUpMaxBytes bounds the bytes of the catch-up segment: whole
	// objects read for data older than the cache's reach, in an LRU of
	// their own beside MaxBytes (see the package comment). An object over
	// half of it is read by exact bypassed reads instead. -1 disables the
	// segment (every read beyond reach bypasses); otherwise ≥ BlockBytes.
	// Key diskless.cache.catchup.max.bytes; default
	// DefaultCatchUpMaxBytes, or two blocks if that is more.
	CatchUpMaxBytes int64
	// CheckObject checks a whole object read with one GET (a catch-up
	// read) before its blocks are cached: nil if every batch is well
	// framed and passes its CRC-32C (wal.Check). A failing object is read
	// once more, then handed to its readers unverified, for their
	// range checks, and not cached. nil caches whole objects unverified,
	// so that readers check them on hits until verified.
	CheckObject func(key string, object []byte) error
	// Now is the clock of block use times, which ReadRanges compares with
	// the commit times of the data it reads to tell reads older than the
	// cache's reach (see the package comment). nil selects time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.BlockBytes == 0 {
		c.BlockBytes = DefaultBlockBytes
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = max(DefaultMaxBytes, c.BlockBytes)
	}
	if c.CatchUpMaxBytes == 0 {
		c.CatchUpMaxBytes = max(DefaultCatchUpMaxBytes, 2*c.BlockBytes)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports every invalid field of c (zero fields count as their
// defaults), each error naming the configuration key.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.BlockBytes < 1 || c.BlockBytes > MaxBlockBytes {
		errs = append(errs, fmt.Errorf("diskless.cache.block.bytes %d: must be in [1, %d]", c.BlockBytes, MaxBlockBytes))
	}
	if c.MaxBytes < c.BlockBytes {
		errs = append(errs, fmt.Errorf("diskless.cache.max.bytes %d: must be at least diskless.cache.block.bytes (%d)", c.MaxBytes, c.BlockBytes))
	}
	if c.CatchUpMaxBytes != -1 && c.CatchUpMaxBytes < c.BlockBytes {
		errs = append(errs, fmt.Errorf("diskless.cache.catchup.max.bytes %d: must be -1 (disabled) or at least diskless.cache.block.bytes (%d)", c.CatchUpMaxBytes, c.BlockBytes))
	}
	return errors.Join(errs...)
}
