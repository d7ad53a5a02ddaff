package coordinator

import (
	"errors"
	"fmt"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/metalog"
)

// ShardState is a coordinator shard's health on this sidecar
// (Coordinator.ShardHealth; DESIGN §Observability): what /healthz and
// /readyz answer and the diskless.coordinator.shards gauge counts.
type ShardState int8

const (
	// ShardServing: the shard's state is its log's — hosted, it answers
	// its requests; a read replica, it follows the log. A shard fenced in
	// a cluster (another sidecar took its log over) is serving: it is
	// served there, and the placement releases it here.
	ShardServing ShardState = iota
	// ShardLoading: the shard's state is being loaded whole — Host taking
	// the shard over, a replica starting to follow it, or a hosted
	// shard's first rebuild after a failed append; its requests get
	// ErrShardLoading (COORDINATOR_LOAD_IN_PROGRESS) or wait meanwhile.
	ShardLoading
	// ShardRetrying: loading the shard's state from its log failed for a
	// reason that may pass (retryableLoad: a Kafka broker restarting, no
	// leader) and is retried with backoff until it succeeds — the shard
	// then serves again without a restart — or a read replica's catch-up
	// reads have failed for replicaRetryingAfter (15 s) without a
	// success, and it serves again on its first successful read.
	// Meanwhile a hosted shard answers KAFKA_STORAGE_ERROR (its groups
	// COORDINATOR_LOAD_IN_PROGRESS) and a replica's state stays where it
	// was.
	ShardRetrying
	// ShardFailed: the shard failed for good, until the process restarts:
	// its log is corrupt, holds what the state refuses, was taken over
	// (alone: another process took it), or could not be followed.
	ShardFailed
)

// String returns serving, loading, retrying or failed.
func (s ShardState) String() string {
	switch s {
	case ShardServing:
		return "serving"
	case ShardLoading:
		return "loading"
	case ShardRetrying:
		return "retrying"
	case ShardFailed:
		return "failed"
	}
	return "unknown"
}

// ShardHealth is one shard's health on this sidecar.
type ShardHealth struct {
	Shard int32
	// Hosted reports whether this sidecar owns the shard (alone: every
	// shard); otherwise it keeps a read replica of it (or is taking it
	// over: State ShardLoading).
	Hosted bool
	State  ShardState
	// Err is the cause of ShardRetrying (the last attempt's error, when
	// there is one) and ShardFailed; nil otherwise.
	Err error
}

// ShardHealth reports every shard's health, in shard order:
// Health().Shards.
func (c *Coordinator) ShardHealth() []ShardHealth { return c.Health().Shards }

// Health is one reading of the coordinator's health (Coordinator.Health):
// liveness (Err), readiness (Unserved) and the shards' list all come
// from it, so one answer of /healthz or /readyz never disagrees with
// itself.
type Health struct {
	// Closed reports that Close had begun; the shards' states are then
	// those they stopped in.
	Closed bool
	// Shards is every shard's health, in shard order.
	Shards []ShardHealth
}

// Health reads the coordinator's health once: whether Close has begun
// and every shard's health, under the close lock, so a Close cannot
// begin in between. It takes each shard's read locks in turn, which no
// shard holds across IO, so it is cheap and never waits for the disk or
// Kafka; it is safe for concurrent use.
func (c *Coordinator) Health() Health {
	c.closeMu.RLock()
	defer c.closeMu.RUnlock()
	h := Health{Closed: c.closed, Shards: make([]ShardHealth, len(c.shards))}
	for i, s := range c.shards {
		h.Shards[i] = s.health()
	}
	return h
}

// Err is liveness, for a health check (/healthz): nil while no shard has
// failed for good (ShardFailed); diskless.ErrClosed once Close had
// begun; otherwise an error wrapping diskless.ErrShardFailed and each
// failed shard's cause, naming the shards ("coordinator: shard failed:
// shard 1: …; shard 3 fenced: …"). A shard fails for good when it cannot
// rebuild its state from its metadata log because the log is corrupt,
// taken over (alone) or holds what the state refuses; it answers
// KAFKA_STORAGE_ERROR until a restart while the other shards go on. A
// read replica that can no longer be followed is failed too
// (TestShardHealthUnfollowed). A shard whose log cannot be read for now
// (ShardRetrying) is not reported: it retries until it serves again, and
// a restart would only start the same wait over (Unserved reports it).
func (h Health) Err() error {
	return h.shardsErr(diskless.ErrShardFailed, func(s ShardHealth) bool { return s.State == ShardFailed })
}

// Unserved is readiness, for /readyz: nil while every shard is serving
// or loading; diskless.ErrClosed once Close had begun; otherwise an
// error wrapping ErrShardsUnserved naming each shard that is retrying or
// failed, with its cause ("coordinator: shards not served: shard 1
// retrying: …; shard 2: …").
func (h Health) Unserved() error {
	return h.shardsErr(ErrShardsUnserved, func(s ShardHealth) bool { return s.State == ShardRetrying || s.State == ShardFailed })
}

// shardsErr returns an error wrapping sentinel and naming the shards
// whose health matches, with their causes; nil when none does;
// diskless.ErrClosed when h.Closed.
func (h Health) shardsErr(sentinel error, match func(ShardHealth) bool) error {
	if h.Closed {
		return diskless.ErrClosed
	}
	format, args := "%w", []any{sentinel}
	for _, s := range h.Shards {
		if !match(s) {
			continue
		}
		sep := "; "
		if len(args) == 1 {
			sep = ": "
		}
		switch {
		case s.State == ShardRetrying:
			format += sep + "shard %d retrying: %w"
		case errors.Is(s.Err, metalog.ErrFenced):
			format += sep + "shard %d fenced: %w"
		default:
			format += sep + "shard %d: %w"
		}
		args = append(args, s.Shard, s.Err)
	}
	if len(args) == 1 {
		return nil
	}
	return fmt.Errorf(format, args...)
}

// health classifies s (ShardState's cases).
func (s *shard) health() ShardHealth {
	s.host.RLock()
	r, rep, unfollowed := s.host.role, s.host.rep, s.host.followErr
	s.host.RUnlock()
	s.mu.RLock()
	failed := s.mu.failed
	s.mu.RUnlock()
	// A failed rebuild the driver retries leaves rebuilding set (rebuild).
	retrying := failed != nil && s.rebuilding.Load()
	h := ShardHealth{Shard: s.id, Hosted: r == roleHosted}
	var stuck error
	if rep != nil {
		stuck = rep.retrying(s.c.cfg.Now())
	}
	switch {
	case r == roleLoading:
		h.State = ShardLoading
	case r == roleReplica && stuck != nil:
		h.State, h.Err = ShardRetrying, stuck
	case r == roleReplica && rep == nil && unfollowed != nil:
		h.State, h.Err = ShardFailed, unfollowed
	case r == roleReplica && rep == nil:
		// A Release's follow under way.
		h.State = ShardLoading
	case failed != nil && s.c.clustered() && errors.Is(failed, metalog.ErrFenced):
		// Moved to another sidecar: not a fault of this one.
	case failed != nil && r == roleHosted && retrying:
		h.State, h.Err = ShardRetrying, failed
	case failed != nil:
		h.State, h.Err = ShardFailed, failed
	case r == roleHosted && s.rebuilding.Load():
		h.State = ShardLoading
	}
	return h
}
