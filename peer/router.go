package peer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/backoff"
)

// Placement says which sidecar hosts each coordinator shard (DESIGN
// §Coordinator RPCs).
type Placement interface {
	// Owner returns the sidecar hosting shard now; ok is false while
	// none is known.
	Owner(shard int32) (s diskless.Sidecar, ok bool)
	// Changed returns a channel closed at the next change of Owner's
	// answers. Take it before asking Owner, then wait on it.
	Changed() <-chan struct{}
}

// Local is what the router needs of this sidecar's own coordinator: the
// calls of the shards it hosts (each returning diskless.ErrNotCoordinator,
// wrapped, for a shard it does not host) and the topic catalog.
type Local interface {
	ShardFor(id diskless.TopicID, partition int32) int32
	CommitFile(ctx context.Context, shard int32, req *diskless.CommitFileRequest) ([]diskless.CommitBatchResult, error)
	FindBatches(ctx context.Context, reqs []diskless.FindBatchesRequest) []diskless.FindBatchesResult
	ListOffsets(ctx context.Context, tp diskless.TopicPartition, timestamp int64) diskless.ListOffsetsResult
	ListOffsetsFrom(ctx context.Context, tp diskless.TopicPartition, timestamp, from int64) diskless.ListOffsetsResult
	DescribeFiles(ctx context.Context, shard int32, keys []string) ([]diskless.FileState, error)
	DeleteRecords(ctx context.Context, tp diskless.TopicPartition, offset int64) (int64, error)
	CreatePartitionsIn(ctx context.Context, shard int32, topics []diskless.TopicPartitions) error
	DeleteTopicsIn(ctx context.Context, shard int32, ids []diskless.TopicID) error
	CloseFiles(ctx context.Context, shard, deleter int32, keys []string) error
	AllocateProducerIDBlock(ctx context.Context, node int32) (first int64, size int32, err error)
	CheckTxn(ctx context.Context, shard int32, req diskless.TxnCheck) (diskless.TxnCheckResult, error)
	EndTxnOffsets(ctx context.Context, shard int32, group string, pid int64, epoch int16, seq int64, committed bool) error
	Topic(name string) (diskless.Topic, bool)
	TopicByID(id diskless.TopicID) (diskless.Topic, bool)
	Watch() <-chan struct{}
}

// Defaults of RouterConfig's zero fields.
const (
	// DefaultWriteWait bounds how long a call that changes a shard
	// (CommitFile, DeleteRecords, …) keeps finding the shard's owner
	// again: about what a shard's move takes (the old owner's session
	// timeout, then the new one's replay), within a producer's delivery
	// timeout (120 s).
	DefaultWriteWait = 30 * time.Second
	// DefaultReadWait is the same bound for FindBatches and ListOffsets,
	// short: a fetch must answer within its max wait, and a consumer
	// retries anyway.
	DefaultReadWait = 2 * time.Second
	// DefaultRetryBackoff and DefaultMaxRetryBackoff bound the jittered
	// backoff between attempts while the placement does not change.
	DefaultRetryBackoff    = 20 * time.Millisecond
	DefaultMaxRetryBackoff = 500 * time.Millisecond
)

// RouterConfig configures a Router. Zero optional fields take their
// defaults.
type RouterConfig struct {
	// NodeID is this sidecar's node.id: shards whose owner has it are
	// called locally.
	NodeID int32
	// Local is this sidecar's coordinator; required.
	Local Local
	// Placement says where each shard is; required.
	Placement Placement
	// Client sends the RPCs; required.
	Client *Client
	// WriteWait, ReadWait, RetryBackoff, MaxRetryBackoff: see the
	// Default constants.
	WriteWait, ReadWait           time.Duration
	RetryBackoff, MaxRetryBackoff time.Duration
	// Logger receives the calls that gave up; default slog.Default().
	Logger *slog.Logger
}

