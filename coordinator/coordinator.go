package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/ratelog"
	"github.com/diskless-sidecar/sidecar/metalog"
)

// ErrShardCountChanged is returned (wrapped) by Open when the metadata logs
// under Config.Dir were written with a different number of shards: the
// partition-to-shard assignment depends on it, so it cannot change for the
// life of the directory.
var ErrShardCountChanged = errors.New("coordinator: diskless.metadata.topic.num.partitions differs from the one the metadata logs were written with; it cannot change")

// Coordinator runs this node's coordinator shards (DESIGN §Coordinators):
// each shard owns a metadata log and the state replayed from it, and
// decides the commits of the partitions it owns. All methods are safe for
// concurrent use.
//
// Goroutines, all started by Open and stopped and joined by Close: one
// driver per shard; per shard at most one snapshot writer (started by the
// driver, joined by it before it exits); the periodic loops of retention,
// file deletion and the orphan scan (each job serialised with itself, so
// a direct call and its loop never overlap); and, inside a pass, up to
// deleteConcurrency object deletes joined before the pass returns.
// Locks: closeMu (held for reading while queueing a request, and by
// Health across its reading of every shard) is taken before a shard's
// host and mu, never while holding one (hosting.go's lock order); the
// catalog is an immutable snapshot swapped atomically; pid.mu and createMu serialise their callers and are
// taken before (never inside) a shard request; background jobs take one
// shard's read lock at a time and never hold it across a shard request or
// an object-store call.
type Coordinator struct {
	cfg    Config
	logger *slog.Logger
	shards []*shard
	// retryLog rate-limits the background loops' "failed; retrying"
	// warnings (a sidecar down keeps a disablement failing every pass).
	retryLog *ratelog.Limiter

	// catalog is the published topic catalog (shard 0's records 104).
	catalog atomic.Pointer[catalog]

	closeMu sync.RWMutex
	closed  bool // guarded by closeMu
	// placeMu serialises Host, Release and Close (hosting.go), so that a
	// shard's role changes one at a time and none after Close.
	placeMu sync.Mutex

	// createMu serialises CreateTopic, so that a name is checked and
	// claimed atomically.
	createMu sync.Mutex

	// pid hands out producer ids from the current block.
	pid struct {
		sync.Mutex
		next, end int64 // [next, end) not yet handed out
	}

	// watch is the channel closed by the next commit that makes data
	// visible.
	watch struct {
		sync.Mutex
		ch chan struct{}
	}

	stats Stats
	jobs  jobs
	// consolidation holds the segment builders; guarded by
	// jobs.consolidation.
	consolidation consolidation
	// lifecycleKick wakes the lifecycle loop (disablements, purge) at
	// once; buffered 1.
	lifecycleKick chan struct{}
	// markers writes transactions' markers into their partitions
	// (SetMarkerWriter); nil: none are written.
	markers atomic.Pointer[markerWriterBox]
	// completing holds, per transaction being completed (txnKey), a
	// channel closed when that completion ends: EndTxn and the periodic
	// check never write one transaction's markers at once (completeTxn).
	completing sync.Map
	// bg owns the periodic loops.
	bg struct {
		cancel context.CancelFunc
		wg     sync.WaitGroup
	}
}

