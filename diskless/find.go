package diskless

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// FindBatchesRequest asks for the batches of one partition from Offset on
// (SPEC §9 DisklessFindBatches).
type FindBatchesRequest struct {
	TopicID   TopicID
	Partition int32
	// Offset is the fetch offset; the first run returned is the one
	// containing it.
	Offset int64
	// MaxBytes is how many bytes of batches the reader may serve: the
	// run holding Offset is always returned, then the following runs
	// until they and the first run's part from Offset on
	// (ServedEstimate) add up to MaxBytes or more (the reader, which
	// serves batches from the one holding Offset, applies the limit to
	// the batches, KIP-74, and may read the last run only in part). ≤ 0
	// returns only the first run.
	MaxBytes int32
	// ReadCommitted asks for a read_committed fetch (isolation_level 1,
	// SPEC §15): no run starting at or past the last stable offset, and
	// the aborted transactions that overlap the runs returned.
	ReadCommitted bool
}

// FindBatchesResult answers one FindBatchesRequest.
type FindBatchesResult struct {
	// Err is nil, UNKNOWN_TOPIC_OR_PARTITION or OFFSET_OUT_OF_RANGE
	// (offset < log start offset or > high watermark).
	Err *kerr.Error
	// LogStartOffset and HighWatermark are the partition's, as of this
	// answer; they are filled in also with OFFSET_OUT_OF_RANGE.
	LogStartOffset int64
	HighWatermark  int64
	// LastStableOffset is the partition's last stable offset (SPEC §15):
	// the first offset of its earliest open transaction, else the high
	// watermark. A read_committed answer holds no run starting at or past
	// it; the reader serves no batch at or past it.
	LastStableOffset int64
	// Aborted are, for a read_committed request, the aborted transactions
	// whose range overlaps the runs returned, by marker offset.
	Aborted []AbortedTxn
	// Runs are consecutive, in offset order, the first holding the
	// requested offset; empty at the high watermark.
	Runs []RunCoordinate
	// Next is the run after the last of Runs, if the partition has one
	// below the high watermark; the zero value (empty ObjectKey) if not.
	// Fetch reads ahead the object it lies in for a reader catching up
	// (DESIGN §Decisions: lagging reads).
	Next RunCoordinate
}

// RunCoordinate locates a run: one or more consecutive batches of one
// partition, back to back in one object, as one file commit accepted them
// (DESIGN §Coordinators: runs, not batches). Record batches are
// self-delimiting (SPEC §1), so a reader walks the run's bytes batch by
// batch: the first batch's base offset is BaseOffset, and each next one
// follows the one before (offsets are dense). It carries what a fetch
// needs to check the bytes and rewrite each batch's header (SPEC §4,
// DESIGN §Fetch).
//
// A run of ObjectFormat ObjectFormatSegment is a whole segment object's
// data (docs/format/segment-object.md): one partition's batches, offsets
// [BaseOffset, LastOffset], of many WAL runs and append times; its index,
// after the data, cuts them into entries that are runs of their own
// (each with its own LogAppendTime), which is what a reader reads.
type RunCoordinate struct {
	// ObjectKey is the key of the object holding the run, FileSize its
	// size in bytes.
	ObjectKey string
	FileSize  int64
	// ObjectFormat is the object's: ObjectFormatWriteAheadMultiSegment (or
	// 0) for a WAL run, ObjectFormatSegment for a segment object.
	ObjectFormat int8
	// ByteOffset and ByteSize locate the run in the object, in bytes.
	ByteOffset int64
	ByteSize   int32
	// BaseOffset and LastOffset are the assigned offsets of the run's
	// first and last records (inclusive).
	BaseOffset int64
	LastOffset int64
	// TimestampType is batch.TimestampCreateTime or
	// batch.TimestampLogAppendTime, the same for every batch of the run.
	TimestampType int8
	// LogAppendTime is the commit's append time in ms, every batch's (of
	// a segment: the latest of its batches').
	LogAppendTime int64
	// BatchMaxTimestamp is the largest maxTimestamp the producers sent in
	// the run's batches, ms (−1 when none has one).
	BatchMaxTimestamp int64
}

// Segment reports whether r is a segment object's data, which a reader
// reads through the object's index.
func (b *RunCoordinate) Segment() bool { return b.ObjectFormat == ObjectFormatSegment }

// MaxTimestamp is the run's effective max timestamp: the log-append time
// on LogAppendTime topics, else the largest of its batches' own.
func (b *RunCoordinate) MaxTimestamp() int64 {
	if b.TimestampType == batch.TimestampLogAppendTime {
		return b.LogAppendTime
	}
	return b.BatchMaxTimestamp
}

// ServedEstimate estimates how many bytes of a run of size bytes holding
// offsets [base, last] lie from offset's batch on: its bytes in proportion
// to its offsets from offset on, as if spread evenly (the index keeps no
// batch boundaries). FindBatches and fetch use it to decide how many runs
// after the one holding a fetch offset to read: an estimate too low
// serves less than the limits allow in one fetch, never more.
func ServedEstimate(base, last int64, size int32, offset int64) int64 {
	if offset <= base || last <= base {
		return int64(size)
	}
	if offset > last {
		return 0
	}
	// size < 2^31 and last−base < 2^31 (a run's span): no overflow.
	return int64(size) * (last - offset + 1) / (last - base + 1)
}

// Special ListOffsets timestamps (SPEC §5, Kafka ListOffsets).
const (
	ListOffsetsLatest       int64 = -1
	ListOffsetsEarliest     int64 = -2
	ListOffsetsMaxTimestamp int64 = -3
)

// ListOffsetsResult answers a ListOffsets lookup on one partition.
type ListOffsetsResult struct {
	// Err is nil, UNKNOWN_TOPIC_OR_PARTITION or UNSUPPORTED_VERSION (an
	// unsupported special timestamp).
	Err            *kerr.Error
	LogStartOffset int64
	HighWatermark  int64
	// LastStableOffset is the partition's last stable offset (SPEC §15),
	// what ListOffsets latest answers under read_committed.
	LastStableOffset int64
	// Offset and Timestamp are the answer when it is known from the index
	// alone (earliest, latest; −1/−1 when nothing matches).
	Offset    int64
	Timestamp int64
	// Candidate, when set, is the run whose records hold the answer
	// (timestamp lookups and max timestamp): the first run whose effective
	// max timestamp reaches the target, or the earliest with the largest.
	// The caller reads it and picks, in its first batch reaching the
	// target, the first record with offset ≥ LogStartOffset and timestamp
	// ≥ the target (or = the largest max timestamp for
	// ListOffsetsMaxTimestamp), looking further when it has none (SPEC
	// §5).
	Candidate *RunCoordinate
}

// AbortedTxn is one aborted transaction of a partition (SPEC §15): its
// producer, the offset of its first batch in the partition and the offset
// of its ABORT marker.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}
