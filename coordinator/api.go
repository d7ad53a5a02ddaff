package coordinator

import (
	"encoding/hex"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/topicconfig"
)

// TopicID is a Kafka topic id: a random UUID, 16 bytes (Metadata v10+).
type TopicID [16]byte

// String formats the id as a canonical UUID (8-4-4-4-12 hex digits).
func (id TopicID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], id[10:16])
	return string(b[:])
}

// TopicPartition names one partition of a topic by topic id.
type TopicPartition struct {
	TopicID   TopicID
	Partition int32
}

// Topic is a diskless topic as the coordinators know it.
type Topic struct {
	ID         TopicID
	Name       string
	Partitions int32
	// Config is the parsed topic config (SPEC §11); Config.Raw holds what
	// was set explicitly. A Topic is an immutable snapshot: Config.Raw is
	// shared with the catalog and must not be modified.
	Config topicconfig.Config
}

// ObjectFormatWriteAheadMultiSegment is the ObjectFormat of a WAL object
// (SPEC §7).
const ObjectFormatWriteAheadMultiSegment int8 = 1

// CommitFileRequest commits one uploaded WAL object to one shard: the
// batches of the object that belong to partitions this shard owns (SPEC §9
// DisklessCommitFile). Batches are in the order they appear in the object,
// which is arrival order within each partition.
type CommitFileRequest struct {
	// ObjectKey is the object's key in the object store; commits are
	// idempotent by key.
	ObjectKey string
	// ObjectFormat is ObjectFormatWriteAheadMultiSegment.
	ObjectFormat int8
	// FileSize is the object's size in bytes.
	FileSize int64
	// UploaderBrokerID is the node.id of the sidecar that uploaded it.
	UploaderBrokerID int32
	// OwnerIDs are the shards that receive a part of this object, this
	// one included, ascending.
	OwnerIDs []int32
	// Batches are this shard's batches in the object.
	Batches []CommitBatch
}

// CommitBatch is one record batch of a committed file, with the fields of
// record 102 as the producer sent them: offsets relative, not yet assigned.
type CommitBatch struct {
	TopicID   TopicID
	Partition int32
	// Magic is the record batch magic, always 2.
	Magic int8
	// ByteOffset and ByteSize locate the batch in the object, in bytes.
	ByteOffset int32
	ByteSize   int32
	// LastOffsetDelta is recordsCount − 1: the batch covers offsets
	// [base, base+LastOffsetDelta] once assigned.
	LastOffsetDelta int32
	// BatchMaxTimestamp is the batch header's maxTimestamp, ms (−1: none).
	BatchMaxTimestamp int64
	// TimestampType is the topic's timestamp type when the batch was
	// produced: batch.TimestampCreateTime or batch.TimestampLogAppendTime.
	TimestampType int8
	// ProducerID, ProducerEpoch, BaseSequence and LastSequence are the
	// idempotent producer fields (ProducerID −1: not idempotent).
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	LastSequence  int32
}

// CommitBatchResult is the outcome of one CommitBatch, in request order.
type CommitBatchResult struct {
	// Err is nil on success, else the Kafka error for this batch's
	// partition: UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH,
	// OUT_OF_ORDER_SEQUENCE_NUMBER, KAFKA_STORAGE_ERROR, ….
	Err *kerr.Error
	// BaseOffset is the assigned base offset (the original one for a
	// duplicate).
	BaseOffset int64
	// LogAppendTime is the file commit's log-append time in ms; one value
	// per file commit (for a duplicate: the original commit's).
	LogAppendTime int64
	// LogStartOffset is the partition's log start offset after the commit.
	LogStartOffset int64
	// Duplicate is true when the batch was recognised as a retry of an
	// already committed batch (SPEC §3) and nothing new was stored.
	Duplicate bool
}

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