// Open validates cfg, opens (creating if needed) every shard's metadata log
// and rebuilds each shard's state by replaying it — from the latest
// snapshot, truncating a torn tail (docs/format/metadata-records.md) — then
// starts the shard drivers and the background loops (retention, file
// deletion, orphan scan; see Config). The caller holds Dir exclusively
// until Close (cmd/sidecar: the data.dir lock). Errors: a Config.Validate
// error; metalog.ErrCorrupt (wrapped) for a log that is not merely torn;
// an error naming diskless.metadata.topic.num.partitions when Dir was
// written with a different number of shards; IO errors.
func Open(cfg Config) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := clearStaging(cfg.ConsolidationStagingDir); err != nil {
		return nil, fmt.Errorf("coordinator: clearing the consolidation staging directory: %w", err)
	}
	c := &Coordinator{cfg: cfg, logger: cfg.Logger, retryLog: ratelog.New(cfg.Logger, ratelog.Config{})}
	c.watch.ch = make(chan struct{})
	c.lifecycleKick = make(chan struct{}, 1)
	c.lifecycleKick <- struct{}{} // re-drive at open: disablements in DISABLING, purges
	fail := func(err error) (*Coordinator, error) {
		for _, s := range c.shards {
			if s.log != nil {
				s.log.Close()
			}
			if rep := s.host.rep; rep != nil {
				rep.stop()
			}
		}
		return nil, err
	}
	if cfg.OpenLog == nil {
		if err := checkShardDirs(cfg.Dir, cfg.NumShards); err != nil {
			return nil, err
		}
	}
	for i := range cfg.NumShards {
		if cfg.OpenFollower != nil {
			// One sidecar of a cluster: follow every shard; Host takes
			// some over.
			s := &shard{c: c, id: i, stopErr: diskless.ErrClosed}
			s.host.role = roleReplica
			c.shards = append(c.shards, s)
			if err := s.follow(-1, nil, true); err != nil {
				return fail(err)
			}
			continue
		}
		var (
			l   metalog.Log
			err error
		)
		if cfg.OpenLog != nil {
			l, err = cfg.OpenLog(i)
		} else {
			l, err = metalog.OpenFileLog(filepath.Join(cfg.Dir, "shard-"+strconv.Itoa(int(i))), cfg.Logger)
		}
		if err != nil {
			return fail(fmt.Errorf("coordinator: open shard %d: %w", i, err))
		}
		s := &shard{
			c:       c,
			id:      i,
			log:     l,
			reqs:    make(chan *request, shardQueueDepth),
			stop:    make(chan struct{}),
			done:    make(chan struct{}),
			stopErr: diskless.ErrClosed,
		}
		s.host.role = roleHosted
		c.shards = append(c.shards, s)
		st, err := s.load(context.Background())
		if err != nil {
			return fail(err)
		}
		s.mu.st = st
		if err := s.openGroups(); err != nil {
			return fail(err)
		}
	}
	c.publishCatalog(c.shards[0].mu.st)
	if err := c.checkAssignment(); err != nil {
		return fail(err)
	}
	for _, t := range c.catalog.Load().sorted {
		if t.Disablement.State == diskless.TopicDisabling {
			c.logger.Info("coordinator: resuming the disablement of a topic left DISABLING", "topic", t.Name,
				"epoch", t.Disablement.Epoch, "policy", t.Disablement.Policy.String())
		}
	}
	c.jobs.quiet = make([]map[string]int64, cfg.NumShards)
	for i := range c.jobs.quiet {
		c.jobs.quiet[i] = make(map[string]int64)
	}
	for _, s := range c.shards {
		if s.host.role == roleHosted {
			go s.run()
		}
	}
	c.startBackground()
	return c, nil
}

// checkShardDirs refuses a Dir holding shards beyond numShards: partitions
// are assigned by ShardFor(…, numShards), so changing it would lose them.
func checkShardDirs(dir string, numShards int32) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	for _, e := range entries {
		n, ok := strings.CutPrefix(e.Name(), "shard-")
		if !ok || !e.IsDir() {
			continue
		}
		if i, err := strconv.Atoi(n); err == nil && i >= int(numShards) {
			return fmt.Errorf("%w: %s holds shard-%d, so it was written with more than the %d shards configured now",
				ErrShardCountChanged, dir, i, numShards)
		}
	}
	return nil
}

// checkAssignment verifies that every partition of every topic is held by
// the shard ShardFor assigns it to.
func (c *Coordinator) checkAssignment() error {
	for _, t := range c.catalog.Load().sorted {
		for p := range t.Partitions {
			s := c.shards[c.ShardFor(t.ID, p)]
			if s.mu.st.partitions[diskless.TopicPartition{TopicID: t.ID, Partition: p}] == nil {
				return fmt.Errorf("%w: partition %d of topic %q is not in shard %d of the %d configured now",
					ErrShardCountChanged, p, t.Name, s.id, c.cfg.NumShards)
			}
		}
	}
	return nil
}