// Router sends each coordinator call to the sidecar hosting its shard:
// this sidecar's coordinator when it hosts it, else the owner over the
// coordinator RPCs. It implements the stages' coordinator interfaces
// (commit.Shards, fetch.Coordinator, coordinator.FileDescriber, the
// server's Catalog calls of one shard) and is safe for concurrent use.
//
// A call the owner answers NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS
// — the shard moved, or is being loaded — or that could not be sent (the
// owner's connection could not be set up) is sent again to the owner the
// placement names then, once it changed or after a backoff, for at most
// WriteWait (ReadWait for reads); so is a read whose connection failed
// after it was sent. A CommitFile whose connection failed after the
// request left is not resent here: its answer is unknown, and the
// committer's retry, counted as a new attempt, resends it (CommitFile is
// idempotent by object key). A call still waiting for its answer when the
// placement names another owner is given up the same way, as if its
// connection failed: an owner cut off from the cluster may never answer.
type Router struct {
	cfg RouterConfig
}

// NewRouter returns a Router.
func NewRouter(cfg RouterConfig) (*Router, error) {
	if cfg.Local == nil || cfg.Placement == nil || cfg.Client == nil {
		return nil, errors.New("peer: a Router needs Local, Placement and Client")
	}
	if cfg.WriteWait == 0 {
		cfg.WriteWait = DefaultWriteWait
	}
	if cfg.ReadWait == 0 {
		cfg.ReadWait = DefaultReadWait
	}
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = DefaultRetryBackoff
	}
	if cfg.MaxRetryBackoff == 0 {
		cfg.MaxRetryBackoff = DefaultMaxRetryBackoff
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Router{cfg: cfg}, nil
}

// route calls do with shard's owner until it succeeds or fails for good
// (see Router). read selects ReadWait and resending after a connection
// failed mid-request.
func (r *Router) route(ctx context.Context, shard int32, read bool, do func(ctx context.Context, owner diskless.Sidecar, local bool) error) error {
	wait := r.cfg.WriteWait
	if read {
		wait = r.cfg.ReadWait
	}
	deadline := time.Now().Add(wait)
	for attempt := 1; ; attempt++ {
		changed := r.cfg.Placement.Changed()
		owner, ok := r.cfg.Placement.Owner(shard)
		var err error
		if !ok {
			err = fmt.Errorf("%w: no live sidecar hosts shard %d", diskless.ErrNotCoordinator, shard)
		} else {
			err = r.call(ctx, shard, owner, do)
			if err == nil || !resend(err, read) {
				return err
			}
		}
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			return err
		}
		t := time.NewTimer(min(backoff.Wait(r.cfg.RetryBackoff, r.cfg.MaxRetryBackoff, attempt), time.Until(deadline)))
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		t.Stop()
	}
}

// errOwnerMoved cancels a call to a shard's owner once the placement
// names another.
var errOwnerMoved = errors.New("the shard moved to another sidecar")

// call calls do with owner: this sidecar's coordinator when it is the
// owner, else the RPC, given up with ErrConnection as soon as the
// placement names another live sidecar as shard's owner. An owner that
// left the cluster — cut off from the others by the network, say — may
// leave the connection open with nothing coming back until the client's
// bound (the request's TimeoutMs and the overhead, 40 s for a commit);
// the others' placement moves the shard within the session timeout, and
// the call goes on with the new owner (a read here, a commit through the
// committer's retry: whether the old owner decided it is unknown).
func (r *Router) call(ctx context.Context, shard int32, owner diskless.Sidecar,
	do func(ctx context.Context, owner diskless.Sidecar, local bool) error) error {
	if owner.NodeID == r.cfg.NodeID {
		return do(ctx, owner, true)
	}
	cctx, cancel := context.WithCancelCause(ctx)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			changed := r.cfg.Placement.Changed()
			if o, ok := r.cfg.Placement.Owner(shard); ok && o.NodeID != owner.NodeID {
				cancel(errOwnerMoved)
				return
			}
			select {
			case <-changed:
			case <-stop:
				return
			}
		}
	}()
	err := do(cctx, owner, false)
	close(stop)
	<-stopped
	moved := errors.Is(context.Cause(cctx), errOwnerMoved)
	cancel(nil)
	if err != nil && moved && ctx.Err() == nil {
		return fmt.Errorf("%w: no answer from %s for shard %d: %w", ErrConnection, owner.Addr(), shard, errOwnerMoved)
	}
	return err
}

