package diskless

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TxnCheck asks the transaction coordinator of TransactionalID (the
// sidecar hosting shard GroupShardFor(TransactionalID)) whether producer
// (ProducerID, ProducerEpoch) may write a transactional batch to each of
// Partitions, when Group is empty, or commit offsets of consumer group
// Group, in its open transaction (SPEC §15; DisklessCheckTxn, SPEC §9). A
// produce request's transactional batches are checked in one TxnCheck: a
// request carries one transactional id, producer id and epoch for all its
// partitions. Partitions is empty for an offsets check. It changes
// nothing.
type TxnCheck struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Partitions      []TopicPartition
	Group           string
}

// TxnCheckResult answers a TxnCheck. Code is the check's Kafka error code
// for all its partitions, or for the group's offsets (0: the producer
// holds the id; INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH for
// a batch or PRODUCER_FENCED for offsets, and for offsets
// INVALID_TXN_STATE). When Code is 0, PartitionCodes holds one code per
// TxnCheck.Partitions, in order: 0 (allowed) or INVALID_TXN_STATE (not in
// the open transaction, or none is open); it is empty for offsets or when
// Code is not 0. Seq is the open transaction's token when Code is 0
// (txn.StateRecord.Seq), the same for every allowed partition; for
// offsets, the token their record 107 carries (only that transaction's
// record 110 ends them).
type TxnCheckResult struct {
	Code           int16
	PartitionCodes []int16
	Seq            int64
}

// MarkerErrors is the error of a marker write (SPEC §15) that some
// partitions refused at their commit: each refused partition's Kafka
// error, as its shard answered (INVALID_PRODUCER_EPOCH,
// TRANSACTION_COORDINATOR_FENCED, ...). The markers of the partitions it
// does not name were written, or skipped as their writer documents.
// Kafka's leader answers WriteTxnMarkers per partition; so does the
// sidecar with this.
type MarkerErrors map[TopicPartition]*kerr.Error

// Error lists the refused partitions and their errors, by topic id and
// partition.
func (e MarkerErrors) Error() string {
	var sb strings.Builder
	sb.WriteString("markers refused:")
	for _, tp := range e.sorted() {
		fmt.Fprintf(&sb, " %s/%d: %v;", tp.TopicID, tp.Partition, e[tp])
	}
	return strings.TrimSuffix(sb.String(), ";")
}

// Unwrap returns the partitions' errors in Error's order, so that
// errors.Is finds any of them.
func (e MarkerErrors) Unwrap() []error {
	out := make([]error, 0, len(e))
	for _, tp := range e.sorted() {
		out = append(out, e[tp])
	}
	return out
}

// All reports whether every refused partition's error is err.
func (e MarkerErrors) All(err *kerr.Error) bool {
	for _, got := range e {
		if got != err {
			return false
		}
	}
	return true
}

func (e MarkerErrors) sorted() []TopicPartition {
	return slices.SortedFunc(maps.Keys(e), ComparePartitions)
}
