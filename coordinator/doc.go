// Package coordinator implements the diskless coordinator shards of
// KIP-1164 (DESIGN §Coordinators, SPEC §3–§5, §8, §9): the part of the
// sidecar that decides the order of every diskless partition's log —
// offsets, log-append times and idempotent-producer sequences — and keeps
// the topic catalog and producer-id blocks. Its requests and answers are
// the types of package diskless, which the stages import instead of this
// one.
//
// # Shards
//
// Config.NumShards (diskless.metadata.topic.num.partitions) shards; a
// partition belongs to diskless.ShardFor(topic id, partition, NumShards).
// Each shard is a deterministic core (state: apply one record, decide one file, read
// the index — no IO, no clock) and a driver goroutine that owns the shard's
// metadata Log. The driver takes CommitFile and admin requests from a
// bounded queue, drains what is queued (group commit), decides each
// request against the state — applying accepted batches one by one, so a
// retry of a batch earlier in the same file or group is a duplicate —
// appends the group's records with one Append (one fsync), and only then
// publishes the new high watermarks to FindBatches, ListOffsets(From) and Watch
// and answers. If the append fails, every request of the group gets the
// error and the state is rebuilt by replaying the log, so memory never
// holds what is not durable; if that fails too, the shard answers
// KAFKA_STORAGE_ERROR until a later attempt succeeds (retried with backoff
// while the log cannot be read; never when it is corrupt). Replay at Open uses the same apply,
// so a shard's state is a function of its log (DESIGN invariant 6).
// Changes readers would see before they are durable — log start moves
// (record 103) and file closes (106) — go through the driver as deferred
// requests: a group of their own, applied only after the append.
//
// # Retention, DeleteRecords and the file lifecycle
//
// runRetention (every Config.RetentionCheckInterval) and DeleteRecords
// move partitions' log starts (SPEC §5; Kafka's retention.ms and
// retention.bytes rules). A file whose last live batch in a shard goes is
// released by that shard; among the owners that committed it (record
// 102's OwnerIds), the lowest deletes the object through
// Config.Objects once every owner reports no live batch (DescribeFiles,
// SPEC §9), the commit is older than the orphan grace period (unless the
// shard is the file's only owner) and Config.FileDeletionDelay has
// passed, and records the deletion (106);
// the others hand it over (106 naming the deleter). runOrphanScan (every
// Config.OrphanScanInterval; with several sidecars only shard 0's leader
// runs it) deletes listed objects older than the grace period that no
// shard holds. Stats counts all of it. These loops are owned by the
// Coordinator: started by Open, cancelled and joined by Close.
//
// # Forgetting closed files
//
// A shard's file table (batches name their file by slot) would otherwise
// grow by every file ever committed: about 170 bytes of heap each, 59 MB
// a day at one file per 250 ms, and the snapshot with it
// (BenchmarkClosedFiles). So a closed file is forgotten by the first
// commit whose log-append time is more than forgetClosedFilesAfterMs (1
// hour) past its own — closed files in the order they were closed, each
// when due — online and in replay alike: its key leaves the table, it
// answers FileUnknown, and a later commit reuses its slot. Only forgotten
// files' slots are reused, so a slot with live batches, or of a released
// file on the lifecycle's work list, never changes hands. The table holds
// the live, released and recently closed files.
//
// Invariant that makes it safe: no CommitFile of a key comes after the
// shard forgot it — it would commit the key anew, over a deleted object.
// Keys are never reused (SPEC §7), so only a late retry of the file's own
// commit could; and every commit attempt of an object is decided within
// OrphanScanGracePeriod (≥ 10 minutes, default 1 hour) of its upload —
// the assumption the orphan scan already rests on, against the
// committer's diskless.commit.max.attempts (5) calls with under a second
// of backoff in all. A file shared by several owners is closed only once
// the grace period has passed since its commit (plus FileDeletionDelay,
// 1 minute, when the shard deletes the object itself); a file of one
// owner may be closed sooner (no other commit of it can come); either is
// forgotten only once a later commit is an hour of log time younger than
// it, past the 10 minutes (MinOrphanScanGracePeriod) within which every
// attempt is decided.
//
// # Metadata log
//
// Each shard's records and snapshots live in a metalog.Log: by default
// the embedded metalog.FileLog in Dir/shard-<n>/, or what Config.OpenLog
// opens (a test double, or metalog/kafkalog's partition of the metadata
// topic). An append failing with metalog.ErrFenced (another sidecar took
// the log over) stops the shard for good: diskless.ErrShardFenced, and
// NOT_LEADER_OR_FOLLOWER for its partitions, so that clients refresh
// their metadata and retry (TestFencedShardStopsServing, DESIGN
// §Fencing). Any other failed append makes the shard rebuild its state
// from its log; meanwhile its consumer groups' requests get
// diskless.ErrShardLoading (COORDINATOR_LOAD_IN_PROGRESS, DESIGN
// §Consumer groups). A log it cannot rebuild its state from fails the
// shard: KAFKA_STORAGE_ERROR for good when the log is corrupt, until a
// retried rebuild succeeds when it could not be read. The
// records are KRaft-style metadata records (package coordinator/records;
// docs/format/metadata-records.md): uvarint frame version 1, uvarint
// record key, uvarint version 0, then the record in Kafka's
// flexible-version encoding (compact strings and arrays, tagged fields
// after every struct). Keys: 100 DisklessPartitionCreatedRecord, 101
// DisklessTopicDeletedRecord, 102 DisklessFileCommittedRecord, 103
// DisklessRecordsDeletedRecord (SPEC §8), and the project's 104
// DisklessTopicConfigRecord (the catalog entry; the commit point of
// CreateTopic), 105 DisklessProducerIdBlockRecord, 106
// DisklessFileDeletedRecord, 111 DisklessTopicDisablementRecord and 112
// DisklessTopicPurgedRecord; 107 … 110 and 113 are package group's
// consumer-group offsets (groups.go).
//
// Every SnapshotIntervalRecords records a shard announces a snapshot at
// the log's next index N (Log.PrepareSnapshot: the file log starts a new
// segment) and freezes a copy of its state (on the driver,
// O(files + partitions)), then encodes it (snapshot.go: a payload that
// starts with its own version) and writes it (Log.WriteSnapshot, the
// state after records [0, N)) on a snapshot goroutine while commits go
// on, and only then discards what it supersedes (Log.TruncateBefore);
// Open loads the latest snapshot and replays the records after it.
package coordinator
