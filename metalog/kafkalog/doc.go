// Package kafkalog is the Kafka backend of the coordinator shards'
// metadata log (metalog.Log; diskless.metadata.log=kafka): shard n's log
// is partition n of the metadata topic (diskless.metadata.topic, default
// __diskless_metadata) on the Kafka cluster the sidecars run next to,
// which replicates it; snapshots are objects in the object store.
//
// Open connects and creates or checks the topic (Topic); Topic.OpenLog
// opens a shard's log (Log). A writer appends with one idempotent producer
// (acks=all, no transactions). Its first Replay takes the shard over: it
// reads the partition to its end and appends a claim naming the epoch in
// force there, effective — its offset becomes the writer's epoch — unless
// another claim landed first; later Replays claim again, naming the epoch
// held.
// Every reader decides what counts with the same rule (scan.go): a record
// counts only when its epoch is that of the latest effective claim before
// it, and counted records form whole groups of dense indexes. An Append
// returns nil once the rule counts its records as its group — at once when
// they got the offsets right after the writer's previous ones, else after
// reading the offsets in between. Why a fenced writer can never
// acknowledge a group its successor does not see: DESIGN §Fencing.
//
// Format (docs/format/metadata-records.md §The Kafka backend): every Kafka
// record's 29-byte key carries "DM", a version, its kind (a part of a
// metadata record, a snapshot pointer, a claim), the writer's epoch, the
// record index, its part and a group-end flag; a body above the topic's
// batch limit is split into parts. A snapshot pointer, appended before its
// object is stored, names the object; TruncateBefore deletes the records
// before a pointer whose object is stored (DeleteRecords).
package kafkalog