// resend reports whether a call that failed with err may go again to the
// shard's owner (see Router).
func resend(err error, read bool) bool {
	switch {
	case errors.Is(err, diskless.ErrNotCoordinator), errors.Is(err, diskless.ErrShardLoading):
		// Nothing was decided; the shard is elsewhere or not ready.
		return true
	case errors.Is(err, diskless.ErrShardFenced):
		// This sidecar's own shard was taken over: what the fenced call
		// wrote never became durable (DESIGN §Fencing); the new owner
		// decides it afresh (a CommitFile is idempotent by key, an
		// idempotent producer's batch deduplicated).
		return true
	case errors.Is(err, ErrNotSent):
		return true
	case errors.Is(err, ErrConnection):
		// The answer is lost: only a read is safe to repeat here.
		return read
	}
	return false
}

// ShardFor returns the shard owning a partition.
func (r *Router) ShardFor(id diskless.TopicID, partition int32) int32 {
	return r.cfg.Local.ShardFor(id, partition)
}

// Topic, TopicByID and Watch are the local catalog's and commit signal.
func (r *Router) Topic(name string) (diskless.Topic, bool) { return r.cfg.Local.Topic(name) }
func (r *Router) TopicByID(id diskless.TopicID) (diskless.Topic, bool) {
	return r.cfg.Local.TopicByID(id)
}
func (r *Router) Watch() <-chan struct{} { return r.cfg.Local.Watch() }

// CommitFile commits req's batches to shard (commit.Shards).
func (r *Router) CommitFile(ctx context.Context, shard int32, req *diskless.CommitFileRequest) ([]diskless.CommitBatchResult, error) {
	var out []diskless.CommitBatchResult
	err := r.route(ctx, shard, false, func(ctx context.Context, owner diskless.Sidecar, local bool) (err error) {
		if local {
			out, err = r.cfg.Local.CommitFile(ctx, shard, req)
		} else {
			out, err = r.cfg.Client.commitFile(ctx, owner.Addr(), shard, req)
		}
		return err
	})
	return out, err
}

// FindBatches answers each request, in order (fetch.Coordinator): the
// requests of each shard go to its owner, the shards' concurrently. A
// shard that cannot be reached answers its partitions
// NOT_LEADER_OR_FOLLOWER when no sidecar hosts it (clients refresh their
// metadata and retry), KAFKA_STORAGE_ERROR otherwise.
func (r *Router) FindBatches(ctx context.Context, reqs []diskless.FindBatchesRequest) []diskless.FindBatchesResult {
	out := make([]diskless.FindBatchesResult, len(reqs))
	byShard := make(map[int32][]int)
	for i, q := range reqs {
		s := r.ShardFor(q.TopicID, q.Partition)
		byShard[s] = append(byShard[s], i)
	}
	one := func(shard int32, idx []int) {
		sub := make([]diskless.FindBatchesRequest, len(idx))
		for j, i := range idx {
			sub[j] = reqs[i]
		}
		var got []diskless.FindBatchesResult
		err := r.route(ctx, shard, true, func(ctx context.Context, owner diskless.Sidecar, local bool) (err error) {
			if local {
				got = r.cfg.Local.FindBatches(ctx, sub)
				if shardMoved(got) {
					return diskless.ErrNotCoordinator
				}
				return nil
			}
			got, err = r.cfg.Client.findBatches(ctx, owner.Addr(), shard, sub)
			return err
		})
		for j, i := range idx {
			if err != nil {
				out[i] = diskless.FindBatchesResult{Err: r.readError(shard, err), LogStartOffset: -1, HighWatermark: -1}
			} else {
				out[i] = got[j]
			}
		}
	}
	if len(byShard) == 1 {
		for s, idx := range byShard {
			one(s, idx)
		}
		return out
	}
	var wg sync.WaitGroup
	for _, s := range slices.Sorted(maps.Keys(byShard)) {
		wg.Go(func() { one(s, byShard[s]) })
	}
	wg.Wait()
	return out
}

