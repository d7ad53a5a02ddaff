package produce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/wal"
)

// Config tunes the produce path. A zero field takes its default (the
// Default constants below); Validate reports invalid fields naming their
// configuration keys.
type Config struct {
	// BufferMaxBytes seals the active file once it holds this many bytes of
	// record batches, in [1, wal.MaxObjectBytes/2]. A request that crosses
	// it is kept whole in the file it started. Key
	// diskless.append.buffer.max.bytes; default DefaultBufferMaxBytes.
	BufferMaxBytes int
	// CommitInterval seals the active file this long after its first batch
	// arrived, ≥ 1 ms. Key diskless.append.commit.interval.ms; default
	// DefaultCommitInterval.
	CommitInterval time.Duration
	// MaxPendingBytes bounds the record-batch bytes held by the produce path
	// at once: buffered in the active file, packing, uploading or
	// committing; ≥ BufferMaxBytes. Past it, Produce requests wait, up to
	// their timeout, instead of growing the heap. Key
	// diskless.append.max.pending.bytes; default DefaultMaxPendingBytes.
	MaxPendingBytes int64
	// MaxBatchesPerFile seals the active file before it would hold more
	// batches than this, in [1, diskless.MaxCommitBatches], so that a
	// file's commit stays well within what a coordinator shard accepts in
	// one record. A request with more batches than this is refused with
	// INVALID_REQUEST. No key; default DefaultMaxBatchesPerFile.
	MaxBatchesPerFile int
	// UploadConcurrency is the number of sealed files uploaded at once,
	// ≥ 1. A producer's batches of one partition still commit in seal
	// order (DESIGN §Produce step 6). Key
	// diskless.upload.max.inflight.files; default DefaultUploadConcurrency.
	UploadConcurrency int
	// MeterProvider receives the pipeline's metrics (file stage times,
	// sizes, seal reasons, pending bytes); nil means no metrics.
	MeterProvider metric.MeterProvider
	// TracerProvider receives the produce path's spans (DESIGN
	// §Observability, Traces): produce.validate, produce.wait_memory and
	// produce.buffer, children of the span in the request's context, and
	// per file produce.file.upload and produce.file.commit, linked to the
	// sampled requests whose batches the file carries. nil, or the noop
	// provider, means no spans and no cost.
	TracerProvider trace.TracerProvider
	// Logger receives pipeline events; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock used for the timestamp window checks; nil means
	// time.Now.
	Now func() time.Time
	// Transactions checks transactional batches against their producer's
	// open transaction (SPEC §15); nil refuses them (SPEC §2), and a
	// Produce request naming a transactional id, as before transactions.
	Transactions Transactions
}

// Transactions is what the produce path asks the transaction coordinator
// (DESIGN §Transactions): whether producer (id, epoch), holding
// transactional id txnID, may write a transactional batch to each of
// partitions tps now — once per produce request for all its
// transactional partitions (a request carries one transactional id). It
// returns the open transaction's token (txn.StateRecord.Seq, which each
// allowed batch's commit carries: CommitBatch.TxnSeq) and errs: nil when
// every partition is allowed, else one per tps, nil where allowed, or the
// partition's error: INVALID_PRODUCER_ID_MAPPING (the id is not the
// producer's) and INVALID_PRODUCER_EPOCH (fenced) for every partition,
// INVALID_TXN_STATE for a partition not in the open transaction (which
// the handler answers TRANSACTION_ABORTABLE from Produce v11:
// txnStateError), NOT_LEADER_OR_FOLLOWER for every
// partition (the coordinator cannot answer). The id's shard may be on
// another sidecar (one RPC, bounded by ctx). Safe for concurrent use.
type Transactions interface {
	CheckTxnProduce(ctx context.Context, txnID string, producerID int64, epoch int16, tps []diskless.TopicPartition) (seq int64, errs []*kerr.Error)
}

// Defaults of Config's zero fields (SPEC §11, §13: 250 ms or 8 MiB per
// file, as WarpStream and Inkless).
const (
	DefaultBufferMaxBytes    = 8 << 20
	DefaultCommitInterval    = 250 * time.Millisecond
	DefaultMaxPendingBytes   = 256 << 20
	DefaultUploadConcurrency = 4
	// DefaultMaxBatchesPerFile is below diskless.MaxCommitBatches.
	DefaultMaxBatchesPerFile = 100_000
)

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
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
	return c
}

// Validate reports every invalid field of c (zero fields count as their
// defaults), each error naming the configuration key (the field, for
// those without one).
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.BufferMaxBytes < 1 || c.BufferMaxBytes > wal.MaxObjectBytes/2 {
		errs = append(errs, fmt.Errorf("diskless.append.buffer.max.bytes %d: must be in [1, %d]", c.BufferMaxBytes, wal.MaxObjectBytes/2))
	}
	if c.CommitInterval < time.Millisecond {
		errs = append(errs, fmt.Errorf("diskless.append.commit.interval.ms %v: must be at least 1 ms", c.CommitInterval))
	}
	if c.MaxPendingBytes < int64(c.BufferMaxBytes) {
		errs = append(errs, fmt.Errorf("diskless.append.max.pending.bytes %d: must be at least diskless.append.buffer.max.bytes (%d)", c.MaxPendingBytes, c.BufferMaxBytes))
	}
	if c.MaxBatchesPerFile < 1 || c.MaxBatchesPerFile > diskless.MaxCommitBatches {
		errs = append(errs, fmt.Errorf("produce: MaxBatchesPerFile %d: must be in [1, %d]", c.MaxBatchesPerFile, diskless.MaxCommitBatches))
	}
	if c.UploadConcurrency < 1 {
		errs = append(errs, fmt.Errorf("diskless.upload.max.inflight.files %d: must be at least 1", c.UploadConcurrency))
	}
	return errors.Join(errs...)
}
