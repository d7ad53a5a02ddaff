package diskless

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