// Close stops the background loops (cancelling their object-store calls)
// and the shard drivers, waits for all of them, including snapshots being
// written, and closes the logs. A group being written completes; queued
// requests and later calls fail with ErrClosed. Close is idempotent.
func (c *Coordinator) Close() error {
	c.closeMu.Lock()
	if c.closed {
		c.closeMu.Unlock()
		return nil
	}
	c.closed = true
	c.closeMu.Unlock()
	c.placeMu.Lock()
	defer c.placeMu.Unlock()
	c.stopBackground()
	c.dropBuilders()
	c.retryLog.Close()
	hosted := make([]bool, len(c.shards))
	reps := make([]*replica, len(c.shards))
	for i, s := range c.shards {
		s.host.Lock()
		if s.host.role == roleHosted {
			hosted[i] = true
			s.stopErr = diskless.ErrClosed
			close(s.stop)
		}
		reps[i], s.host.rep = s.host.rep, nil
		s.host.Unlock()
	}
	var errs []error
	for i, s := range c.shards {
		if reps[i] != nil {
			reps[i].stop()
		}
		if !hosted[i] {
			continue
		}
		<-s.done
		if err := s.log.Close(); err != nil {
			errs = append(errs, fmt.Errorf("coordinator: close shard %d: %w", s.id, err))
		}
	}
	return errors.Join(errs...)
}

// Err reports the coordinator's liveness, for a health check (/healthz):
// Health().Err() — see Health.Err. It is safe for concurrent use.
func (c *Coordinator) Err() error { return c.Health().Err() }

// Unserved reports the coordinator's readiness, for /readyz:
// Health().Unserved() — see Health.Unserved.
func (c *Coordinator) Unserved() error { return c.Health().Unserved() }

// ErrShardsUnserved is wrapped by Unserved's error.
var ErrShardsUnserved = errors.New("coordinator: shards not served")

// NodeID returns this sidecar's node.id.
func (c *Coordinator) NodeID() int32 { return c.cfg.NodeID }

// NumShards returns the number of coordinator shards.
func (c *Coordinator) NumShards() int32 { return c.cfg.NumShards }

// ShardFor returns the shard owning a partition: ShardFor(id, partition,
// c.NumShards()).
func (c *Coordinator) ShardFor(id diskless.TopicID, partition int32) int32 {
	return diskless.ShardFor(id, partition, c.cfg.NumShards)
}

func (c *Coordinator) nowMs() int64 { return c.cfg.Now().UnixMilli() }

// Watch returns a channel closed by the next commit that makes new data
// visible in any shard (fetch long-polls wait on it). Take the channel
// before reading, then wait: a commit in between closes it.
func (c *Coordinator) Watch() <-chan struct{} {
	c.watch.Lock()
	defer c.watch.Unlock()
	return c.watch.ch
}

func (c *Coordinator) notify() {
	c.watch.Lock()
	close(c.watch.ch)
	c.watch.ch = make(chan struct{})
	c.watch.Unlock()
}

// CommitFile commits one uploaded file's batches that belong to shard
// (SPEC §9 DisklessCommitFile). It returns one result per batch, in
// request order: assigned offsets and the file's log-append time, or the
// batch's error (UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH,
// OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_RECORD for a batch the produce path
// should have refused), or a duplicate's original answer (SPEC §3).
// Results are returned only once the accepted batches are durable in the
// shard's metadata log. A repeated ObjectKey is answered as before
// (batches no longer known get KAFKA_STORAGE_ERROR).
//
// The error return is set only when nothing was decided: ErrInvalidCommit,
// ErrClosed, ctx's error when ctx was done before the shard took the
// request, ErrShardFailed (with kerr.KafkaStorageError), or the log write's
// error. req must not be modified until CommitFile returns.
func (c *Coordinator) CommitFile(ctx context.Context, shard int32, req *diskless.CommitFileRequest) ([]diskless.CommitBatchResult, error) {
	if err := c.validateCommit(shard, req); err != nil {
		return nil, err
	}
	resp := c.shards[shard].do(&request{ctx: ctx, commit: req})
	return resp.results, resp.err
}

