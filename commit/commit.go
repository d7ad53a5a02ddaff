// Package commit commits an uploaded WAL object to the coordinator shards
// that own its partitions (DESIGN §Produce step 6, SPEC §9
// DisklessCommitFile) and maps their answers back to the object's batches.
//
// An object whose batches belong to several shards is committed to each of
// them, concurrently, with OwnerIDs naming all of them. A shard call that
// fails as a whole is retried with backoff: CommitFile is idempotent by
// object key, so a retry after an ambiguous failure returns the original
// answer instead of committing twice.
package commit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/backoff"
)

// Shards is the coordinator surface commit needs: which shard owns a
// partition, and CommitFile on one shard. The in-process coordinator
// implements it; a remote client (coordinator RPCs) will too.
type Shards interface {
	ShardFor(id diskless.TopicID, partition int32) int32
	CommitFile(ctx context.Context, shard int32, req *diskless.CommitFileRequest) ([]diskless.CommitBatchResult, error)
}

// Committer commits objects to shards. It is safe for concurrent use: the
// produce pipeline's commit workers call it for files that share no
// producer and partition (DESIGN §Produce step 6).
type Committer struct {
	cfg    Config
	shards Shards
	sleep  func(ctx context.Context, d time.Duration) error
}

// New returns a Committer; zero Config fields take their defaults. It
// fails if cfg is invalid (see Config.Validate).
func New(cfg Config, shards Shards) (*Committer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Committer{cfg: cfg.withDefaults(), shards: shards, sleep: backoff.Sleep}, nil
}

// Commit commits the batches of the object stored under objectKey (size in
// bytes) and returns one result per batch, in the order given. Batches whose
// shard could not be reached after MaxAttempts, or before ctx ended, get
// KAFKA_STORAGE_ERROR, which producers retry (SPEC §2).
//
// When every owner shard answered its first CommitFile of the object and
// took none of its batches (each refused, or a duplicate of an earlier
// file's), no shard holds the object and none ever will (keys are never
// reused, SPEC §7; a first attempt is decided afresh, nothing before it
// can have committed the key): Config.Objects deletes it before Commit
// returns, instead of leaving it to the orphan scan. Objects of a topic
// deleted or disabled while its batches were in flight go so (DESIGN
// §Decisions: Disablement). After a retried attempt the earlier one may
// have committed the object, so it is kept.
func (c *Committer) Commit(ctx context.Context, objectKey string, size int64, batches []diskless.CommitBatch) []diskless.CommitBatchResult {
	shard, byShard := c.split(batches)
	if byShard == nil {
		// One shard owns the whole object (always so with one shard): its
		// batches go as they are and its answers come back in their order.
		// Shards.CommitFile only reads req, and not after it returns.
		if len(batches) == 0 {
			return nil
		}
		rs, attempts, err := c.commitWithRetry(ctx, shard, c.request(objectKey, size, []int32{shard}, batches))
		if err != nil {
			return failed(len(batches), errorCode(err))
		}
		if attempts == 1 {
			c.deleteUntaken(ctx, objectKey, rs)
		}
		return rs
	}

	results := make([]diskless.CommitBatchResult, len(batches))
	owners := make([]int32, 0, len(byShard))
	for s := range byShard {
		owners = append(owners, s)
	}
	slices.Sort(owners)
	var retried atomic.Bool // some owner's answer came after a failed attempt, or never
	commitShard := func(s int32) {
		idx := byShard[s]
		req := c.request(objectKey, size, owners, make([]diskless.CommitBatch, len(idx)))
		for i, bi := range idx {
			req.Batches[i] = batches[bi]
		}
		rs, attempts, err := c.commitWithRetry(ctx, s, req)
		if err != nil || attempts > 1 {
			retried.Store(true)
		}
		for i, bi := range idx {
			if err != nil {
				results[bi].Err = errorCode(err)
			} else {
				results[bi] = rs[i]
			}
		}
	}
	var wg sync.WaitGroup
	for _, s := range owners {
		wg.Go(func() { commitShard(s) })
	}
	wg.Wait()
	if !retried.Load() {
		c.deleteUntaken(ctx, objectKey, results)
	}
	return results
}

// deleteTimeout bounds the delete of an object no shard took: the commit
// loop waits for it, and the orphan scan deletes what it misses.
const deleteTimeout = 5 * time.Second

// deleteUntaken deletes objectKey through Config.Objects when rs, the
// first answers of every owner shard, accept none of its batches: each
// refused, or a duplicate (then its offsets are an earlier file's).
func (c *Committer) deleteUntaken(ctx context.Context, objectKey string, rs []diskless.CommitBatchResult) {
	if c.cfg.Objects == nil {
		return
	}
	for i := range rs {
		if rs[i].Err == nil && !rs[i].Duplicate {
			return // committed: the file lifecycle deletes it
		}
	}
	ctx, cancel := context.WithTimeout(ctx, deleteTimeout)
	defer cancel()
	if err := c.cfg.Objects.Delete(ctx, objectKey); err != nil {
		c.cfg.Logger.Warn("commit: deleting an object no shard took a batch of failed; the orphan scan will",
			slog.String("object", objectKey), slog.Any("err", err))
		return
	}
	c.cfg.Logger.Debug("commit: deleted an object no shard took a batch of", slog.String("object", objectKey), slog.Int("batches", len(rs)))
}

