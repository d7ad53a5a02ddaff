// Package group is the consumer-group coordinator of one coordinator
// shard: a deterministic core with no IO, driven by requests and by time
// passed in explicitly (Tick), in the style of etcd's raft.
//
// # Protocols
//
// The classic group protocol (JoinGroup v0–v9, SyncGroup v0–v5, Heartbeat
// v0–v4, LeaveGroup v0–v5) follows Kafka 4.x's group coordinator: states
// Empty → PreparingRebalance → CompletingRebalance → Stable (Dead when
// deleted), MEMBER_ID_REQUIRED from JoinGroup v4 (KIP-394), static
// membership from v5 (KIP-345: a restarted instance takes its old place
// without a rebalance when the group's protocol does not change; its old
// member id is fenced with FENCED_INSTANCE_ID), the delayed first
// rebalance (group.initial.rebalance.delay.ms), session and rebalance
// timeouts and generation fencing. Cooperative rebalancing (KIP-429) is
// the clients' protocol on top and needs nothing more.
//
// The KIP-848 consumer protocol (ConsumerGroupHeartbeat v0–v1,
// ConsumerGroupDescribe v0–v1) computes assignments on the coordinator
// with the uniform or range assignor (group.consumer.assignors) for the
// group epoch — at most once per group.consumer.assignment.interval.ms
// (KIP-1263's batching: epochs bumped within it are assigned together) —
// and reconciles each member toward its target: partitions a
// member gives up are revoked before any other member gets them, and a
// member's epoch moves to the target epoch once it owns nothing it must
// give up. Subscriptions are topic names or an RE2 regular expression
// (KIP-848; Go's regexp is RE2). A group uses one protocol: a classic
// JoinGroup for a consumer group with members gets
// INCONSISTENT_GROUP_PROTOCOL and a ConsumerGroupHeartbeat for a classic
// group with members GROUP_ID_NOT_FOUND (Kafka 4.x's answer when online
// migration is disabled; it would otherwise migrate the group), while an
// empty group of one type is replaced by the other, as in Kafka.
//
// # State
//
// Membership is soft state, as in the issue that asked for this package
// (members rejoin after a restart). Committed offsets are durable: every
// change is a metadata-log record (107 DisklessOffsetCommitRecord, 108
// DisklessOffsetsDeletedRecord, 109 DisklessGroupDeletedRecord, 110
// DisklessTxnOffsetsEndedRecord, 113 DisklessTopicOffsetsDeletedRecord;
// docs/format/metadata-records.md) that the
// shard writes and only then applies (ApplyRecord) and answers, so the
// Offsets table is a function of the log (DESIGN invariant 6), snapshotted
// as a section of the shard's snapshot (AppendSnapshot, DecodeSnapshot).
// Transactional offset commits (TxnOffsetCommit) are records 107 with a
// producer id and their transaction's token, pending in the table until
// a record 110 with a token not below theirs ends the transaction; the
// transaction coordinator writes those. The table remembers each
// producer's ended token for producer.id.expiration.ms (the offsets'
// guard), and a record 107 of a transaction that already ended here is
// refused (CommitTxnOffsets) and, in a log, changes nothing.
package group