// shardMoved reports whether a local FindBatches answer says the shard is
// not (or no longer) served here: every partition NOT_LEADER_OR_FOLLOWER,
// a fenced shard's answer.
func shardMoved(rs []diskless.FindBatchesResult) bool {
	for _, r := range rs {
		if r.Err != kerr.NotLeaderForPartition {
			return false
		}
	}
	return len(rs) > 0
}

// readError is the per-partition error of a read whose shard could not
// be reached (logged).
func (r *Router) readError(shard int32, err error) *kerr.Error {
	r.cfg.Logger.Debug("peer: coordinator read failed", slog.Int("shard", int(shard)), slog.Any("err", err))
	var ke *kerr.Error
	switch {
	case errors.Is(err, diskless.ErrNotCoordinator), errors.Is(err, diskless.ErrShardLoading):
		return kerr.NotLeaderForPartition
	case errors.As(err, &ke):
		return ke
	}
	return kerr.KafkaStorageError
}

// ListOffsets answers one lookup from the owner's current state
// (fetch.Coordinator).
func (r *Router) ListOffsets(ctx context.Context, tp diskless.TopicPartition, timestamp int64) diskless.ListOffsetsResult {
	return r.listOffsets(ctx, tp, timestamp, -1)
}

// ListOffsetsFrom is ListOffsets restricted to the batches holding an
// offset ≥ from (fetch.Coordinator).
func (r *Router) ListOffsetsFrom(ctx context.Context, tp diskless.TopicPartition, timestamp, from int64) diskless.ListOffsetsResult {
	return r.listOffsets(ctx, tp, timestamp, max(from, -1))
}

func (r *Router) listOffsets(ctx context.Context, tp diskless.TopicPartition, timestamp, from int64) diskless.ListOffsetsResult {
	shard := r.ShardFor(tp.TopicID, tp.Partition)
	var out diskless.ListOffsetsResult
	err := r.route(ctx, shard, true, func(ctx context.Context, owner diskless.Sidecar, local bool) (err error) {
		if local {
			if from < 0 {
				out = r.cfg.Local.ListOffsets(ctx, tp, timestamp)
			} else {
				out = r.cfg.Local.ListOffsetsFrom(ctx, tp, timestamp, from)
			}
			if out.Err == kerr.NotLeaderForPartition {
				return diskless.ErrNotCoordinator
			}
			return nil
		}
		out, err = r.cfg.Client.listOffsets(ctx, owner.Addr(), shard, tp, timestamp, from)
		return err
	})
	if err != nil {
		return diskless.ListOffsetsResult{Err: r.readError(shard, err), LogStartOffset: -1, HighWatermark: -1, Offset: -1, Timestamp: -1}
	}
	return out
}

// DescribeFiles asks shard what it knows of keys
// (coordinator.FileDescriber).
func (r *Router) DescribeFiles(ctx context.Context, shard int32, keys []string) ([]diskless.FileState, error) {
	var out []diskless.FileState
	err := r.route(ctx, shard, true, func(ctx context.Context, owner diskless.Sidecar, local bool) (err error) {
		if local {
			out, err = r.cfg.Local.DescribeFiles(ctx, shard, keys)
		} else {
			out, err = r.cfg.Client.describeFiles(ctx, owner.Addr(), shard, keys)
		}
		return err
	})
	return out, err
}

// DeleteRecords moves a partition's log start offset at its shard's
// owner.
func (r *Router) DeleteRecords(ctx context.Context, tp diskless.TopicPartition, offset int64) (int64, error) {
	shard := r.ShardFor(tp.TopicID, tp.Partition)
	var out int64
	err := r.route(ctx, shard, false, func(ctx context.Context, owner diskless.Sidecar, local bool) (err error) {
		if local {
			out, err = r.cfg.Local.DeleteRecords(ctx, tp, offset)
		} else {
			out, err = r.cfg.Client.deleteRecords(ctx, owner.Addr(), shard, tp, offset)
		}
		return err
	})
	return out, err
}