// request builds one shard's CommitFile request.
func (c *Committer) request(objectKey string, size int64, owners []int32, bs []diskless.CommitBatch) *diskless.CommitFileRequest {
	return &diskless.CommitFileRequest{
		ObjectKey:        objectKey,
		ObjectFormat:     diskless.ObjectFormatWriteAheadMultiSegment,
		FileSize:         size,
		UploaderBrokerID: c.cfg.NodeID,
		OwnerIDs:         owners,
		Batches:          bs,
	}
}

// failed answers n batches with code.
func failed(n int, code *kerr.Error) []diskless.CommitBatchResult {
	rs := make([]diskless.CommitBatchResult, n)
	for i := range rs {
		rs[i].Err = code
	}
	return rs
}

// errorCode is the Kafka error for batches whose shard commit failed as a
// whole: NOT_LEADER_OR_FOLLOWER from a fenced shard (another sidecar
// serves its partitions now; producers refresh their metadata and retry,
// and an idempotent producer's retry of a batch the fenced commit made
// durable after all is answered as a duplicate — DESIGN §Fencing) and
// from one whose log could not confirm its state for an answer without a
// write (DESIGN §Fencing, the read-index rule), else KAFKA_STORAGE_ERROR.
func errorCode(err error) *kerr.Error {
	if errors.Is(err, diskless.ErrShardFenced) || errors.Is(err, diskless.ErrNotConfirmed) {
		return kerr.NotLeaderForPartition
	}
	return kerr.KafkaStorageError
}

// split groups batch indexes by owning shard, keeping object order. When a
// single shard owns every batch (or there are none) it returns that shard
// and a nil map, without building the index lists.
func (c *Committer) split(batches []diskless.CommitBatch) (int32, map[int32][]int) {
	if len(batches) == 0 {
		return 0, nil
	}
	first := c.shards.ShardFor(batches[0].TopicID, batches[0].Partition)
	i := 1
	for i < len(batches) && c.shards.ShardFor(batches[i].TopicID, batches[i].Partition) == first {
		i++
	}
	if i == len(batches) {
		return first, nil
	}
	byShard := make(map[int32][]int)
	for j := range i {
		byShard[first] = append(byShard[first], j)
	}
	for ; i < len(batches); i++ {
		s := c.shards.ShardFor(batches[i].TopicID, batches[i].Partition)
		byShard[s] = append(byShard[s], i)
	}
	return first, byShard
}

// commitWithRetry commits req to shard, retrying whole-shard failures; it
// returns the answer and the attempt that got it.
func (c *Committer) commitWithRetry(ctx context.Context, shard int32, req *diskless.CommitFileRequest) ([]diskless.CommitBatchResult, int, error) {
	var err error
	attempt := 1
	for ; ; attempt++ {
		var rs []diskless.CommitBatchResult
		rs, err = c.shards.CommitFile(ctx, shard, req)
		if err == nil {
			if len(rs) != len(req.Batches) {
				return nil, attempt, fmt.Errorf("commit: shard %d answered %d results for %d batches", shard, len(rs), len(req.Batches))
			}
			return rs, attempt, nil
		}
		if !retriable(ctx, err) || attempt >= c.cfg.MaxAttempts {
			break
		}
		c.cfg.Logger.Warn("commit to coordinator shard failed; retrying",
			slog.Int("shard", int(shard)), slog.String("object", req.ObjectKey),
			slog.Int("attempt", attempt), slog.Any("err", err))
		if serr := c.sleep(ctx, backoff.Wait(c.cfg.InitialBackoff, c.cfg.MaxBackoff, attempt)); serr != nil {
			break
		}
	}
	level := slog.LevelError
	if errors.Is(err, diskless.ErrShardFenced) {
		// The coordinator logged the fencing once; every file a client
		// sends meanwhile would repeat it.
		level = slog.LevelDebug
	}
	c.cfg.Logger.Log(ctx, level, "commit to coordinator shard failed; answering "+errorCode(err).Message,
		slog.Int("shard", int(shard)), slog.String("object", req.ObjectKey), slog.Any("err", err))
	return nil, attempt, err
}

// retriable classifies a whole-shard CommitFile failure.
func retriable(ctx context.Context, err error) bool {
	switch {
	case ctx.Err() != nil:
		// Our caller gave up (shutdown): stop now.
		return false
	case errors.Is(err, diskless.ErrClosed):
		// The shard is shutting down in this process; it will not answer.
		return false
	case errors.Is(err, diskless.ErrInvalidCommit):
		// The request itself is malformed (a bug on our side); the same
		// request will be refused again.
		return false
	case errors.Is(err, diskless.ErrShardFailed), errors.Is(err, diskless.ErrShardFenced):
		// The shard could not rebuild its state from its log (for good,
		// or until a rebuild it retries succeeds: the producer retries
		// KAFKA_STORAGE_ERROR itself), or another sidecar took its
		// log over.
		return false
	case errors.Is(err, diskless.ErrNotConfirmed):
		// The shard's log could not confirm its state within the
		// coordinator's ConfirmTimeout (Kafka unreachable): the producer
		// gets NOT_LEADER_OR_FOLLOWER now and retries after refreshing
		// its metadata, rather than waiting here attempt after attempt.
		return false
	default:
		// Storage errors and timeouts may be transient. CommitFile is
		// idempotent by object key, so retrying is always safe.
		return true
	}
}
