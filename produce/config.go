package produce

import (
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/wal"
)

// Config tunes the produce path. Every field has a default that works on one
// machine (SPEC §11); zero values are replaced by defaults in New.
type Config struct {
	// BufferMaxBytes seals the active file once it holds this many bytes of
	// record batches (diskless.append.buffer.max.bytes, default 8 MiB). A
	// request that crosses it is kept whole in the file it started.
	BufferMaxBytes int
	// CommitInterval seals the active file this long after its first batch
	// arrived (diskless.append.commit.interval.ms, default 250 ms).
	CommitInterval time.Duration
	// MaxPendingBytes bounds the record-batch bytes held by the produce path
	// at once: buffered in the active file, packing, uploading or committing
	// (diskless.append.max.pending.bytes, default 256 MiB). Past it, Produce
	// requests wait, up to their timeout, instead of growing the heap.
	MaxPendingBytes int64
	// MaxBatchesPerFile seals the active file before it would hold more
	// batches than this, so that a file's commit stays well within what a
	// coordinator shard accepts in one record (default 100000, below
	// diskless.MaxCommitBatches). A request with more batches than this
	// is refused with INVALID_REQUEST.
	MaxBatchesPerFile int
	// UploadConcurrency is the number of sealed files uploaded at once
	// (diskless.upload.max.inflight.files, default 4). Files are still
	// committed in the order they were sealed.
	UploadConcurrency int
	// MeterProvider receives the pipeline's metrics (file stage times,
	// sizes, seal reasons, pending bytes); nil means no metrics.
	MeterProvider metric.MeterProvider
	// Logger receives pipeline events; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock used for the timestamp window checks; nil means
	// time.Now.
	Now func() time.Time
}

// Defaults (SPEC §11, §13: 250 ms or 8 MiB per file, as WarpStream and
// Inkless).
const (
	DefaultBufferMaxBytes    = 8 << 20
	DefaultCommitInterval    = 250 * time.Millisecond
	DefaultMaxPendingBytes   = 256 << 20
	DefaultUploadConcurrency = 4
	DefaultMaxBatchesPerFile = 100_000
)

func (c *Config) setDefaults() {
	if c.BufferMaxBytes == 0 {
		c.BufferMaxBytes = DefaultBufferMaxBytes
	}
	if c.CommitInterval == 0 {
		c.CommitInterval = DefaultCommitInterval
	}
	if c.MaxPendingBytes == 0 {
		c.MaxPendingBytes = DefaultMaxPendingBytes
	}
	if c.MaxBatchesPerFile == 0 {
		c.MaxBatchesPerFile = DefaultMaxBatchesPerFile
	}
	if c.UploadConcurrency == 0 {
		c.UploadConcurrency = DefaultUploadConcurrency
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports the first invalid field, naming its config key. Zero
// fields count as their defaults.
func (c Config) Validate() error {
	c.setDefaults()
	switch {
	case c.BufferMaxBytes < 1 || c.BufferMaxBytes > wal.MaxObjectBytes/2:
		return fmt.Errorf("diskless.append.buffer.max.bytes must be in [1, %d], got %d", wal.MaxObjectBytes/2, c.BufferMaxBytes)
	case c.CommitInterval < time.Millisecond:
		return fmt.Errorf("diskless.append.commit.interval.ms must be ≥ 1, got %v", c.CommitInterval)
	case c.MaxPendingBytes < int64(c.BufferMaxBytes):
		return fmt.Errorf("diskless.append.max.pending.bytes (%d) must be ≥ diskless.append.buffer.max.bytes (%d)", c.MaxPendingBytes, c.BufferMaxBytes)
	case c.MaxBatchesPerFile < 1 || c.MaxBatchesPerFile > diskless.MaxCommitBatches:
		return fmt.Errorf("produce: MaxBatchesPerFile must be in [1, %d], got %d", diskless.MaxCommitBatches, c.MaxBatchesPerFile)
	case c.UploadConcurrency < 1:
		return fmt.Errorf("diskless.upload.max.inflight.files must be ≥ 1, got %d", c.UploadConcurrency)
	}
	return nil
}
