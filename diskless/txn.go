package diskless

// TxnCheck asks the transaction coordinator of TransactionalID (the
// sidecar hosting shard GroupShardFor(TransactionalID)) whether producer
// (ProducerID, ProducerEpoch) may write a transactional batch to
// Partition, when Group is empty, or commit offsets of consumer group
// Group, in its open transaction (SPEC §15; DisklessCheckTxn, SPEC §9). It
// changes nothing.
type TxnCheck struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Partition       TopicPartition
	Group           string
}

// TxnCheckResult answers a TxnCheck: Code is the check's Kafka error code
// (0: allowed; INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH for a
// batch or PRODUCER_FENCED for offsets, INVALID_TXN_STATE), Seq the open
// transaction's token when allowed (txn.StateRecord.Seq).
type TxnCheckResult struct {
	Code int16
	Seq  int64
}
