package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/group"
	"github.com/diskless-sidecar/sidecar/internal/backoff"
	"github.com/diskless-sidecar/sidecar/metalog"
	"github.com/diskless-sidecar/sidecar/txn"
)

// Shard placement (DESIGN §Shard placement). Alone, a coordinator hosts
// every shard from Open to Close. With Config.OpenFollower set it is one
// sidecar of a cluster: each shard starts as a read replica — its state
// applied from a metalog.Follower of the shard's log, serving
// FindBatches and the catalog and waking long-polls, deciding nothing —
// and Host makes it the shard's owner: the writer's first Replay takes
// the log over (fencing the previous owner) from where the replica got
// to, then the driver runs. Release stops the driver and goes back to
// following. Requests to a shard not hosted get diskless.ErrNotCoordinator,
// to one being taken over diskless.ErrShardLoading; the caller (the
// router, another sidecar over the RPCs) resends to the owner.
//
// Lock order: Coordinator.closeMu → shard.host → shard.mu. host is held
// for writing only to flip the role, never across IO; submit holds it for
// reading while queueing, so no request enters a driver that stopped.

// role is a shard's part on this sidecar.
type role int8

const (
	// roleReplica: the state follows the log another sidecar writes (or
	// nobody does yet); requests are refused.
	roleReplica role = iota
	// roleLoading: Host is taking the log over.
	roleLoading
	// roleHosted: the driver runs; this sidecar owns the shard.
	roleHosted
)

// replica is a shard's follower loop.
type replica struct {
	f      metalog.Follower
	cancel context.CancelFunc
	done   chan struct{}
	// next is the index after the last record applied; valid once done
	// is closed. It is −1 while the state must be loaded whole (a load
	// under way or failed: the loop's reload mode, after records failed
	// to apply and left the state partly changed), so Host, taking the
	// shard over then, loads it whole instead of catching up from an
	// index the state no longer matches.
	next int64
	// snapAt is the index of the snapshot the state was loaded from.
	snapAt int64
	// failing is set from the loop's first failed attempt (a catch-up
	// read, Wait or reload) to its next success: since when the loop has
	// failed without a success in between, the last attempt's error, and
	// whether the loop is in reload mode (retrying).
	failing atomic.Pointer[replicaFailure]
	// syncs is what sync asks the loop for (guarded by its mutex).
	syncs struct {
		sync.Mutex
		// waiters are the sync calls waiting for a Replay that starts
		// after they asked; each is closed once one applied.
		waiters []chan struct{}
		// wake ends the loop's Wait or pause in progress (nil when none).
		wake context.CancelFunc
	}
}

// replicaFailure is a replica loop's run of failed attempts.
type replicaFailure struct {
	since time.Time // the first failed attempt's end (Config.Now)
	err   error     // the last failed attempt's error
	// reload: the last attempt was a whole load (the state must be
	// loaded whole: replica.next is −1), reported at once.
	reload bool
}

// replicaRetryingAfter is how long a read replica's reads must have
// failed without a success in between before ShardHealth reports it
// ShardRetrying (and /readyz answers 503): long enough to outlast the
// Kafka leader change after a broker died, which fails every sidecar's
// replicas at once and which they only wait out (DESIGN §Read replicas
// gives the argument and the timings). A whole reload that fails is
// reported at once: the state is then not the log's (replica.next).
const replicaRetryingAfter = 15 * time.Second

// clustered reports whether shards are placed (Config.OpenFollower).
func (c *Coordinator) clustered() bool { return c.cfg.OpenFollower != nil }

// roleOf returns s's role.
func (s *shard) roleOf() role {
	s.host.RLock()
	defer s.host.RUnlock()
	return s.host.role
}

// hosted reports whether this sidecar owns s.
func (s *shard) hosted() bool { return s.roleOf() == roleHosted }

// roleError is the error a request to a shard not hosted here gets.
func (s *shard) roleError(r role) error {
	if r == roleLoading {
		return fmt.Errorf("%w: shard %d", diskless.ErrShardLoading, s.id)
	}
	return fmt.Errorf("%w: shard %d", diskless.ErrNotCoordinator, s.id)
}