// CreatePartitionsIn creates partitions in shard (record 100) at its
// owner.
func (r *Router) CreatePartitionsIn(ctx context.Context, shard int32, topics []diskless.TopicPartitions) error {
	return r.route(ctx, shard, false, func(ctx context.Context, owner diskless.Sidecar, local bool) error {
		if local {
			return r.cfg.Local.CreatePartitionsIn(ctx, shard, topics)
		}
		return r.cfg.Client.createPartitionsIn(ctx, owner.Addr(), shard, topics)
	})
}

// DeleteTopicsIn marks topics deleted in shard (record 101) at its owner.
func (r *Router) DeleteTopicsIn(ctx context.Context, shard int32, ids []diskless.TopicID) error {
	return r.route(ctx, shard, false, func(ctx context.Context, owner diskless.Sidecar, local bool) error {
		if local {
			return r.cfg.Local.DeleteTopicsIn(ctx, shard, ids)
		}
		return r.cfg.Client.deleteTopicsIn(ctx, owner.Addr(), shard, ids)
	})
}

// CloseFiles closes released files in shard (record 106) at its owner.
func (r *Router) CloseFiles(ctx context.Context, shard, deleter int32, keys []string) error {
	return r.route(ctx, shard, false, func(ctx context.Context, owner diskless.Sidecar, local bool) error {
		if local {
			return r.cfg.Local.CloseFiles(ctx, shard, deleter, keys)
		}
		return r.cfg.Client.closeFiles(ctx, owner.Addr(), shard, deleter, keys)
	})
}

// CheckTxn asks the transactional id's shard (shard) at its owner whether
// a transactional batch or offset commit may be written, and the open
// transaction's token (DisklessCheckTxn). It writes nothing, so it goes
// again like a read, for at most ReadWait: a produce refused meanwhile
// (NOT_LEADER_OR_FOLLOWER) is retried by its producer.
func (r *Router) CheckTxn(ctx context.Context, shard int32, req diskless.TxnCheck) (diskless.TxnCheckResult, error) {
	var res diskless.TxnCheckResult
	err := r.route(ctx, shard, true, func(ctx context.Context, owner diskless.Sidecar, local bool) (err error) {
		if local {
			res, err = r.cfg.Local.CheckTxn(ctx, shard, req)
		} else {
			res, err = r.cfg.Client.checkTxn(ctx, owner.Addr(), shard, req)
		}
		return err
	})
	return res, err
}

// EndTxnOffsets writes record 110 on group's shard (shard) at its owner
// (DisklessEndTxnOffsets), with seq, the token of the transaction that
// ended. A retry changes nothing: the record ends only pending offsets of
// that transaction or an earlier one of the producer (DESIGN
// §Transactions).
func (r *Router) EndTxnOffsets(ctx context.Context, shard int32, group string, pid int64, epoch int16, seq int64, committed bool) error {
	return r.route(ctx, shard, false, func(ctx context.Context, owner diskless.Sidecar, local bool) error {
		if local {
			return r.cfg.Local.EndTxnOffsets(ctx, shard, group, pid, epoch, seq, committed)
		}
		return r.cfg.Client.endTxnOffsets(ctx, owner.Addr(), shard, group, pid, epoch, seq, committed)
	})
}

// AllocateProducerIDBlock gets a block of producer ids from shard 0's
// owner, recorded for node.
func (r *Router) AllocateProducerIDBlock(ctx context.Context, node int32) (int64, int32, error) {
	var (
		first int64
		size  int32
	)
	err := r.route(ctx, 0, false, func(ctx context.Context, owner diskless.Sidecar, local bool) (err error) {
		if local {
			first, size, err = r.cfg.Local.AllocateProducerIDBlock(ctx, node)
		} else {
			first, size, err = r.cfg.Client.allocateProducerIDBlock(ctx, owner.Addr(), node)
		}
		return err
	})
	return first, size, err
}
