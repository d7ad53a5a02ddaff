package diskless

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ObjectFormatWriteAheadMultiSegment is the ObjectFormat of a WAL object
// (SPEC §7).
const ObjectFormatWriteAheadMultiSegment int8 = 1

// ObjectFormatSegment is the ObjectFormat of a segment object: one
// partition's batches in offset order and their index, written by the
// coordinator's consolidation (docs/format/segment-object.md).
const ObjectFormatSegment int8 = 2

// Limits of a CommitFileRequest (docs/format/metadata-records.md §Limits).
const (
	// MaxCommitBatches is the most batches one CommitFile may carry: the
	// shard writes a file's batches in one metadata record, of at most
	// 64 MiB.
	MaxCommitBatches = 500_000
	// MaxObjectKeyBytes is the longest object key accepted (S3's limit).
	MaxObjectKeyBytes = 1024
)

// Errors a coordinator shard answers a request with, as a whole (the
// per-batch errors are Kafka errors in CommitBatchResult.Err).
var (
	// ErrClosed is returned by calls made after (or cut short by) the
	// coordinator's Close.
	ErrClosed = errors.New("coordinator: closed")
	// ErrShardFailed is returned (wrapped, with kerr.KafkaStorageError)
	// when a shard could not rebuild its state after a failed log write:
	// for good when its log is corrupt, until a rebuild the shard retries
	// with backoff succeeds when the log could not be read.
	ErrShardFailed = errors.New("coordinator: shard failed")
	// ErrShardFenced is returned (wrapped, with kerr.NotLeaderForPartition)
	// by a shard whose metadata log another sidecar took over (a Kafka
	// metadata log's takeover): it stops serving for good, and its
	// partitions answer NOT_LEADER_OR_FOLLOWER, which producers and
	// consumers retry after refreshing their metadata (DESIGN §Fencing).
	ErrShardFenced = errors.New("coordinator: shard fenced: another sidecar took its metadata log over")
	// ErrInvalidCommit is returned (wrapped) by CommitFile for a request
	// that is malformed as a whole (bad shard, object key, format, size,
	// owners or too many batches); nothing was decided.
	ErrInvalidCommit = errors.New("coordinator: invalid commit request")
	// ErrNotCoordinator is returned (wrapped) for a request to a shard
	// this sidecar does not host — it never did, or the shard moved to
	// another sidecar — or to a shard number out of range. Nothing was
	// decided: the caller looks the shard's owner up again and resends
	// (NOT_COORDINATOR over the coordinator RPCs, SPEC §9).
	ErrNotCoordinator = errors.New("coordinator: shard not hosted by this sidecar")
	// ErrShardLoading is returned (wrapped) for a request to a shard this
	// sidecar is taking over and still replaying, and for a consumer-group
	// request to a shard rebuilding its state from its log after a failed
	// write: nothing was decided, the caller resends after a backoff
	// (COORDINATOR_LOAD_IN_PROGRESS, which a group client retries on the
	// same coordinator, as with Kafka's group coordinator while it loads;
	// DESIGN §Consumer groups).
	ErrShardLoading = errors.New("coordinator: shard loading")
	// ErrNotConfirmed is returned (wrapped, with kerr.NotLeaderForPartition)
	// for an answer a hosted shard would read from its state without a
	// write when its metadata log could not confirm, in time, that no
	// other sidecar took the shard over (Kafka unreachable: DESIGN
	// §Fencing, the read-index rule). Nothing was decided: partitions
	// answer NOT_LEADER_OR_FOLLOWER, coordinator requests
	// NOT_COORDINATOR, and the caller retries.
	ErrNotConfirmed = errors.New("coordinator: shard's state not confirmed current by its metadata log")
)

// CommitFileRequest commits one uploaded WAL object to one shard: the
// batches of the object that belong to partitions this shard owns (SPEC §9
// DisklessCommitFile). Batches are in the order they appear in the object,
// which is arrival order within each partition.
type CommitFileRequest struct {
	// ObjectKey is the object's key in the object store; commits are
	// idempotent by key. 1 … MaxObjectKeyBytes bytes.
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
	// Batches are this shard's batches in the object, at most
	// MaxCommitBatches.
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
	// Txn says what the batch is to transactions (SPEC §15): TxnNone, or
	// TxnData (a transactional producer's batch), TxnCommit or TxnAbort
	// (a marker the transaction coordinator wrote). Record 102 keeps it
	// (docs/format/metadata-records.md §102).
	Txn int8
	// TxnSeq is the transaction guard's token (DESIGN §Transactions):
	// for TxnData the Seq of the producer's transaction when its check
	// passed, for a marker the Seq of the transaction it ends; 0 when
	// not known (a marker of WriteTxnMarkers, records of before), which
	// the guard passes over. The partition's shard refuses a TxnData
	// batch whose TxnSeq its producer's last marker there has reached.
	TxnSeq int64
	// CoordinatorEpoch is, for a marker (TxnCommit, TxnAbort), the
	// coordinator epoch its control record carries (KIP-98's
	// EndTxnMarker): the epoch with which the transaction coordinator
	// owned the transactional id's shard (DESIGN §Transactions, the
	// coordinator epoch), or WriteTxnMarkers' CoordinatorEpoch; −1 for
	// none. The partition's shard refuses a marker whose epoch is below
	// the last one its producer's markers there carried
	// (TRANSACTION_COORDINATOR_FENCED). Not used for other batches.
	CoordinatorEpoch int32
}

// What a batch is to transactions (CommitBatch.Txn, record 102's tagged
// field Txn).
const (
	TxnNone   int8 = 0
	TxnData   int8 = 1
	TxnCommit int8 = 2
	TxnAbort  int8 = 3
)

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
