package metalog

import (
	"context"
	"errors"
)

// Log is one coordinator shard's metadata log: an append-only sequence of
// records — opaque byte bodies, 1 … MaxRecordBytes each — numbered from 0
// by their record index, appended in groups that are durable whole or not
// at all, and the latest snapshot of the state the records describe, so
// that a reader starts from the snapshot instead of record 0.
//
// Calls. The shard's driver makes every call but two, one at a time:
// Replay, Append, PrepareSnapshot, ReadSnapshot and Close. WriteSnapshot
// and then TruncateBefore run on another goroutine (the snapshot writer),
// concurrently with Append, but never concurrently with Replay,
// PrepareSnapshot, ReadSnapshot, Close or each other: the driver joins
// the snapshot writer first.
//
// Durability. A group is durable once Append returns nil (the embedded
// file log: one write and one fsync; a Kafka topic: one acks=all produce
// whose records the log's validity rule counts). When Append returns an error the group may be durable or
// not — entirely, never in part — and the caller learns which with Replay
// before it appends again. Replay repairs what a crash during an Append
// left (a torn tail): after it, the last group is there whole or is gone.
//
// Ownership. One writer per log. A backend that lets another process take
// a log over (a Kafka topic partition, where a writer's claim supersedes
// the previous writer's) fences the previous handle: its calls then fail with ErrFenced,
// and it must stop serving the shard; the new owner's Replay reads the
// log to its end, the fenced writer's last group included if it became
// durable, before it serves. The embedded file log has no takeover: the
// caller holds its directory exclusively (cmd/sidecar: the data.dir
// lock).
//
// Bodies. The caller does not modify a body once it is passed to Append
// (a backend may keep it, as the in-memory log of metalogtest does). A
// body given to Replay's fn is valid only during the call and must not be
// modified.
//
// Every backend passes metalogtest.Run, the conformance suite of this
// contract.
type Log interface {
	// Replay reads the log from its storage to its end, calls fn for
	// every durable record with index ≥ from in index order, and returns
	// the index the next appended record gets. It must be called before
	// the first Append and may be called again, e.g. after a failed
	// Append, to learn what is durable. A torn tail is repaired first.
	// Errors: ErrTruncated, from a backend with takeovers, when records
	// at from were removed by TruncateBefore — a previous owner's, racing
	// this handle's start, or this handle's own: read the latest snapshot
	// again and replay from it; ErrCorrupt when records that were
	// acknowledged are damaged or missing (a backend held exclusively,
	// as the file log, reports records below from that its
	// TruncateBefore removed so); ErrFenced; ErrClosed; fn's error,
	// wrapped (the log is left as it was: Replay again before
	// appending); IO errors.
	Replay(ctx context.Context, from int64, fn func(index int64, body []byte) error) (next int64, err error)
	// Append appends bodies, in order, as one group and returns once all
	// of them are durable. An empty bodies appends nothing. Errors: ctx's
	// error when ctx was done before the call (nothing written); a body of
	// 0 or more than MaxRecordBytes bytes (nothing written); an Append
	// before the first Replay; ErrFenced (the new owner's replay decides
	// whether the group is durable; the Kafka backend's never is: the
	// takeover came before it); ErrClosed; IO errors. After any error,
	// Replay before appending again.
	Append(ctx context.Context, bodies [][]byte) error
	// Confirm reports whether this handle still writes the log as of a
	// moment after the call began: nil when no other writer had taken it
	// over by then, so a state that applied every group this handle's
	// Appends made durable is the log's state at that moment, and an
	// answer read from it after Confirm returns is as fresh as the log
	// (DESIGN §Fencing, the read-index rule). A group of an Append in
	// progress meanwhile does not fail it (it is not acknowledged yet).
	// It may be called from any goroutine, concurrently with every other
	// call, and does not wait for the driver's call in progress. A
	// backend held exclusively (the file log) answers at once. Errors:
	// ErrFenced when another writer took the log over (the handle is then
	// fenced, as after an Append that found it); ctx's error or IO errors
	// when the backend could not tell (Kafka unreachable) — the caller
	// must not answer from its state then; ErrClosed. Before the first
	// Replay a backend with takeovers fails it (nothing is owned yet).
	Confirm(ctx context.Context) error

	// ReadSnapshot returns the latest snapshot — payload is the state
	// after records [0, index), as given to WriteSnapshot — or 0, nil when
	// there is none (a snapshot of an empty payload is returned as a
	// non-nil empty slice). A damaged snapshot is passed over for an older
	// one; a whole snapshot the backend cannot read (another format
	// version) is ErrCorrupt naming it. Errors also: ErrFenced, ErrClosed,
	// IO errors.
	ReadSnapshot(ctx context.Context) (index int64, payload []byte, err error)
	// PrepareSnapshot announces a snapshot of the state after records
	// [0, index) between two Appends; index must be the log's next index.
	// It runs on the commit path, so it is quick: the file log starts a
	// new segment at index (two fsyncs), so that TruncateBefore(index)
	// later deletes whole files; the Kafka log appends the snapshot's
	// pointer record (one produce). After an error, Replay before
	// appending again.
	PrepareSnapshot(ctx context.Context, index int64) error
	// WriteSnapshot stores payload durably as the state after records
	// [0, index), where index was given to the latest PrepareSnapshot.
	// Once it returns nil, ReadSnapshot returns it (or a later one). The
	// payload is opaque to the log: it carries its own format version.
	WriteSnapshot(ctx context.Context, index int64, payload []byte) error
	// TruncateBefore discards records with an index below index and
	// snapshots older than the one at index; index must not be above the
	// latest snapshot written. A backend may keep some of those records;
	// Replay from below index then either returns them or fails with
	// ErrTruncated or ErrCorrupt.
	TruncateBefore(ctx context.Context, index int64) error

	// Close releases the log's resources. A call in progress completes
	// first or — a backend whose storage may not answer, as Kafka — is
	// ended at once and fails with ErrClosed (an Append's group is then
	// durable or not, as after any failed Append). Later calls fail with
	// ErrClosed; Close again returns nil.
	Close() error
}

// MaxRecordBytes is the largest record body, in bytes (64 MiB). The file
// log treats a frame announcing more as garbage, not a record.
const MaxRecordBytes = 64 << 20

var (
	// ErrCorrupt is returned (wrapped) when a log holds damage that cannot
	// be a torn tail, so acknowledged records would be lost by going on:
	// for the file log, a bad frame or group end in a sealed segment; one
	// in the last segment followed by a group that verifies, or by bytes
	// written after its group's end; a bad segment header or format
	// version; a gap in record indexes; a whole snapshot of another format
	// version (docs/format/metadata-records.md §Torn tail rule). The log
	// is left untouched.
	ErrCorrupt = errors.New("metalog: metadata log corrupt")
	// ErrFenced is returned (wrapped) by every call on a handle whose log
	// another writer has taken over (a Kafka backend: another writer's
	// claim came after this writer's, DESIGN §Fencing). The handle stays
	// fenced; the caller stops serving the shard (its partitions answer
	// NOT_LEADER_OR_FOLLOWER) and closes it. The embedded file log
	// never returns it.
	ErrFenced = errors.New("metalog: another writer took the metadata log over")
	// ErrClosed is returned (wrapped) by calls after Close.
	ErrClosed = errors.New("metalog: metadata log closed")
)
