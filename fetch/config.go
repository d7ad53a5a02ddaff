package fetch

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Defaults for the zero values of [Config].
const (
	// DefaultMaxWait caps a Fetch's max_wait_ms. Clients ask for 500 ms
	// (Java, librdkafka) to 5 s (franz-go); 30 s stays within the request
	// timeouts they pair those with.
	DefaultMaxWait = 30 * time.Second
	// DefaultMaxBytes caps a Fetch's max_bytes: Kafka's broker default for
	// fetch.max.bytes (55 MiB), which bounds the memory one request pins.
	DefaultMaxBytes = 55 << 20
	// DefaultReadConcurrency is how many object reads one Fetch runs at a
	// time. Reads are served by the block cache; on a miss, each is an
	// object-store GET of ~20 ms to first byte (SPEC §13), so a few in
	// flight hide that latency without flooding the store.
	DefaultReadConcurrency = 8
	// DefaultMaxScanTime bounds the time one ListOffsets timestamp lookup
	// may spend decompressing and scanning records. Memory does not grow
	// with a batch's decompressed size (lookups stream, see
	// DecompressConcurrency), so only time does: a batch of
	// max.message.bytes (SPEC §11) whose records compress 5,000× (600
	// records of 500 KiB in 54 KB of zstd) decompresses to 300 MB, scanned
	// in ~0.2 s (TestListOffsetsCompressibleBatch logs it); 5 s leaves a
	// wide margin on a loaded core and bounds what a decompression bomb
	// costs.
	DefaultMaxScanTime = 5 * time.Second
	// DefaultDecompressConcurrency is how many timestamp lookups may
	// decompress at once. A decompressing lookup holds at most ~9 MiB (an
	// 8 MiB zstd window and a block) besides the compressed batch, so 4
	// bound that to ~40 MiB and keep at most 4 cores busy. Timestamp
	// lookups are rare (offsetsForTimes, group resets by time), so waiting
	// for a slot rarely happens.
	DefaultDecompressConcurrency = 4
	// DefaultSegmentIndexCacheBytes bounds the decoded segment indexes
	// kept (segments.go): 32 MiB, the indexes of some 240 GiB of
	// consolidated CreateTime data (48 bytes per 64 KiB entry).
	DefaultSegmentIndexCacheBytes = 32 << 20
)

// Config configures a [Handler]. A zero field takes its default (the
// Default constants above); Validate reports invalid fields naming their
// configuration keys.
type Config struct {
	// LeaderEpoch is the partition leader epoch Metadata reports for every
	// partition (SPEC §4). Fetched batches are stamped with it, ListOffsets
	// reports it, and a request's CurrentLeaderEpoch is checked against
	// it. Must be ≥ 0; default 0.
	LeaderEpoch int32

	// MaxWait caps the max_wait_ms a Fetch may wait for min_bytes. Must be
	// ≥ 0; 0 means DefaultMaxWait. Key diskless.fetch.max.wait.ms.
	MaxWait time.Duration

	// MaxBytes caps a Fetch's max_bytes, in bytes (Kafka's broker setting
	// fetch.max.bytes). The first batch of a response is returned even if
	// larger (KIP-74). Must be ≥ 0; 0 means DefaultMaxBytes. Key
	// fetch.max.bytes.
	MaxBytes int32

	// ReadConcurrency bounds the concurrent ObjectReader.ReadRanges calls
	// (one per object) of one Fetch. Must be ≥ 0; 0 means DefaultReadConcurrency; 1 reads
	// sequentially on the caller's goroutine.
	ReadConcurrency int

	// MaxScanTime bounds the time a ListOffsets timestamp lookup (SPEC §5)
	// may spend decompressing and scanning records, over all the
	// compressed batches it decodes (usually one; at most a few when the
	// log start offset is inside the candidate), waiting for a slot
	// excluded. Records are scanned as a stream and the scan stops at the
	// answer, so memory does not depend on a batch's decompressed size;
	// only a lookup still scanning when this runs out fails: that
	// partition gets REQUEST_TIMED_OUT and a warning is logged. Must be
	// ≥ 0; 0 means DefaultMaxScanTime.
	MaxScanTime time.Duration

	// DecompressConcurrency bounds how many timestamp lookups of this
	// Handler decompress at once; others wait for a slot (or their
	// context: KAFKA_STORAGE_ERROR). Uncompressed batches and
	// LogAppendTime topics need no slot. Must be ≥ 0; 0 means
	// DefaultDecompressConcurrency.
	DecompressConcurrency int

	// SegmentIndexCacheBytes bounds the decoded indexes of segment objects
	// a Handler keeps, in bytes (least recently used out). Must be ≥ 0; 0
	// means DefaultSegmentIndexCacheBytes.
	SegmentIndexCacheBytes int64

	// Logger receives warnings about failed reads and corrupt batches.
	// nil means slog.Default().
	Logger *slog.Logger

	// TracerProvider receives a Fetch's spans (fetch.find, fetch.long_poll,
	// fetch.read: DESIGN §Observability, Traces), children of the span in
	// the request's context. nil, or the noop provider, means no spans and
	// no cost.
	TracerProvider trace.TracerProvider
}

// Validate reports every invalid field of c, each error naming the
// configuration key (the field, for those without one). Zero fields are
// valid: they take their defaults.
func (c Config) Validate() error {
	var errs []error
	if c.LeaderEpoch < 0 {
		errs = append(errs, fmt.Errorf("fetch: LeaderEpoch %d: must be ≥ 0", c.LeaderEpoch))
	}
	if c.MaxWait < 0 {
		errs = append(errs, fmt.Errorf("diskless.fetch.max.wait.ms %v: must be ≥ 0", c.MaxWait))
	}
	if c.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("fetch.max.bytes %d: must be ≥ 0", c.MaxBytes))
	}
	if c.ReadConcurrency < 0 {
		errs = append(errs, fmt.Errorf("fetch: ReadConcurrency %d: must be ≥ 0", c.ReadConcurrency))
	}
	if c.MaxScanTime < 0 {
		errs = append(errs, fmt.Errorf("fetch: MaxScanTime %v: must be ≥ 0", c.MaxScanTime))
	}
	if c.DecompressConcurrency < 0 {
		errs = append(errs, fmt.Errorf("fetch: DecompressConcurrency %d: must be ≥ 0", c.DecompressConcurrency))
	}
	if c.SegmentIndexCacheBytes < 0 {
		errs = append(errs, fmt.Errorf("fetch: SegmentIndexCacheBytes %d: must be ≥ 0", c.SegmentIndexCacheBytes))
	}
	return errors.Join(errs...)
}

// withDefaults returns c with every zero field replaced by its default.
func (c Config) withDefaults() Config {
	if c.MaxWait == 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.ReadConcurrency == 0 {
		c.ReadConcurrency = DefaultReadConcurrency
	}
	if c.MaxScanTime == 0 {
		c.MaxScanTime = DefaultMaxScanTime
	}
	if c.DecompressConcurrency == 0 {
		c.DecompressConcurrency = DefaultDecompressConcurrency
	}
	if c.SegmentIndexCacheBytes == 0 {
		c.SegmentIndexCacheBytes = DefaultSegmentIndexCacheBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// errNilDependency is returned by New when a dependency is missing.
var errNilDependency = errors.New("fetch: nil Coordinator or ObjectReader")
