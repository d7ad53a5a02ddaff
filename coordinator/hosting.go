package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	// is closed.
	next int64
	// snapAt is the index of the snapshot the state was loaded from.
	snapAt int64
}

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
	s.host.Unlock()

	from := int64(-1)
	if rep != nil {
		rep.stop()
		from = rep.next
	}
	err = s.takeOver(ctx, from, rep)
	if err != nil {
		c.retryLog.Log(context.Background(), slog.LevelWarn, fmt.Sprintf("shard-%d", s.id), "coordinator: taking a shard over failed; following it again",
			slog.Any("err", err))
		s.host.Lock()
		s.host.role = roleReplica
		s.host.Unlock()
		if ferr := s.follow(from, rep, false); ferr != nil {
			c.logger.Error("coordinator: following a shard failed", "shard", s.id, "err", ferr)
		}
		return err
	}
	c.logger.Info("coordinator: hosting shard", "shard", s.id, "next_record", s.logNext)
	return nil
}

// takeOver opens the writer's log, replays it from from (−1: a full load
// from the snapshot) onto the replica's state, and starts the driver.
func (s *shard) takeOver(ctx context.Context, from int64, rep *replica) error {
	c := s.c
	l, err := c.cfg.OpenLog(s.id)
	if err != nil {
		return fmt.Errorf("coordinator: open shard %d: %w", s.id, err)
	}
	s.log = l
	s.mu.RLock()
	failed := s.mu.failed
	s.mu.RUnlock()
	if from >= 0 && failed == nil {
		err = s.catchUp(ctx, from)
		if err == nil && rep != nil {
			s.snapshotAt = rep.snapAt
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
		}
	}
	if err != nil {
		l.Close()
		return err
	}
	if err := s.openGroups(); err != nil {
		l.Close()
		return err
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
	return nil
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
func (s *shard) follow(from int64, prev *replica, mustLoad bool) error {
	c := s.c
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
// record after it.
func (r *replica) load(ctx context.Context, s *shard) error {
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
			attempt, reload = 0, false
			continue
		case ctx.Err() != nil:
			return
		case errors.Is(err, errReload):
			reload = true
		case errors.Is(err, metalog.ErrTruncated) && !reload:
			if err = r.load(ctx, s); err != nil {
				reload = true
			}
		}
		if err != nil && ctx.Err() == nil {
			attempt++
			s.c.retryLog.Log(ctx, slog.LevelWarn, fmt.Sprintf("shard-%d", s.id), "coordinator: following a shard's log failed; retrying",
				slog.Any("err", err))
			if backoff.Sleep(ctx, backoff.Wait(50*time.Millisecond, 5*time.Second, attempt)) != nil {
				return
			}
		}
	}
}

// step waits for the log to grow past r.next and applies what is there.
func (r *replica) step(ctx context.Context, s *shard) error {
	if err := r.f.Wait(ctx, r.next); err != nil {
		return err
	}
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