func (c *Coordinator) validateCommit(shard int32, req *diskless.CommitFileRequest) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", diskless.ErrInvalidCommit, fmt.Sprintf(format, args...))
	}
	switch {
	case shard < 0 || shard >= c.cfg.NumShards:
		return bad("shard %d out of [0, %d)", shard, c.cfg.NumShards)
	case req == nil:
		return bad("nil request")
	case req.ObjectKey == "" || len(req.ObjectKey) > diskless.MaxObjectKeyBytes:
		return bad("object key of %d bytes", len(req.ObjectKey))
	case req.ObjectFormat != diskless.ObjectFormatWriteAheadMultiSegment:
		return bad("object format %d", req.ObjectFormat)
	case req.FileSize < 0:
		return bad("file size %d", req.FileSize)
	case len(req.Batches) > diskless.MaxCommitBatches:
		return bad("%d batches (limit %d)", len(req.Batches), diskless.MaxCommitBatches)
	case len(req.OwnerIDs) > int(c.cfg.NumShards):
		return bad("%d owners", len(req.OwnerIDs))
	}
	self := false
	for i, id := range req.OwnerIDs {
		if id < 0 || id >= c.cfg.NumShards || (i > 0 && id <= req.OwnerIDs[i-1]) {
			return bad("owner ids %v are not ascending shard ids", req.OwnerIDs)
		}
		self = self || id == shard
	}
	if !self {
		return bad("owner ids %v do not include shard %d", req.OwnerIDs, shard)
	}
	return nil
}

// FindBatches answers FindBatches for each request, in request order
// (SPEC §4, §9): the batches from the one containing Offset, within
// MaxBytes (the first batch always), with the partition's log start offset
// and high watermark. Errors per result: UNKNOWN_TOPIC_OR_PARTITION;
// OFFSET_OUT_OF_RANGE when Offset is below the log start offset or above
// the high watermark; KAFKA_STORAGE_ERROR from a failed shard. Only
// durable batches are returned; at the high watermark the list is empty.
// It does not block on commits in progress; ctx is unused in process.
func (c *Coordinator) FindBatches(ctx context.Context, reqs []diskless.FindBatchesRequest) []diskless.FindBatchesResult {
	cat := c.catalog.Load()
	out := make([]diskless.FindBatchesResult, len(reqs))
	for i := range reqs {
		r := &reqs[i]
		s, p, err := c.lookup(cat, r.TopicID, r.Partition)
		if err != nil {
			out[i] = diskless.FindBatchesResult{Err: err, LogStartOffset: -1, HighWatermark: -1, LastStableOffset: -1}
			s.unlock()
			continue
		}
		out[i] = s.mu.st.findBatches(p, r.Offset, r.MaxBytes, r.ReadCommitted)
		s.unlock()
	}
	return out
}

// ListOffsets answers a ListOffsets lookup on one partition (SPEC §5):
// ListOffsetsEarliest → Offset = log start offset; ListOffsetsLatest →
// Offset = high watermark (Timestamp −1 for both);
// ListOffsetsMaxTimestamp → Candidate = the earliest batch holding the
// largest effective max timestamp (RunCoordinate.MaxTimestamp); a
// timestamp ≥ 0 → Candidate = the first batch, in offset order, whose
// effective max timestamp is ≥ it. With a Candidate, Offset and Timestamp
// are −1: the caller finds the record in the candidate batch. No match (or
// an empty partition) → Offset −1, Timestamp −1, no Candidate. Errors:
// UNKNOWN_TOPIC_OR_PARTITION, UNSUPPORTED_VERSION for other negative
// timestamps, KAFKA_STORAGE_ERROR from a failed shard. Answers reflect
// every commit acknowledged before the call.
func (c *Coordinator) ListOffsets(ctx context.Context, tp diskless.TopicPartition, timestamp int64) diskless.ListOffsetsResult {
	if err := c.confirmFor(ctx, tp); err != nil {
		return diskless.ListOffsetsResult{Err: err, LogStartOffset: -1, HighWatermark: -1, LastStableOffset: -1, Offset: -1, Timestamp: -1}
	}
	s, p, err := c.lookup(c.catalog.Load(), tp.TopicID, tp.Partition)
	defer s.unlock()
	if err != nil {
		return diskless.ListOffsetsResult{Err: err, LogStartOffset: -1, HighWatermark: -1, LastStableOffset: -1, Offset: -1, Timestamp: -1}
	}
	return s.mu.st.listOffsets(p, timestamp)
}

