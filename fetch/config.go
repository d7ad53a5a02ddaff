package fetch

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
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
)

// Config configures a [Handler]. Zero values take the defaults above.
type Config struct {
	// LeaderEpoch is the partition leader epoch Metadata reports for every
	// partition (SPEC §4). Fetched batches are stamped with it, ListOffsets
	// reports it, and a request's CurrentLeaderEpoch is checked against
	// it. Must be ≥ 0; default 0.
	LeaderEpoch int32

	// MaxWait caps the max_wait_ms a Fetch may wait for min_bytes. Must be
	// ≥ 0; 0 means DefaultMaxWait.
	MaxWait time.Duration

	// MaxBytes caps a Fetch's max_bytes, in bytes (Kafka's broker setting
	// fetch.max.bytes). The first batch of a response is returned even if
	// larger (KIP-74). Must be ≥ 0; 0 means DefaultMaxBytes.
	MaxBytes int32

	// ReadConcurrency bounds the concurrent ObjectReader.ReadAt calls of
	// one Fetch. Must be ≥ 0; 0 means DefaultReadConcurrency; 1 reads
	// sequentially on the caller's goroutine.
	ReadConcurrency int

	// Logger receives warnings about failed reads and corrupt batches.
	// nil means slog.Default().
	Logger *slog.Logger
}

// Validate reports the first invalid field, naming it.
func (c *Config) Validate() error {
	switch {
	case c.LeaderEpoch < 0:
		return fmt.Errorf("fetch: LeaderEpoch %d: must be ≥ 0", c.LeaderEpoch)
	case c.MaxWait < 0:
		return fmt.Errorf("fetch: MaxWait %v: must be ≥ 0", c.MaxWait)
	case c.MaxBytes < 0:
		return fmt.Errorf("fetch: MaxBytes %d: must be ≥ 0", c.MaxBytes)
	case c.ReadConcurrency < 0:
		return fmt.Errorf("fetch: ReadConcurrency %d: must be ≥ 0", c.ReadConcurrency)
	}
	return nil
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
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// errNilDependency is returned by New when a dependency is missing.
var errNilDependency = errors.New("fetch: nil Coordinator or ObjectReader")
