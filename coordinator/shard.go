package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/group"
	"github.com/diskless-sidecar/sidecar/internal/backoff"
	"github.com/diskless-sidecar/sidecar/metalog"
	"github.com/diskless-sidecar/sidecar/txn"
)

// Tuning of the shard driver.
const (
	// shardQueueDepth bounds the requests waiting for a shard's driver;
	// callers block (until their ctx is done) when it is full.
	shardQueueDepth = 1024
	// maxGroupRequests bounds how many requests one group commit takes.
	maxGroupRequests = 256
)

// shard is one coordinator shard: the deterministic state plus the driver
// goroutine that owns the log. Only the driver mutates st (under mu);
// readers hold mu for reading.
type shard struct {
	c   *Coordinator
	id  int32
	log metalog.Log

	// reqs, stop and done belong to one hosting of the shard (from Open,
	// or from Host to Release), replaced under host by Host.
	reqs chan *request
	stop chan struct{} // closed by Close or Release
	done chan struct{} // closed when the driver has exited
	// stopErr is what requests still queued when the driver stops get:
	// diskless.ErrClosed (Close) or diskless.ErrNotCoordinator (Release).
	stopErr error

	// host is the shard's role on this sidecar (hosting.go): hosted (the
	// driver runs), loading (Host is taking the log over) or a replica
	// following the log (rep).
	host struct {
		sync.RWMutex
		role role
		rep  *replica
		// followErr is why a shard in roleReplica has no rep: follow
		// failed for good (Release, a takeover that failed); nil
		// otherwise — Host clears it as it takes the shard over, and
		// follow sets it again.
		followErr error
	}

	mu struct {
		sync.RWMutex
		// st is the state; nil only before the first replay.
		st *state
		// failed is set when st could not be rebuilt from the log; the
		// driver retries the rebuild while rebuilding stays set (a
		// reason that may pass: retryableLoad).
		failed error
	}

	// rebuilding is set while the driver rebuilds the state from the log
	// after a failed append: consumer-group requests are then refused
	// with ErrShardLoading (COORDINATOR_LOAD_IN_PROGRESS) instead of
	// waiting behind the replay (groupDo); commits and admin requests
	// queue as before. (A shard being taken over, roleLoading, refuses
	// every request the same way.)
	rebuilding atomic.Bool

	// confirms coalesces the confirmations of the shard's log
	// (confirm.go).
	confirms confirmer
	// txnEpoch is txns' coordinator epoch (txn.Coordinator.Epoch), set
	// before the driver starts, for the completions that run off it
	// (completeTxn).
	txnEpoch atomic.Int32

	// Driver-only fields.
	recent recentCommits
	// groups is the consumer-group coordinator of the groups this shard
	// owns; its offsets table is mu.st.groups.
	groups *group.Coordinator
	// txns is the transaction coordinator of the transactional ids this
	// shard owns; its table is mu.st.txns.
	txns *txn.Coordinator
	// groupTimer fires at the group coordinator's next deadline or the
	// next offset expiry check (groups.go).
	groupTimer *time.Timer
	// nextExpiry is when the next offset expiry check runs.
	nextExpiry time.Time
	// logNext is the index the next appended record gets.
	logNext int64
	// snapshotAt is the index of the last snapshot started (0: none), and
	// bytesSince the bytes of the records appended (or replayed) since.
	snapshotAt int64
	bytesSince int64
	// snapshotDone, when not nil, receives the outcome of the snapshot
	// being written by the shard's snapshot goroutine (at most one).
	snapshotDone chan error
	// rebuildTimer, when not nil, fires at the next attempt of a rebuild
	// whose last attempt failed for a reason that may pass (the log's
	// storage unreachable: a Kafka broker restarting, no leader), and
	// rebuildAttempts counts the attempts that failed in a row.
	rebuildTimer    *time.Timer
	rebuildAttempts int
}

