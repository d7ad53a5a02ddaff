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
	// Offset is the fetch offset; the first batch returned is the one
	// containing it.
	Offset int64
	// MaxBytes bounds the sum of ByteSize of the batches returned, except
	// that the first batch is always returned (KIP-74). ≤ 0 returns only
	// the first batch.
	MaxBytes int32
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
	// Batches are consecutive, in offset order; empty at the high
	// watermark.
	Batches []BatchCoordinate
	// Next is the batch after the last of Batches, if the partition has
	// one below the high watermark; the zero value (empty ObjectKey) if
	// not. Fetch reads ahead the object it lies in for a reader catching
	// up (DESIGN §Decisions: lagging reads).
	Next BatchCoordinate
}

// BatchCoordinate locates one committed batch and carries what a fetch
// needs to rewrite its header (SPEC §4, DESIGN §Fetch).
type BatchCoordinate struct {
	// ObjectKey is the key of the object holding the batch, FileSize its
	// size in bytes.
	ObjectKey string
	FileSize  int64
	// ByteOffset and ByteSize locate the batch in the object, in bytes.
	ByteOffset int64
	ByteSize   int32
	// BaseOffset and LastOffset are the assigned offsets (inclusive).
	BaseOffset int64
	LastOffset int64
	// TimestampType is batch.TimestampCreateTime or
	// batch.TimestampLogAppendTime.
	TimestampType int8
	// LogAppendTime is the commit's append time in ms.
	LogAppendTime int64
	// BatchMaxTimestamp is the maxTimestamp the producer sent, ms.
	BatchMaxTimestamp int64
}

// MaxTimestamp is the batch's effective max timestamp: the log-append time
// on LogAppendTime topics, else the producer's.
func (b *BatchCoordinate) MaxTimestamp() int64 {
	if b.TimestampType == batch.TimestampLogAppendTime {
		return b.LogAppendTime
	}
	return b.BatchMaxTimestamp
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
	// Offset and Timestamp are the answer when it is known from the index
	// alone (earliest, latest; −1/−1 when nothing matches).
	Offset    int64
	Timestamp int64
	// Candidate, when set, is the batch whose records hold the answer
	// (timestamp lookups and max timestamp): the caller reads it and picks
	// the first record with offset ≥ LogStartOffset and timestamp ≥ the
	// target (or = the batch's max timestamp for ListOffsetsMaxTimestamp).
	Candidate *BatchCoordinate
}