// owns reports whether the background jobs of s run here: alone, for
// every shard; in a cluster, for the hosted ones.
func (c *Coordinator) owns(s *shard) bool { return !c.clustered() || s.hosted() }

// Hosted reports whether this coordinator owns shard (its driver runs).
func (c *Coordinator) Hosted(shard int32) bool {
	return shard >= 0 && shard < c.cfg.NumShards && c.shards[shard].hosted()
}

// Host makes this coordinator the owner of shard: it stops following the
// shard's log, takes the log over with the writer's Replay from where the
// replica got to (Config.OpenLog; the previous owner is fenced), starts
// the driver and the shard's consumer groups, and from then on answers
// the shard's requests. Requests meanwhile get diskless.ErrShardLoading.
// Hosting a shard hosted already does nothing. On failure the shard is
// followed again and the error returned (the caller retries). Only with
// Config.OpenFollower: alone, every shard is hosted from Open.
func (c *Coordinator) Host(ctx context.Context, shard int32) error {
	if !c.clustered() {
		return nil
	}
	s, err := c.shardFor(shard)
	if err != nil {
		return err
	}
	c.placeMu.Lock()
	defer c.placeMu.Unlock()
	c.closeMu.RLock()
	closed := c.closed
	c.closeMu.RUnlock()
	if closed {
		return diskless.ErrClosed
	}
	s.host.Lock()
	if s.host.role != roleReplica {
		s.host.Unlock()
		return nil
	}
	s.host.role = roleLoading
	rep := s.host.rep
	s.host.rep = nil
	// Taken over from here: a follow that failed before no longer says
	// why the shard has no replica (a later Release, or this Host
	// failing, follows it again and sets its own).
	s.host.followErr = nil
	s.host.Unlock()

	from := int64(-1)
	if rep != nil {
		rep.stop()
		from = rep.next
	}
	at, err := s.takeOver(ctx, from, rep)
	if err != nil {
		c.retryLog.Log(context.Background(), slog.LevelWarn, fmt.Sprintf("shard-%d", s.id), "coordinator: taking a shard over failed; following it again",
			slog.Any("err", err))
		s.host.Lock()
		s.host.role = roleReplica
		s.host.Unlock()
		if at != from {
			// The takeover's replay moved the state on: follow from
			// there, not from the replica's index again.
			rep = &replica{snapAt: s.snapshotAt}
		}
		if ferr := s.follow(at, rep, false); ferr != nil {
			c.logger.Error("coordinator: following a shard failed", "shard", s.id, "err", ferr)
		}
		return err
	}
	c.logger.Info("coordinator: hosting shard", "shard", s.id, "next_record", s.logNext)
	return nil
}

// takeOver opens the writer's log, replays it from from (−1: a full load
// from the snapshot) onto the replica's state, reads the catalog current
// (syncCatalog) and starts the driver. On failure it returns the index
// after the last record the state holds: from, unless the replay moved
// it on.
func (s *shard) takeOver(ctx context.Context, from int64, rep *replica) (at int64, err error) {
	c := s.c
	at = from
	l, err := c.cfg.OpenLog(s.id)
	if err != nil {
		return at, fmt.Errorf("coordinator: open shard %d: %w", s.id, err)
	}
	s.log = l
	s.mu.RLock()
	failed := s.mu.failed
	s.mu.RUnlock()
	if from >= 0 && failed == nil {
		err = s.catchUp(ctx, from)
		if err == nil {
			at = s.logNext
			if rep != nil {
				s.snapshotAt = rep.snapAt
			}
		}
	}
	if from < 0 || failed != nil || err != nil {
		if err != nil {
			c.logger.Warn("coordinator: replaying from the replica's state failed; loading the shard whole", "shard", s.id, "err", err)
		}
		var st *state
		if st, err = s.load(ctx); err == nil {
			s.mu.Lock()
			s.mu.st, s.mu.failed = st, nil
			s.mu.Unlock()
			at = s.logNext
		}
	}
	if err != nil {
		l.Close()
		return at, err
	}
	if s.id != 0 {
		// The shard's commits are decided against this sidecar's catalog
		// (shard.process); the log is ours now (the previous owner is
		// fenced), so every commit of it from here on must see each
		// catalog change made before — a disablement above all, whose
		// driver may have counted every sidecar confirmed already (SPEC
		// §10, DESIGN §Decisions: Disablement).
		if err := c.syncCatalog(ctx); err != nil {
			l.Close()
			return at, fmt.Errorf("coordinator: shard %d: reading the catalog current before serving: %w", s.id, err)
		}
	}
	if err := s.openGroups(); err != nil {
		l.Close()
		return at, err
	}
	// The groups' members were another sidecar's soft state (DESIGN
	// §Consumer groups, across a shard move): take them back as they come.
	s.groups.AdoptMembers(c.cfg.Now())
	s.recent = recentCommits{}
	if s.id == 0 {
		s.mu.RLock()
		c.publishCatalog(s.mu.st)
		s.mu.RUnlock()
	}
	c.notify()
	s.host.Lock()
	s.reqs = make(chan *request, shardQueueDepth)
	s.stop = make(chan struct{})
	s.done = make(chan struct{})
	s.stopErr = diskless.ErrNotCoordinator
	s.host.role = roleHosted
	s.host.Unlock()
	go s.run()
	return at, nil
}