// request is one unit of work for a shard driver: a file commit, or an
// admin change built from the state (topic creation, producer-id blocks,
// log start moves, file deletions).
type request struct {
	ctx    context.Context
	commit *diskless.CommitFileRequest
	// build returns the records of an admin change, deciding against st;
	// they are applied in order. An error refuses the change.
	build func(st *state) ([]records.Record, error)
	// deferred requests are processed alone, and their records applied
	// only once durable: build must not change st. Used for changes that
	// readers would otherwise see before they are durable — records 103
	// trim partition indexes in place, 106 close files that DescribeFiles
	// reports on.
	deferred bool
	// group, when set, is a consumer-group request (groups.go): it runs
	// on the driver against the shard's group coordinator, its records
	// are written with the group commit and applied once durable, and
	// its reply is called before done is answered.
	group groupOp
	// txn, when set, is a transaction coordinator request (txns.go): it
	// runs on the driver against the shard's transaction coordinator; its
	// records are applied to the table as decided (so the next request of
	// the group decides against them), written with the group commit and
	// answered only once durable — a failed append rebuilds the table from
	// the log.
	txn  txnOp
	done chan response
}

type response struct {
	results []diskless.CommitBatchResult
	err     error
}

// submit queues r, blocking while the queue is full. Once submit returns
// nil the driver answers r exactly once.
func (s *shard) submit(r *request) error {
	c := s.c
	c.closeMu.RLock()
	defer c.closeMu.RUnlock()
	if c.closed {
		return diskless.ErrClosed
	}
	s.host.RLock()
	defer s.host.RUnlock()
	if s.host.role != roleHosted {
		return s.roleError(s.host.role)
	}
	select {
	case s.reqs <- r:
		return nil
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
}

// do submits r and waits for its answer. After the driver took r the wait
// is not cut short by ctx: the answer may already be durable.
func (s *shard) do(r *request) response {
	r.done = make(chan response, 1)
	if err := s.submit(r); err != nil {
		return response{err: err}
	}
	return <-r.done
}

// run is the driver loop: take a request, drain whatever else is queued
// (group commit), process the group. A deferred request ends the group
// and is processed alone after it. run returns after stop is closed, the
// queue is drained and the snapshot being written, if any, is done.
func (s *shard) run() {
	defer close(s.done)
	defer s.waitSnapshot()
	defer s.stopRebuildTimer()
	group := make([]*request, 0, maxGroupRequests)
	for {
		s.armGroupTimer()
		var rebuildDue <-chan time.Time
		if s.rebuildTimer != nil {
			rebuildDue = s.rebuildTimer.C
		}
		select {
		case <-s.stop:
			s.drain()
			return
		case <-rebuildDue:
			s.rebuildTimer = nil
			s.rebuild()
		case <-s.groupTimer.C:
			s.groupTick()
		case r := <-s.reqs:
			var alone *request
			if r.deferred {
				alone = r
			} else {
				group = append(group[:0], r)
			fill:
				for len(group) < maxGroupRequests {
					select {
					case r := <-s.reqs:
						if r.deferred {
							alone = r
							break fill
						}
						group = append(group, r)
					default:
						break fill
					}
				}
				s.process(group)
				clear(group)
			}
			if alone != nil {
				s.processDeferred(alone)
			}
		}
	}
}

// drain answers everything still queued with stopErr. No request can be
// queued any more: Close set closed under closeMu, Release the role under
// host, before closing stop.
func (s *shard) drain() {
	for {
		select {
		case r := <-s.reqs:
			r.done <- response{err: s.stopErr}
		default:
			return
		}
	}
}

// pending is one request of a group and its decided answer.
type pending struct {
	r       *request
	results []diskless.CommitBatchResult
	err     error
	// cache marks a new commit answer to remember once durable.
	cache bool
	// groupRecs are the records of a group request, reply its answer.
	groupRecs []group.Record
	reply     func(error)
	// txnRecs are the records of a transaction request.
	txnRecs []*txn.StateRecord
}

// process decides a group, appends its records with one Append (one
// fsync), publishes the new state and answers. A failed append answers
// every request with the error and rebuilds the state from the log.
func (s *shard) process(batch []*request) {
	ps := make([]pending, len(batch))
	var (
		recs    []records.Record
		touched []*partition
		catalog bool
		failure error
	)
	cat := s.c.catalog.Load()
	known := func(id diskless.TopicID, p int32) *kerr.Error {
		t := cat.byID[id]
		if t == nil || p < 0 || p >= t.Partitions {
			return kerr.UnknownTopicOrPartition
		}
		// A topic DISABLING or DISABLED takes no commit (SPEC §10).
		err, _ := t.ProduceError()
		return err
	}

	s.mu.Lock()
	st := s.mu.st
	releases, forgets := st.releases, st.forgets
	inGroup := make(map[string]int) // object key → index in ps, this group
	for i, r := range batch {
		p := &ps[i]
		p.r = r
		if s.mu.failed != nil {
			p.err = s.failedError()
			continue
		}
		if failure != nil {
			continue // answered below
		}
		if err := r.ctx.Err(); err != nil {
			p.err = err
			continue
		}
		if r.commit != nil {
			s.decideCommit(st, p, inGroup, i, ps, known, &recs, &touched)
			continue
		}
		if r.group != nil {
			p.groupRecs, p.reply = r.group(s.groups, s.c.cfg.Now())
			continue
		}
		if r.txn != nil {
			p.txnRecs, p.reply = r.txn(s.txns, s.c.cfg.Now().UnixMilli())
			for _, rec := range p.txnRecs {
				// Every record carries its writer's coordinator epoch
				// (DESIGN §Transactions, the coordinator epoch).
				rec.CoordinatorEpoch = s.txns.Epoch()
				st.txns.Apply(rec)
			}
			continue
		}
		built, err := r.build(st)
		if err != nil {
			p.err = err
			continue
		}
		if err := s.applyAdmin(st, built, &recs, &touched, &catalog); err != nil {
			// The state may be partly changed: treat as a failed write.
			failure = err
			continue
		}
	}
	s.mu.Unlock()

	bodies := records.Encode(recs)
	for i := range ps {
		for _, rec := range ps[i].groupRecs {
			bodies = append(bodies, group.AppendRecord(nil, rec))
		}
		for _, rec := range ps[i].txnRecs {
			bodies = append(bodies, txn.AppendRecord(nil, rec))
		}
	}
	if failure == nil && len(bodies) == 0 && answersFromState(ps) {
		// Nothing to write: every answer comes from the state (a
		// duplicate, a sequence error, a commit replayed, a group's
		// offsets), so the log must confirm it is current first (the
		// read-index rule, confirm.go). A group that writes needs no
		// confirmation: its Append counts only while this shard's epoch
		// is in force.
		if err := s.confirm(context.Background(), s.log); err != nil {
			for i := range ps {
				if ps[i].err == nil {
					ps[i].results, ps[i].err = nil, fmt.Errorf("coordinator: shard %d: %w", s.id, err)
				}
			}
			s.answer(ps)
			return
		}
	}
	if failure == nil && len(bodies) > 0 {
		if failure = s.log.Append(context.Background(), bodies); errors.Is(failure, metalog.ErrFenced) {
			failure = s.fence(failure)
		} else if failure != nil {
			s.c.logger.Error("coordinator: metadata log append failed; rebuilding shard state from the log",
				"shard", s.id, "records", len(bodies), "err", failure)
		} else {
			s.logNext += int64(len(bodies))
			s.bytesSince += bodiesSize(bodies)
		}
	}
	if failure != nil {
		for i := range ps {
			if ps[i].err == nil {
				ps[i].results, ps[i].err = nil, fmt.Errorf("coordinator: shard %d: %w", s.id, failure)
			}
		}
		if !errors.Is(failure, diskless.ErrShardFenced) {
			s.rebuild()
		}
		s.answer(ps)
		return
	}

	s.mu.Lock()
	for i := range ps {
		for _, rec := range ps[i].groupRecs {
			s.groups.ApplyRecord(rec)
		}
	}
	for _, p := range touched {
		p.visible = true
		p.visHWM = p.hwm
		p.visLogStart = p.logStart
		p.visLSO = p.lso()
	}
	s.mu.Unlock()
	s.c.stats.FilesReleased.Add(st.releases - releases)
	s.c.stats.FilesForgotten.Add(st.forgets - forgets)
	if catalog && s.id == 0 {
		s.c.publishCatalog(st)
	}
	for i := range ps {
		if ps[i].cache {
			s.recent.add(ps[i].r.commit, ps[i].results)
		}
	}
	if len(touched) > 0 {
		s.c.notify()
	}
	s.answer(ps)
	s.maybeSnapshot()
}

// processDeferred processes a deferred request alone: build its records
// against the durable state, append them, and only then apply and publish
// them. A failed append answers the error and rebuilds the state (a
// prefix of the records may be durable).
func (s *shard) processDeferred(r *request) {
	s.mu.RLock()
	failed := s.mu.failed != nil
	var err error
	if failed {
		err = s.failedError()
	}
	st := s.mu.st
	s.mu.RUnlock()
	if err == nil {
		err = r.ctx.Err()
	}
	var recs []records.Record
	if err == nil {
		// Only the driver changes st, so reading it here needs no lock.
		recs, err = r.build(st)
	}
	if !failed && r.ctx.Err() == nil && len(recs) == 0 {
		// Answered from the state without a write (nothing to move, or
		// the request refused by it): confirm it first (confirm.go).
		if cerr := s.confirm(context.Background(), s.log); cerr != nil {
			err = fmt.Errorf("coordinator: shard %d: %w", s.id, cerr)
		}
	}
	if err != nil || len(recs) == 0 {
		r.done <- response{err: err}
		return
	}
	bodies := records.Encode(recs)
	if err := s.log.Append(context.Background(), bodies); errors.Is(err, metalog.ErrFenced) {
		r.done <- response{err: fmt.Errorf("coordinator: shard %d: %w", s.id, s.fence(err))}
		return
	} else if err != nil {
		s.c.logger.Error("coordinator: metadata log append failed; rebuilding shard state from the log",
			"shard", s.id, "records", len(bodies), "err", err)
		s.rebuild()
		r.done <- response{err: fmt.Errorf("coordinator: shard %d: %w", s.id, err)}
		return
	}
	s.logNext += int64(len(bodies))
	s.bytesSince += bodiesSize(bodies)
	s.mu.Lock()
	releases := st.releases
	for _, rec := range recs {
		if err = st.apply(rec); err != nil {
			break
		}
		if rd, ok := rec.(*records.RecordsDeleted); ok {
			if p := st.partitions[diskless.TopicPartition{TopicID: rd.TopicID, Partition: rd.Partition}]; p != nil {
				p.visLogStart = p.logStart
				p.visLSO = p.lso()
			}
		}
	}
	s.mu.Unlock()
	if err != nil {
		// The builder checked what apply checks: a bug. The log holds the
		// record, so the rebuild will most likely fail the shard, which is
		// the honest outcome.
		err = fmt.Errorf("coordinator: shard %d: built a record its state refuses: %w", s.id, err)
		s.c.logger.Error("coordinator: applying a durable record failed", "shard", s.id, "err", err)
		s.rebuild()
		r.done <- response{err: err}
		return
	}
	s.c.stats.FilesReleased.Add(st.releases - releases)
	r.done <- response{}
	s.maybeSnapshot()
}

// answersFromState reports whether a group that writes nothing answers a
// request from the state: any request not already answered with an error.
func answersFromState(ps []pending) bool {
	for i := range ps {
		if ps[i].err == nil {
			return true
		}
	}
	return false
}

// decideCommit decides one CommitFile of a group.
func (s *shard) decideCommit(st *state, p *pending, inGroup map[string]int, i int, ps []pending,
	known func(diskless.TopicID, int32) *kerr.Error, recs *[]records.Record, touched *[]*partition) {
	req := p.r.commit
	if j, ok := inGroup[req.ObjectKey]; ok && ps[j].err == nil && sameBatches(ps[j].r.commit, req) {
		// The same file twice in one group: answer as the first.
		p.results = cloneResults(ps[j].results)
		return
	}
	if res, ok := s.recent.get(req); ok {
		p.results = res
		return
	}
	if fi, ok := st.fileByKey[req.ObjectKey]; ok {
		p.results = st.replayCommit(req, fi)
		return
	}
	results, rec, parts := st.commitFile(req, s.c.nowMs(), known)
	p.results, p.cache = results, true
	inGroup[req.ObjectKey] = i
	if rec == nil {
		return
	}
	*recs = append(*recs, rec)
	*touched = append(*touched, parts...)
}

// applyAdmin applies the records of an admin change. Builders check what
// apply checks, so an error here is a builder bug; the state may then be
// partly changed, and the caller rebuilds it.
func (s *shard) applyAdmin(st *state, built []records.Record, recs *[]records.Record, touched *[]*partition, catalog *bool) error {
	for _, rec := range built {
		if err := st.apply(rec); err != nil {
			return fmt.Errorf("coordinator: shard %d: built a record its state refuses: %w", s.id, err)
		}
		*recs = append(*recs, rec)
		switch r := rec.(type) {
		case *records.PartitionCreated:
			*touched = append(*touched, st.partitions[diskless.TopicPartition{TopicID: r.TopicID, Partition: r.Partition}])
		case *records.RecordsDeleted:
			// Unlike new batches, which readers cannot see before they
			// are published, a trim shows in the index at once: until
			// the append returns, a FindBatches between the published
			// and the new log start gets the batches from the new one.
			// DeleteRecords and retention therefore write 103 as
			// deferred requests (processDeferred), applied after the
			// append; only tests build it as a plain admin change.
			*touched = append(*touched, st.partitions[diskless.TopicPartition{TopicID: r.TopicID, Partition: r.Partition}])
		case *records.TopicConfig, *records.TopicDeleted, *records.TopicDisablement:
			*catalog = true
		}
	}
	return nil
}

// failedError is the error a failed shard answers with; s.mu must be held.
// A fenced shard's wraps ErrShardFenced and NOT_LEADER_OR_FOLLOWER, any
// other's ErrShardFailed and KAFKA_STORAGE_ERROR (failedCode).
func (s *shard) failedError() error {
	if errors.Is(s.mu.failed, metalog.ErrFenced) {
		return fmt.Errorf("%w (shard %d, %w): %w", diskless.ErrShardFenced, s.id, kerr.NotLeaderForPartition, s.mu.failed)
	}
	return fmt.Errorf("%w %d: %w (%w)", diskless.ErrShardFailed, s.id, kerr.KafkaStorageError, s.mu.failed)
}

// failedCode is the Kafka error a failed shard's partitions answer with:
// NOT_LEADER_OR_FOLLOWER when it was fenced (the partitions are served
// elsewhere now: clients refresh their metadata and retry), else
// KAFKA_STORAGE_ERROR. s.mu must be held.
func (s *shard) failedCode() *kerr.Error {
	if errors.Is(s.mu.failed, metalog.ErrFenced) {
		return kerr.NotLeaderForPartition
	}
	return kerr.KafkaStorageError
}

// fence stops the shard for good after its log reported metalog.ErrFenced
// (cause): another sidecar took the log over, so the state here may be
// behind the log and nothing may be decided from it again — no rebuild
// (the handle stays fenced: a replay fails too). It returns the error the requests
// that found out are answered with (failedError's).
func (s *shard) fence(cause error) error {
	s.mu.Lock()
	first := s.mu.failed == nil
	if first {
		s.mu.failed = cause
	}
	err := s.failedError()
	s.mu.Unlock()
	if first {
		s.c.logger.Error("coordinator: shard fenced: another sidecar took its metadata log over; its partitions answer NOT_LEADER_OR_FOLLOWER from now on",
			"shard", s.id, "err", cause)
	}
	return err
}

// bodiesSize is the bytes of bodies.
func bodiesSize(bodies [][]byte) int64 {
	var n int64
	for _, b := range bodies {
		n += int64(len(b))
	}
	return n
}

func (s *shard) answer(ps []pending) {
	for i := range ps {
		if ps[i].reply != nil {
			ps[i].reply(ps[i].err)
		}
		ps[i].r.done <- response{results: ps[i].results, err: ps[i].err}
	}
}

// loadAttempts bounds how often load reads the snapshot again after the
// records after it were truncated away meanwhile (metalog.ErrTruncated:
// with the Kafka log, the previous owner snapshotted and truncated while
// this one started; its next truncation finds this one's claim and fails,
// so one more attempt normally suffices).
const loadAttempts = 4

// errRefused marks (wrapped) a load that failed because this shard could
// not decode or apply what its log holds — a snapshot or a record —
// rather than because the log could not be read: reading again gives
// the same bytes, so it is not retried.
var errRefused = errors.New("coordinator: the shard's state refuses its log's contents")

// Backoff of a rebuild's attempts after one failed for a reason that may
// pass (lasting: retryableLoad), as the followers' retries.
const (
	rebuildBackoffMin = 50 * time.Millisecond
	rebuildBackoffMax = 5 * time.Second
)

// retryableLoad reports whether a load that failed with err may succeed
// if tried again: anything but a log that is corrupt (metalog.ErrCorrupt),
// taken over (ErrFenced) or closed, and a snapshot or record this shard
// refuses (errRefused). An IO error — with the Kafka log a broker
// restarting or closing the connection, no leader, a fetch or ListOffsets
// failing, InitProducerId for the claim failing — and records truncated
// under the read (ErrTruncated) pass by themselves.
func retryableLoad(err error) bool {
	return !errors.Is(err, metalog.ErrCorrupt) && !errors.Is(err, metalog.ErrFenced) &&
		!errors.Is(err, metalog.ErrClosed) && !errors.Is(err, errRefused)
}

// load replays the log (from its latest snapshot, if any) into a fresh
// state, fully published.
func (s *shard) load(ctx context.Context) (*state, error) {
	for attempt := 1; ; attempt++ {
		st, err := s.loadOnce(ctx)
		if !errors.Is(err, metalog.ErrTruncated) || attempt == loadAttempts || ctx.Err() != nil {
			return st, err
		}
		s.c.logger.Warn("coordinator: the metadata log was truncated after the snapshot read; reading the latest snapshot again",
			"shard", s.id, "attempt", attempt, "err", err)
	}
}

func (s *shard) loadOnce(ctx context.Context) (*state, error) {
	st := newState(s.id, s.c.cfg.ProducerIDExpirationMs, s.c.logger)
	from := int64(0)
	idx, data, err := s.log.ReadSnapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("coordinator: shard %d: load snapshot: %w", s.id, err)
	}
	if data != nil {
		if err := st.decodeSnapshot(data); err != nil {
			return nil, fmt.Errorf("coordinator: shard %d: snapshot at record %d: %w: %w", s.id, idx, errRefused, err)
		}
		from = idx
	}
	var replayed int64
	next, err := s.log.Replay(ctx, from, func(index int64, body []byte) error {
		replayed += int64(len(body))
		d, err := decodeBody(body)
		if err == nil {
			err = d.applyTo(st)
		}
		if err != nil {
			return fmt.Errorf("%w: %w", errRefused, err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("coordinator: shard %d: replay: %w", s.id, err)
	}
	for _, p := range st.partitions {
		p.visible, p.visHWM, p.visLogStart, p.visLSO = true, p.hwm, p.logStart, p.lso()
	}
	s.logNext = next
	s.snapshotAt = from
	s.bytesSince = replayed
	return st, nil
}

// rebuild replaces the state with one replayed from the log after a failed
// append, so memory never holds what is not durable. If that fails, the
// shard fails: its requests are answered with the failure
// (failedError) — for good when the log is corrupt, taken over or holds
// what the state refuses; otherwise (retryableLoad: the log's storage
// unreachable for a while, as a Kafka broker restarting) the driver tries
// again after a backoff (rebuildTimer), warning once per shard per
// minute, until a rebuild succeeds — the shard then serves again — or the
// shard stops (Release, Close). Its consumer groups' requests get
// ErrShardLoading throughout.
func (s *shard) rebuild() {
	if s.rebuildTimer != nil {
		s.rebuildTimer.Stop()
		s.rebuildTimer = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The coordinator's Close or Release ends the rebuild (the shard then
	// fails; it is no longer served anyway): a log that cannot be reached
	// must not hold up the shutdown.
	stop := s.stopChan()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	s.rebuilding.Store(true)
	// Replay must not run while a snapshot is written (metalog.Log).
	s.waitSnapshot()
	st, err := s.load(ctx)
	if err != nil {
		stopped := false
		select {
		case <-stop:
			stopped = true
		default:
		}
		retry := !stopped && retryableLoad(err)
		s.mu.Lock()
		if !errors.Is(s.mu.failed, metalog.ErrFenced) {
			s.mu.failed = err
		}
		s.mu.Unlock()
		if !retry {
			s.rebuilding.Store(false)
			s.rebuildAttempts = 0
			s.c.logger.Error("coordinator: shard failed: cannot rebuild state from the metadata log",
				"shard", s.id, "err", err)
			return
		}
		s.rebuildAttempts++
		s.rebuildTimer = time.NewTimer(backoff.Wait(rebuildBackoffMin, rebuildBackoffMax, s.rebuildAttempts))
		s.c.retryLog.Log(ctx, slog.LevelWarn, fmt.Sprintf("shard-%d", s.id),
			"coordinator: rebuilding a shard's state from the metadata log failed; its requests fail meanwhile; retrying",
			slog.Int("attempts", s.rebuildAttempts), slog.Any("err", err))
		return
	}
	s.mu.Lock()
	s.mu.st, s.mu.failed = st, nil
	s.mu.Unlock()
	s.groups.ReplaceOffsets(st.groups)
	s.txns.Replace(st.txns)
	s.rebuilding.Store(false)
	if s.rebuildAttempts > 0 {
		s.c.logger.Info("coordinator: rebuilt a shard's state from the metadata log; serving again",
			"shard", s.id, "failed_attempts", s.rebuildAttempts)
		s.rebuildAttempts = 0
	}
	if s.id == 0 {
		s.c.publishCatalog(st)
	}
	// Records of the failed append may have been durable after all.
	s.c.notify()
}

// stopRebuildTimer stops a pending rebuild attempt (the driver exits).
func (s *shard) stopRebuildTimer() {
	if s.rebuildTimer != nil {
		s.rebuildTimer.Stop()
		s.rebuildTimer = nil
	}
	s.rebuildAttempts = 0
	s.rebuilding.Store(false)
}

// maybeSnapshot starts a snapshot once enough records were appended since
// the last one started. Only the log's PrepareSnapshot (the file log: a
// new segment) and freezing the state run here, on the commit path;
// encoding, writing and truncating the log before it run on the shard's
// snapshot goroutine, of which there is at most one: while it runs, later
// snapshots wait for the next call after it finished.
func (s *shard) maybeSnapshot() {
	every := s.c.cfg.SnapshotIntervalRecords
	if every < 0 {
		return
	}
	if s.snapshotDone != nil {
		select {
		case err := <-s.snapshotDone:
			s.snapshotFinished(err)
		default:
			return
		}
	}
	bytesEvery := s.c.cfg.SnapshotIntervalBytes
	if s.logNext-s.snapshotAt < every && (bytesEvery < 0 || s.bytesSince < bytesEvery) {
		return
	}
	index := s.logNext
	s.snapshotAt, s.bytesSince = index, 0 // on failure, retry after another interval
	if err := s.log.PrepareSnapshot(context.Background(), index); err != nil {
		if errors.Is(err, metalog.ErrFenced) {
			s.fence(err)
			return
		}
		// The records are intact, but the log must be replayed before the
		// next append (metalog.Log): rebuild now rather than fail the
		// next commit group.
		s.c.logger.Warn("coordinator: starting a snapshot failed; rebuilding shard state from the log", "shard", s.id, "index", index, "err", err)
		s.rebuild()
		return
	}
	s.mu.RLock()
	fz := s.mu.st.freeze()
	s.mu.RUnlock()
	done := make(chan error, 1)
	s.snapshotDone = done
	go func() {
		ctx := context.Background()
		err := s.log.WriteSnapshot(ctx, index, fz.appendTo(nil))
		if err == nil {
			err = s.log.TruncateBefore(ctx, index)
		}
		done <- err
	}()
}

// waitSnapshot waits for the snapshot being written, if any.
func (s *shard) waitSnapshot() {
	if s.snapshotDone != nil {
		s.snapshotFinished(<-s.snapshotDone)
	}
}

func (s *shard) snapshotFinished(err error) {
	s.snapshotDone = nil
	if err != nil {
		// The log is intact; only replay gets longer. The next snapshot
		// comes after another interval.
		s.c.logger.Warn("coordinator: writing snapshot failed", "shard", s.id, "err", err)
	}
}

// sameBatches reports whether two commits of one key carry the same
// batches (by partition and byte offset).
func sameBatches(a, b *diskless.CommitFileRequest) bool {
	if len(a.Batches) != len(b.Batches) {
		return false
	}
	for i := range a.Batches {
		x, y := &a.Batches[i], &b.Batches[i]
		if x.TopicID != y.TopicID || x.Partition != y.Partition || x.ByteOffset != y.ByteOffset {
			return false
		}
	}
	return true
}

func cloneResults(r []diskless.CommitBatchResult) []diskless.CommitBatchResult {
	return append([]diskless.CommitBatchResult(nil), r...)
}
