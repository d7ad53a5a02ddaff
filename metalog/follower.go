package metalog

import (
	"context"
	"errors"
)

// Follower reads a log that another process writes, as it grows: what a
// coordinator shard's read replica applies (DESIGN §Read replicas). It
// never writes and never fences the writer. It sees the records a Replay
// by the writer would return — the durable groups, whole, in index
// order — a moment after each became durable, and never a record that is
// not durable (a group a fenced writer could not finish, a torn tail).
//
// Calls: one goroutine at a time (the replica's). Bodies given to fn are
// valid only during the call and must not be modified.
type Follower interface {
	// ReadSnapshot returns the latest snapshot, as Log.ReadSnapshot.
	ReadSnapshot(ctx context.Context) (index int64, payload []byte, err error)
	// Replay calls fn for every durable record with index ≥ from that
	// exists now, in index order, whole groups only, and returns the
	// index after the last one (from when there is none). It does not
	// wait for more. Errors: ErrTruncated when records at from are gone
	// (the writer truncated the log after a later snapshot: read the
	// snapshot again); ErrCorrupt; ErrClosed; fn's error, wrapped; IO
	// errors.
	Replay(ctx context.Context, from int64, fn func(index int64, body []byte) error) (next int64, err error)
	// Wait returns nil once a record with index ≥ next is durable (a
	// Replay from next then returns it), or ctx's error, or — a backend
	// read over a network — the error of reads that kept failing (the
	// Kafka backend's after 5 s: waitFailAfter), which the caller
	// reports and retries. It may return nil early: when the log grew by
	// something that is no new record (a Kafka backend's claim or
	// snapshot pointer, a group not whole yet), and, after a Wait that
	// returned a failure, at its first read that succeeds (the caller
	// learns the log is readable again); the caller replays and waits
	// again. It must not poll the writer: a
	// backend wakes it from what it reads (a Kafka long-poll fetch, the
	// in-memory log's own appends).
	Wait(ctx context.Context, next int64) error
	// Close releases the follower; a Wait in progress returns ErrClosed.
	Close() error
}

// ErrTruncated is returned (wrapped) by Follower.Replay, and by
// Log.Replay of a backend with takeovers, when records it was asked for
// were truncated away: the reader fell behind a snapshot (a follower; a
// new owner whose predecessor snapshotted and truncated while it started)
// and starts again from it.
var ErrTruncated = errors.New("metalog: records truncated before they were read")