// ListOffsetsFrom is ListOffsets restricted to the batches that hold an
// offset ≥ from, for a lookup that has to look past a batch it was given
// (SPEC §5: the candidate's qualifying records lie below the log start
// offset, or its header claims a max timestamp no record has): with from
// its last offset + 1, the next candidate in one call. A timestamp ≥ 0 →
// Candidate = the first batch, in offset order, holding an offset ≥ from
// whose effective max timestamp (RunCoordinate.MaxTimestamp) is ≥ it;
// ListOffsetsMaxTimestamp → Candidate = the earliest batch holding an
// offset ≥ from with the largest effective max timestamp among those. A
// batch holding from and offsets below it counts; a from at or below the
// log start offset makes it ListOffsets. No such batch (from at or past
// the high watermark included) → no Candidate, Offset and Timestamp −1.
// ListOffsetsEarliest and ListOffsetsLatest, and the errors, are as in
// ListOffsets; LogStartOffset and HighWatermark are the partition's as of
// this answer.
//
// Cost, under the shard's read lock: O(log n) in the partition's n
// batches when no batch before from reaches the answer's timestamp (for
// ListOffsetsMaxTimestamp: the largest of the partition); otherwise the
// rest of from's index chunk (at most 256 runs), one summary per
// later chunk and a binary search in one chunk: O(256 + n/256).
// BenchmarkListOffsetsFrom, 1M batches: 1.3–1.8 µs from random offsets,
// 17–28 µs in the worst case (from the second batch of a chunk, past a
// candidate holding the partition's largest timestamp).
func (c *Coordinator) ListOffsetsFrom(ctx context.Context, tp diskless.TopicPartition, timestamp, from int64) diskless.ListOffsetsResult {
	if err := c.confirmFor(ctx, tp); err != nil {
		return diskless.ListOffsetsResult{Err: err, LogStartOffset: -1, HighWatermark: -1, LastStableOffset: -1, Offset: -1, Timestamp: -1}
	}
	s, p, err := c.lookup(c.catalog.Load(), tp.TopicID, tp.Partition)
	defer s.unlock()
	if err != nil {
		return diskless.ListOffsetsResult{Err: err, LogStartOffset: -1, HighWatermark: -1, LastStableOffset: -1, Offset: -1, Timestamp: -1}
	}
	return s.mu.st.listOffsetsFrom(p, timestamp, from)
}

// confirmFor confirms the state of tp's shard, when hosted here, before
// a ListOffsets answer is read from it (SPEC §9: ListOffsets may not be
// stale; confirm.go). When the log could not confirm — the shard was
// taken over, Kafka did not answer, ctx ended first — the partition
// answers NOT_LEADER_OR_FOLLOWER, on which clients refresh their
// metadata and retry (the router of package peer asks the owner again).
func (c *Coordinator) confirmFor(ctx context.Context, tp diskless.TopicPartition) *kerr.Error {
	if tp.Partition < 0 {
		return nil // lookup answers it
	}
	s := c.shards[c.ShardFor(tp.TopicID, tp.Partition)]
	l, ok := s.hostedLog()
	if !ok {
		return nil
	}
	if err := s.confirm(ctx, l); err != nil {
		return kerr.NotLeaderForPartition
	}
	return nil
}

// lookup finds a partition's shard and index and returns with the shard's
// read lock held (release with s.unlock, also on error; s may be nil).
func (c *Coordinator) lookup(cat *catalog, id diskless.TopicID, partition int32) (*shard, *partition, *kerr.Error) {
	t := cat.byID[id]
	if t == nil || partition < 0 || partition >= t.Partitions {
		return nil, nil, kerr.UnknownTopicOrPartition
	}
	s := c.shards[c.ShardFor(id, partition)]
	s.mu.RLock()
	if s.mu.failed != nil {
		return s, nil, s.failedCode()
	}
	p := s.mu.st.partitions[diskless.TopicPartition{TopicID: id, Partition: partition}]
	if p == nil || !p.visible {
		return s, nil, kerr.UnknownTopicOrPartition
	}
	return s, p, nil
}

func (s *shard) unlock() {
	if s != nil {
		s.mu.RUnlock()
	}
}

// AllocateProducerID returns a producer id never handed out before, also
// across restarts (InitProducerId, SPEC §3). Ids come from blocks of
// producerIDBlockSize recorded durably on shard 0 (record 105); ids of a
// block not used up before a restart are skipped. Errors: ErrClosed,
// ctx's error, the log write's error.
func (c *Coordinator) AllocateProducerID(ctx context.Context) (int64, error) {
	c.pid.Lock()
	defer c.pid.Unlock()
	if c.pid.next < c.pid.end {
		id := c.pid.next
		c.pid.next++
		return id, nil
	}
	first, size, err := c.producerIDBlock(ctx)
	if err != nil {
		return -1, err
	}
	c.pid.next, c.pid.end = first+1, first+int64(size)
	return first, nil
}
