package coordinator

import (
	"context"
	"log/slog"
)

// Log is one shard's metadata log: an append-only sequence of record
// bodies numbered from 0 (the record index), durable once Append returns.
// The embedded file log (the default) and a future Kafka-topic backend
// implement it. A Log is used by one goroutine at a time (the shard's
// driver); it need not be safe for concurrent use.
type Log interface {
	// Replay calls fn for every durable record with index ≥ from, in index
	// order, and returns the index the next appended record will get. body
	// is valid only during the call. An error from fn stops the replay and
	// is returned (wrapped). Replay must be called before the first Append
	// and may be called again, e.g. after a failed Append, to learn what is
	// durable: it re-reads the log from its storage and repairs a torn tail
	// (docs/format/metadata-records.md §Torn tail rule).
	Replay(ctx context.Context, from int64, fn func(index int64, body []byte) error) (next int64, err error)
	// Append appends bodies, in order, as one group and returns once all of
	// them are durable (the embedded log: one write, one fsync). On error
	// any prefix of bodies may be durable; the caller finds out with Replay
	// before appending again. Each body is at most MaxRecordBytes.
	Append(ctx context.Context, bodies [][]byte) error
	// Close releases the log's resources.
	Close() error
}

// SnapshotLog is a Log that also stores snapshots of the state it
// describes, so that replay starts from the latest snapshot rather than
// from record 0.
//
// A snapshot is taken in two steps so that writing it never stalls
// commits: the appending goroutine calls PrepareSnapshot between two
// appends, at the index the snapshot describes; then SaveSnapshot runs on
// another goroutine, concurrently with later Appends. The shard never runs
// SaveSnapshot concurrently with Replay, PrepareSnapshot, Close or another
// SaveSnapshot.
type SnapshotLog interface {
	Log
	// LoadSnapshot returns the latest valid snapshot and the index of the
	// first record after it: data is the state after records [0, index).
	// With no snapshot it returns 0, nil, nil.
	LoadSnapshot(ctx context.Context) (index int64, data []byte, err error)
	// PrepareSnapshot announces a snapshot of the state after records
	// [0, index); index must be the log's next index. It runs on the
	// commit path, so it must be quick: the file log starts a new segment
	// at index (two fsyncs).
	PrepareSnapshot(ctx context.Context, index int64) error
	// SaveSnapshot stores data as the state after records [0, index),
	// where index was given to the latest PrepareSnapshot. Once it returns
	// nil, records before index may be discarded.
	SaveSnapshot(ctx context.Context, index int64, data []byte) error
}

// OpenFileLog opens (creating if needed) the embedded file log in dir, the
// backend Open uses for each shard when Config.OpenLog is nil
// (docs/format/metadata-records.md). It is exported so that wrappers —
// metrics, fault injection, benchmarks counting fsyncs — can be built around
// it and passed back through Config.OpenLog. Each successful Append is one
// write and one fsync.
func OpenFileLog(dir string, logger *slog.Logger) (SnapshotLog, error) {
	if logger == nil {
		logger = slog.Default()
	}
	return openFileLog(dir, logger)
}