// syncCatalog returns once this sidecar's catalog holds every record of
// shard 0's log that was durable when it was called: with shard 0 hosted
// here, once its log confirmed no other sidecar took it over (the
// catalog is then the writer's state: shard.confirm); else once its
// replica applied a Replay that started after the call (replica.sync).
// The caller holds placeMu, so shard 0's role cannot change meanwhile.
func (c *Coordinator) syncCatalog(ctx context.Context) error {
	s0 := c.shards[0]
	s0.host.RLock()
	r, rep, l := s0.host.role, s0.host.rep, s0.log
	s0.host.RUnlock()
	switch {
	case r == roleHosted:
		return s0.confirm(ctx, l)
	case r == roleReplica && rep != nil:
		return rep.sync(ctx)
	}
	return errors.New("coordinator: shard 0 is neither hosted nor followed here")
}

// catchUp is the writer's first Replay (the takeover) from from, applying
// the records the replica had not yet onto its state.
func (s *shard) catchUp(ctx context.Context, from int64) error {
	var recs []decoded
	next, err := s.log.Replay(ctx, from, func(index int64, body []byte) error {
		d, err := decodeBody(body)
		if err != nil {
			return err
		}
		recs = append(recs, d)
		return nil
	})
	if err != nil {
		return fmt.Errorf("coordinator: shard %d: replay: %w", s.id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := applyAll(s.mu.st, recs); err != nil {
		s.mu.failed = err
		return err
	}
	publishAll(s.mu.st)
	s.logNext = next
	return nil
}

// Release stops owning shard: its driver stops (queued requests get
// diskless.ErrNotCoordinator, the consumer groups' parked calls end),
// the writer's log is closed and the shard is followed again from where
// it got to. Releasing a shard not hosted does nothing. Only with
// Config.OpenFollower.
func (c *Coordinator) Release(shard int32) error {
	if !c.clustered() {
		return nil
	}
	s, err := c.shardFor(shard)
	if err != nil {
		return err
	}
	c.placeMu.Lock()
	defer c.placeMu.Unlock()
	c.closeMu.RLock()
	closed := c.closed
	c.closeMu.RUnlock()
	if closed {
		return diskless.ErrClosed
	}
	s.host.Lock()
	if s.host.role != roleHosted {
		s.host.Unlock()
		return nil
	}
	s.host.role = roleReplica
	close(s.stop)
	s.host.Unlock()
	<-s.done
	s.log.Close()
	s.groups = nil
	c.logger.Info("coordinator: released shard", "shard", s.id, "next_record", s.logNext)
	return s.follow(s.logNext, &replica{snapAt: s.snapshotAt}, false)
}

// follow starts following s's log from from (−1, or after a failure: a
// full load from the latest snapshot). With mustLoad (Open) a full load
// that fails is follow's error; otherwise (Release, a takeover that
// failed) the replica's loop retries it after a backoff, so a log that
// cannot be read for a while (a Kafka broker restarting) does not leave
// the shard unfollowed.
func (s *shard) follow(from int64, prev *replica, mustLoad bool) (err error) {
	c := s.c
	defer func() {
		s.host.Lock()
		s.host.followErr = err
		s.host.Unlock()
	}()
	f, err := c.cfg.OpenFollower(s.id)
	if err != nil {
		return fmt.Errorf("coordinator: follow shard %d: %w", s.id, err)
	}
	s.mu.RLock()
	failed := s.mu.failed
	s.mu.RUnlock()
	rep := &replica{f: f, done: make(chan struct{})}
	if prev != nil {
		rep.snapAt = prev.snapAt
	}
	reload := false
	if from < 0 || failed != nil {
		if err := rep.load(context.Background(), s); err != nil {
			if mustLoad || !retryableLoad(err) {
				f.Close()
				return err
			}
			c.retryLog.Log(context.Background(), slog.LevelWarn, fmt.Sprintf("shard-%d", s.id),
				"coordinator: following a shard's log failed; retrying", slog.Any("err", err))
			reload = true
			rep.failed(c.cfg.Now(), err, true)
		}
	} else {
		rep.next = from
	}
	ctx, cancel := context.WithCancel(context.Background())
	rep.cancel = cancel
	s.host.Lock()
	s.host.rep = rep
	s.host.Unlock()
	go rep.run(ctx, s, reload)
	return nil
}

// load replaces s's state with the follower's latest snapshot and every
// record after it. Until it succeeds r.next is −1 (see replica.next).
func (r *replica) load(ctx context.Context, s *shard) error {
	r.next = -1 // until the load succeeds
	st := newState(s.id, s.c.cfg.ProducerIDExpirationMs, s.c.logger)
	idx, data, err := r.f.ReadSnapshot(ctx)
	if err != nil {
		return fmt.Errorf("coordinator: shard %d: follower snapshot: %w", s.id, err)
	}
	if data != nil {
		if err := st.decodeSnapshot(data); err != nil {
			return fmt.Errorf("coordinator: shard %d: snapshot at record %d: %w: %w", s.id, idx, errRefused, err)
		}
	}
	next, err := r.f.Replay(ctx, idx, func(_ int64, body []byte) error {
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
		return fmt.Errorf("coordinator: shard %d: follow: %w", s.id, err)
	}
	publishAll(st)
	s.mu.Lock()
	s.mu.st, s.mu.failed = st, nil
	s.mu.Unlock()
	r.next, r.snapAt = next, idx
	if s.id == 0 {
		s.c.publishCatalog(st)
	}
	s.c.notify()
	return nil
}

// run applies the follower's records as they become durable: wait for a
// group, read everything there is (decoded outside the shard's lock),
// apply it under the lock, publish, wake long-polls. A follower that fell
// behind a truncation loads the snapshot again; with reload set it loads
// it first (follow's load failed). Failures are retried after a backoff,
// a load until it succeeds.
func (r *replica) run(ctx context.Context, s *shard, reload bool) {
	defer close(r.done)
	defer r.f.Close()
	attempt := 0
	for ctx.Err() == nil {
		var err error
		if reload {
			err = r.load(ctx, s)
		} else {
			err = r.step(ctx, s)
		}
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return
		case errors.Is(err, errReload):
			reload = true
		case errors.Is(err, metalog.ErrTruncated) && !reload:
			if err = r.load(ctx, s); err != nil {
				reload = true
			}
		}
		if err == nil {
			attempt, reload = 0, false
			r.failing.Store(nil)
			continue
		}
		now := s.c.cfg.Now()
		r.failed(now, err, reload)
		if ctx.Err() == nil {
			if errors.Is(err, errWaitFailed) {
				// The Wait retried its reads for a while before it failed
				// (Follower.Wait): a backoff growing on top of it would,
				// after a long outage, keep the replica asleep for up to
				// the cap once the log is back.
				attempt = 1
			} else {
				attempt++
			}
			r.logFailure(ctx, s, now, err)
			if r.pause(ctx, backoff.Wait(50*time.Millisecond, 5*time.Second, attempt)) != nil {
				return
			}
		}
	}
}

// logFailure logs the loop's attempt that failed at now with err. A
// catch-up read that failed is logged at Info while the loop has failed
// for less than replicaRetryingAfter — the Kafka leader change after a
// broker dies, which every sidecar's replicas of every shard wait out —
// and at Warn from then on, when ShardHealth reports the shard retrying;
// a reload that failed (the state not the log's) at Warn at once. The two
// messages differ, so the first Warn is not counted as a repeat of the
// Info lines (ratelog keys on the message).
func (r *replica) logFailure(ctx context.Context, s *shard, now time.Time, err error) {
	subject := fmt.Sprintf("shard-%d", s.id)
	if r.retrying(now) != nil {
		s.c.retryLog.Log(ctx, slog.LevelWarn, subject, "coordinator: following a shard's log failed; retrying", slog.Any("err", err))
		return
	}
	s.c.retryLog.Log(ctx, slog.LevelInfo, subject, "coordinator: reading a shard's log failed; retrying", slog.Any("err", err))
}

// pause sleeps d between the loop's attempts; a sync called during it
// ends it (the sync waits for a Replay, and a takeover syncing the
// catalog's replica holds the placement lock). A sync still waiting from
// before, its attempt failed, does not, or a failing loop would retry
// without pausing. Errors: ctx's.
func (r *replica) pause(ctx context.Context, d time.Duration) error {
	r.syncs.Lock()
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.syncs.wake = cancel
	r.syncs.Unlock()
	backoff.Sleep(pctx, d)
	r.syncs.Lock()
	r.syncs.wake = nil
	r.syncs.Unlock()
	return ctx.Err()
}

// failed records an attempt of the loop that failed at now with err (a
// whole load when reload): the run of failures goes on since its first.
func (r *replica) failed(now time.Time, err error, reload bool) {
	f := &replicaFailure{since: now, err: err, reload: reload}
	if prev := r.failing.Load(); prev != nil {
		f.since = prev.since
	}
	r.failing.Store(f)
}

// retrying returns the last failed attempt's error while ShardHealth
// reports the replica ShardRetrying at now: at once when that attempt
// was a whole load (the state is not the log's), else once the loop has
// failed without a success for replicaRetryingAfter; nil otherwise.
func (r *replica) retrying(now time.Time) error {
	if f := r.failing.Load(); f != nil && (f.reload || now.Sub(f.since) >= replicaRetryingAfter) {
		return f.err
	}
	return nil
}

// sync returns once the replica applied every record its log held when
// sync was called (a Replay that started after the call, applied): a
// replica is a moment behind its log by design (SPEC §9), and sync is
// for the reader that must not be. It ends the loop's Wait, or its pause
// between failed attempts, in progress. Errors: ctx's; errReplicaStopped
// once the loop ended.
func (r *replica) sync(ctx context.Context) error {
	ch := make(chan struct{})
	r.syncs.Lock()
	r.syncs.waiters = append(r.syncs.waiters, ch)
	if r.syncs.wake != nil {
		r.syncs.wake()
	}
	r.syncs.Unlock()
	select {
	case <-ch:
		return nil
	case <-r.done:
		return errReplicaStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errReplicaStopped is sync's error once the replica's loop ended (the
// shard taken over here, or the coordinator closing).
var errReplicaStopped = errors.New("coordinator: the replica stopped following its log")

// takeSyncs returns the waiters of sync that asked so far, for the
// Replay about to start.
func (r *replica) takeSyncs() []chan struct{} {
	r.syncs.Lock()
	defer r.syncs.Unlock()
	w := r.syncs.waiters
	r.syncs.waiters = nil
	return w
}

// wait is the loop's Wait for the log to grow past r.next, ended early
// (nil) by a sync; it returns the syncs to answer after the next Replay.
func (r *replica) wait(ctx context.Context) ([]chan struct{}, error) {
	r.syncs.Lock()
	if len(r.syncs.waiters) > 0 {
		w := r.syncs.waiters
		r.syncs.waiters = nil
		r.syncs.Unlock()
		return w, nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.syncs.wake = cancel
	r.syncs.Unlock()
	err := r.f.Wait(wctx, r.next)
	r.syncs.Lock()
	r.syncs.wake = nil
	r.syncs.Unlock()
	if err != nil && (ctx.Err() != nil || wctx.Err() == nil) {
		return nil, fmt.Errorf("%w: %w", errWaitFailed, err)
	}
	return r.takeSyncs(), nil
}

// errWaitFailed marks (wrapped) the loop's Wait that returned a failure:
// the follower's reads kept failing for a while (Follower.Wait), so the
// failure paced itself and the loop's backoff does not grow on it.
var errWaitFailed = errors.New("coordinator: waiting for the shard's log failed")

// step waits for the log to grow past r.next (or a sync) and applies what
// is there.
func (r *replica) step(ctx context.Context, s *shard) (err error) {
	synced, err := r.wait(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err == nil {
			for _, ch := range synced {
				close(ch)
			}
			return
		}
		// Not applied: the next step's Replay answers them.
		r.syncs.Lock()
		r.syncs.waiters = append(synced, r.syncs.waiters...)
		r.syncs.Unlock()
	}()
	return r.apply(ctx, s)
}

// apply replays the log from r.next and applies what is there.
func (r *replica) apply(ctx context.Context, s *shard) error {
	var recs []decoded
	next, err := r.f.Replay(ctx, r.next, func(_ int64, body []byte) error {
		d, err := decodeBody(body)
		if err != nil {
			return err
		}
		recs = append(recs, d)
		return nil
	})
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		r.next = next
		return nil
	}
	s.mu.Lock()
	err = applyAll(s.mu.st, recs)
	if err == nil {
		publishAll(s.mu.st)
	}
	st := s.mu.st
	s.mu.Unlock()
	if err != nil {
		// The state may be partly changed: load it again whole.
		s.c.logger.Error("coordinator: applying a followed shard's records failed; loading it again", "shard", s.id, "err", err)
		if err := r.load(ctx, s); err != nil {
			return fmt.Errorf("%w: %w", errReload, err)
		}
		return nil
	}
	s.c.logger.Debug("coordinator: replica applied records", "shard", s.id, "records", len(recs), "next_record", next)
	r.next = next
	if s.id == 0 && catalogChanged(recs) {
		s.mu.RLock()
		s.c.publishCatalog(st)
		s.mu.RUnlock()
	}
	s.c.notify()
	return nil
}

// errReload marks (wrapped) a replica's step that left the state to be
// loaded again whole: its records failed to apply, and the load after
// failed too.
var errReload = errors.New("coordinator: the replica's state must be loaded again")

// stopChan returns the stop channel of the shard's current hosting.
func (s *shard) stopChan() <-chan struct{} {
	s.host.RLock()
	defer s.host.RUnlock()
	return s.stop
}

// stop ends the follower loop and waits for it.
func (r *replica) stop() {
	r.cancel()
	<-r.done
}

// decoded is one record of a shard's log, decoded: a coordinator record,
// a consumer-group one or a transaction coordinator's.
type decoded struct {
	rec   records.Record
	group group.Record
	txn   *txn.StateRecord
}

func decodeBody(body []byte) (decoded, error) {
	switch key, _ := bodyKey(body); {
	case group.IsRecordKey(key):
		rec, err := group.DecodeRecord(body)
		return decoded{group: rec}, err
	case txn.IsRecordKey(key):
		rec, err := txn.DecodeRecord(body)
		return decoded{txn: rec}, err
	}
	rec, err := records.Decode(body)
	return decoded{rec: rec}, err
}

func (d decoded) applyTo(st *state) error {
	switch {
	case d.group != nil:
		st.groups.Apply(d.group)
		return nil
	case d.txn != nil:
		st.txns.Apply(d.txn)
		return nil
	}
	return st.apply(d.rec)
}

func applyAll(st *state, recs []decoded) error {
	for _, d := range recs {
		if err := d.applyTo(st); err != nil {
			return err
		}
	}
	return nil
}

// publishAll makes every partition's state visible to readers, as replay
// does.
func publishAll(st *state) {
	for _, p := range st.partitions {
		p.visible, p.visHWM, p.visLogStart, p.visLSO = true, p.hwm, p.logStart, p.lso()
	}
}

// catalogChanged reports whether recs change shard 0's catalog (topics,
// their configs, partitions, disablement, deletion).
func catalogChanged(recs []decoded) bool {
	for _, d := range recs {
		switch d.rec.(type) {
		case *records.TopicConfig, *records.TopicDeleted, *records.TopicDisablement, *records.TopicPurged:
			return true
		}
	}
	return false
}
