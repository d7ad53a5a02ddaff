// Package coordinator implements the diskless coordinator shards of
// KIP-1164 (DESIGN §Coordinators, SPEC §3–§5, §8, §9): the part of the
// sidecar that decides the order of every diskless partition's log —
// offsets, log-append times and idempotent-producer sequences — and keeps
// the topic catalog and producer-id blocks.
//
// # Shards
//
// Config.NumShards (diskless.metadata.topic.num.partitions) shards; a
// partition belongs to ShardFor(topic id, partition, NumShards). Each shard
// is a deterministic core (state: apply one record, decide one file, read
// the index — no IO, no clock) and a driver goroutine that owns the shard's
// metadata Log. The driver takes CommitFile and admin requests from a
// bounded queue, drains what is queued (group commit), decides each
// request against the state — applying accepted batches one by one, so a
// retry of a batch earlier in the same file or group is a duplicate —
// appends the group's records with one Append (one fsync), and only then
// publishes the new high watermarks to FindBatches, ListOffsets and Watch
// and answers. If the append fails, every request of the group gets the
// error and the state is rebuilt by replaying the log, so memory never
// holds what is not durable; if that fails too, the shard answers
// KAFKA_STORAGE_ERROR until restart. Replay at Open uses the same apply,
// so a shard's state is a function of its log (DESIGN invariant 6).
//
// # Metadata log format
//
// Specified in docs/format/metadata-records.md. The embedded backend keeps
// each shard in Dir/shard-<n>/ as segment files named by the index of
// their first record (a 16-byte header: "DSML", version 1, base index),
// holding frames:
//
//	+----------------+----------------+------------------------------+
//	| length uint32  | crc uint32     | body (length bytes)          |
//	+----------------+----------------+------------------------------+
//
// big-endian; length is 1 … MaxRecordBytes; crc is CRC-32C (Castagnoli)
// over the length bytes and the body. The body is a KRaft-style metadata
// record: uvarint frame version 1, uvarint record key, uvarint version 0,
// then the record in Kafka's flexible-version encoding (compact strings
// and arrays, tagged fields after every struct). Keys: 100
// DisklessPartitionCreatedRecord, 101 DisklessTopicDeletedRecord, 102
// DisklessFileCommittedRecord, 103 DisklessRecordsDeletedRecord (SPEC §8),
// and the project's 104 DisklessTopicConfigRecord (the catalog entry; the
// commit point of CreateTopic) and 105 DisklessProducerIdBlockRecord.
//
// On open, a short frame, bad length or bad CRC in the last segment starts
// a torn tail, truncated with a warning naming the bytes dropped; anywhere
// else it is ErrCorrupt. Every SnapshotIntervalRecords records a shard
// writes a snapshot of its state (N.snapshot, the state after records
// [0, N)) and starts a new segment at N, deleting older ones; Open loads
// the newest valid snapshot and replays the records after it.
package coordinator
