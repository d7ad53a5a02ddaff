// Package txn is the transaction coordinator core of one coordinator shard
// (DESIGN §Transactions; SPEC §15): the state of every transactional id the
// shard owns (diskless.GroupShardFor of the id, as for consumer groups) and
// the decisions of InitProducerId with a transactional id,
// AddPartitionsToTxn (and its KIP-890 verify-only form), AddOffsetsToTxn,
// EndTxn and the expiry of timed-out transactions.
//
// Like package group it is deterministic and does no IO: time comes in as
// an argument, a decision returns the answer and the record to write —
// record 118 DisklessTxnStateRecord, the whole state of one transactional
// id after the transition (docs/format/metadata-records.md §118) — and the
// caller (the shard's driver, package coordinator) applies it with
// Table.Apply at once, so that the next decision of the same group commit
// sees it, appends it with the group, and answers only once it is
// durable; a failed append rebuilds the table from the log (DESIGN
// §Transactions). The table is a pure function of the records applied,
// so replay rebuilds it and its snapshot section is the records 118 of
// its transactional ids.
//
// State machine (Kafka's TransactionState, KIP-98): Empty → Ongoing (the
// first AddPartitionsToTxn or AddOffsetsToTxn) → PrepareCommit or
// PrepareAbort (EndTxn, or the coordinator aborting a timed-out or fenced
// transaction) → CompleteCommit or CompleteAbort (once every marker was
// written: Complete) → Ongoing again, or Empty after InitProducerId bumps
// the epoch.
//
// Errors are Kafka's codes (kerr), per the decision documented on each
// method: INVALID_TRANSACTION_TIMEOUT, INVALID_PRODUCER_ID_MAPPING,
// PRODUCER_FENCED, CONCURRENT_TRANSACTIONS, INVALID_TXN_STATE.
package txn
