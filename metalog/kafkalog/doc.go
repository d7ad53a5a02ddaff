// Package kafkalog is the Kafka backend of the coordinator shards'
// metadata log (metalog.Log; diskless.metadata.log=kafka): shard n's log
// is partition n of the metadata topic (diskless.metadata.topic, default
// __diskless_metadata) on the Kafka cluster the sidecars run next to,
// which replicates it; snapshots are objects in the object store.
//
// Open connects and creates or checks the topic (Topic); Topic.OpenLog
// opens a shard's log (Log), whose first Replay takes the shard over:
// InitProducerId on the shard's transactional ids fences the previous
// writer and completes its open transaction, and the partition is read,
// read_committed, to its last stable offset. Each Append is one
// transaction, committed before Append returns. Why a fenced writer can
// never acknowledge a group its successor does not see: DESIGN §Fencing.
//
// Format (docs/format/metadata-records.md §The Kafka backend): every Kafka
// record's 20-byte key carries "DM", a version, its kind (a part of a
// metadata record, or a snapshot pointer) and the record index, so that
// indexes stay dense whatever offsets transaction markers and aborted
// transactions take; a body above the topic's batch limit is split into
// parts of one transaction. A snapshot pointer names the snapshot object
// (key, size, CRC-32C) and the anchor offset before which TruncateBefore
// deletes records (DeleteRecords).
package kafkalog
