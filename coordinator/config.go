package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/group"
	"github.com/diskless-sidecar/sidecar/metalog"
	"github.com/diskless-sidecar/sidecar/objstore"
	"github.com/diskless-sidecar/sidecar/txn"
)

// Defaults and limits of Config.
const (
	// DefaultProducerIDExpirationMs is Kafka's producer.id.expiration.ms
	// default: one day (SPEC §11).
	DefaultProducerIDExpirationMs int64 = 86400000
	// DefaultSnapshotIntervalRecords is how many records a shard appends to
	// its log between two snapshots.
	DefaultSnapshotIntervalRecords int64 = 100000
	// DefaultSnapshotIntervalBytes is how many bytes of records a shard
	// appends to its log, at most, between two snapshots: 256 MiB, which
	// replay applies in about 0.7 s (records 102 of ~60 bytes per batch
	// at ~150 ns per batch, bench/RESULTS.md entry 11) — files of
	// thousands of batches reach it long before SnapshotIntervalRecords.
	DefaultSnapshotIntervalBytes int64 = 256 << 20
	// MaxShards bounds diskless.metadata.topic.num.partitions: every shard
	// holds an open segment and a goroutine.
	MaxShards = 1024
	// DefaultRetentionCheckInterval is Kafka's
	// log.retention.check.interval.ms default: 5 minutes.
	DefaultRetentionCheckInterval = 5 * time.Minute
	// DefaultFileDeletionDelay is Kafka's file.delete.delay.ms default:
	// 1 minute.
	DefaultFileDeletionDelay = time.Minute
	// DefaultOrphanScanInterval is how often the orphan scan lists the
	// bucket: 10 minutes (one LIST per 1000 objects each time).
	DefaultOrphanScanInterval = 10 * time.Minute
	// DefaultOrphanScanGracePeriod is the age before an unknown object may
	// be deleted: 1 hour, far above an upload's retries (tens of seconds)
	// plus its commit.
	DefaultOrphanScanGracePeriod = time.Hour
	// MinOrphanScanGracePeriod is the least grace period accepted: below
	// it an upload still retrying, or a commit still in flight, could be
	// taken for an orphan and its object deleted under an acknowledged
	// batch.
	MinOrphanScanGracePeriod = 10 * time.Minute
	// DefaultConfirmTimeout is Config.ConfirmTimeout's default: 5 s,
	// well inside a client's request timeout (30 s), so a client of a
	// sidecar cut off from Kafka gets a retriable error and tries again
	// (another sidecar, once its metadata names one) instead of timing
	// out; a Kafka that answers confirms in one round trip
	// (bench/RESULTS.md entry 25).
	DefaultConfirmTimeout = 5 * time.Second
	// DefaultLifecycleInterval is Config.LifecycleInterval's default.
	DefaultLifecycleInterval = time.Second
	// DefaultTxnAbortCheckInterval is Kafka's
	// transaction.abort.timed.out.transaction.cleanup.interval.ms.
	DefaultTxnAbortCheckInterval = 10 * time.Second
	// DefaultTxnIDExpirationCheckInterval is Kafka's
	// transaction.remove.expired.transaction.cleanup.interval.ms.
	DefaultTxnIDExpirationCheckInterval = time.Hour
	// DefaultOffsetsRetentionCheckInterval is Kafka's
	// offsets.retention.check.interval.ms default: 10 minutes.
	DefaultOffsetsRetentionCheckInterval = group.DefaultOffsetsRetentionCheck
	// DefaultObjectKeyPrefix is upload's default diskless.object.key.prefix.
	DefaultObjectKeyPrefix = "wal"
	// DefaultConsolidationMinAge is diskless.consolidation.min.age.ms's
	// default: WAL runs committed 5 minutes ago are consolidated. The WAL
	// runs a shard keeps are those of the last min.age plus segment.ms
	// (DESIGN §Consolidation: the memory formula).
	DefaultConsolidationMinAge = 5 * time.Minute
	// DefaultConsolidationInterval is how often a consolidation pass
	// starts: 10 seconds.
	DefaultConsolidationInterval = 10 * time.Second
	// DefaultConsolidationMaxBytesPerSec bounds the bytes consolidation
	// reads (and so copies) per second: 100 MiB/s.
	DefaultConsolidationMaxBytesPerSec int64 = 100 << 20
	// DefaultSegmentBytes is the segment size a topic without
	// segment.bytes gets: 128 MiB, one whole-object read (one GET) of a
	// lagging consumer's, half the block cache's default catch-up segment
	// (cache.DefaultCatchUpMaxBytes): 8 GETs per GiB fetched (DESIGN
	// §Decisions: lagging reads).
	DefaultSegmentBytes int64 = 128 << 20
	// MaxSegmentBytes caps segment.bytes: segment objects address their
	// data with int32 positions (docs/format/segment-object.md).
	MaxSegmentBytes int64 = 1 << 30
	// DefaultSegmentRollTime is the time a topic without segment.ms lets its
	// oldest unconsolidated run wait, past the minimum age, for its
	// segment to fill: 10 minutes.
	DefaultSegmentRollTime = 10 * time.Minute
	// DefaultConsolidationIndexIntervalBytes is the bytes of batches
	// between two entries of a segment object's index: 64 KiB.
	DefaultConsolidationIndexIntervalBytes int32 = 64 << 10
)

// Config configures the coordinator shards of one node. The zero value of an
// optional field selects its default (the Default constants above);
// Validate reports invalid fields naming their configuration keys.
type Config struct {
	// Dir is the directory holding one subdirectory per shard's metadata
	// log (shard-<n>, a metalog.FileLog); it is created if missing.
	// Required unless OpenLog is set. One process at a time may use it:
	// the caller holds it exclusively (cmd/sidecar: the data.dir lock,
	// internal/dirlock); Open takes no lock of its own.
	Dir string
	// NumShards is diskless.metadata.topic.num.partitions, the number of
	// coordinator shards, 1 … MaxShards. It must stay the same for the
	// lifetime of Dir: partitions are assigned to shards by ShardFor, so
	// Open refuses a Dir written with another value.
	NumShards int32
	// NodeID is this sidecar's node.id, ≥ 0; recorded with producer-id
	// blocks.
	NodeID int32
	// ProducerIDExpirationMs is producer.id.expiration.ms: idle producer
	// state is forgotten after this many ms of server time without a
	// write (SPEC §3). 0 selects DefaultProducerIDExpirationMs.
	ProducerIDExpirationMs int64
	// SnapshotIntervalRecords is how many records a shard appends between
	// two snapshots of its state, which bound replay time at Open. 0
	// selects DefaultSnapshotIntervalRecords; −1 disables snapshots.
	SnapshotIntervalRecords int64
	// SnapshotIntervalBytes also starts a snapshot once this many bytes of
	// records were appended since the last: replay time follows bytes
	// (batches), not records. 0 selects DefaultSnapshotIntervalBytes; −1
	// counts records only. Ignored when SnapshotIntervalRecords is −1.
	SnapshotIntervalBytes int64
	// Now is the clock log-append times are taken from, and how long a
	// read replica's reads have failed (ShardHealth). nil selects
	// time.Now.
	Now func() time.Time
	// Logger receives warnings (torn log tails) and errors (failed log
	// writes). nil selects slog.Default().
	Logger *slog.Logger
	// OpenLog, when set, opens shard's metadata log instead of the
	// embedded file log under Dir (a Kafka-topic backend, or a test
	// double such as metalogtest.Memory). The Coordinator closes the logs
	// it opened.
	OpenLog func(shard int32) (metalog.Log, error)
	// ConfirmTimeout bounds one confirmation of a hosted shard's log
	// (metalog.Log.Confirm) before an answer is read from its state
	// without a write (DESIGN §Fencing, the read-index rule): when the
	// log cannot tell within it (Kafka unreachable), the answer is
	// NOT_LEADER_OR_FOLLOWER (NOT_COORDINATOR to a group request), which
	// clients retry. 0 selects DefaultConfirmTimeout.
	ConfirmTimeout time.Duration

	// RetentionCheckInterval is diskless.retention.check.interval.ms: how
	// often each shard applies its topics' retention.ms and
	// retention.bytes (runRetention). 0 selects
	// DefaultRetentionCheckInterval (Kafka's
	// log.retention.check.interval.ms); negative disables the periodic
	// check.
	RetentionCheckInterval time.Duration
	// Objects is the object store WAL objects are deleted from (file
	// lifecycle and orphan scan); objstore.Store satisfies it. nil: no
	// object is ever deleted (retention still moves log starts and files
	// are still released).
	Objects ObjectDeleter
	// Files answers DescribeFiles for other shards (SPEC §9). nil: this
	// Coordinator answers for every shard, as all of them run in this
	// process; a remote DescribeFiles client plugs in here.
	Files FileDescriber
	// FileDeletionDelay is diskless.file.deletion.delay.ms: an object no
	// owner shard references any more is deleted this long after that was
	// first seen, so that a fetch that planned its reads before the
	// batches went still finds the object (Kafka's file.delete.delay.ms).
	// 0 selects DefaultFileDeletionDelay. The deletion pass runs every
	// FileDeletionDelay/2 (at least every second).
	FileDeletionDelay time.Duration
	// OrphanScanInterval is diskless.coordinator.orphan.scan.interval.ms:
	// how often runOrphanScan runs. 0 selects DefaultOrphanScanInterval;
	// negative disables the periodic scan. With several sidecars sharing
	// a bucket, only the one that leads shard 0 runs it (the others set
	// −1); today every shard runs in this process, so it always does.
	OrphanScanInterval time.Duration
	// OrphanScanGracePeriod is
	// diskless.coordinator.orphan.scan.grace.period.ms: objects younger
	// than this are never taken for orphans, and a committed object is
	// never deleted before this long after its commit (another owner's
	// commit of it may still be in flight). It must be far above the
	// longest upload (all retries) plus commit; at least
	// MinOrphanScanGracePeriod. 0 selects DefaultOrphanScanGracePeriod.
	OrphanScanGracePeriod time.Duration
	// Sidecars are the sidecars a topic's disablement must be confirmed
	// by (SPEC §10: DisklessDisableTopic to each, retried until it
	// answers). nil: none but this process, which needs no message (its
	// produce path reads the catalog). cmd/sidecar passes the local
	// sidecar; a cluster of sidecars passes a client of the RPC.
	Sidecars Sidecars
	// LifecycleInterval is how often disablements in DISABLING are
	// driven again (sends to sidecars that did not confirm) and the
	// deleted topics' purge runs; both also run at once after a
	// DeleteTopic or a disablement, and at Open. 0 selects
	// DefaultLifecycleInterval; negative stops the loop (tests drive
	// runDisablement and runPurge themselves).
	LifecycleInterval time.Duration
	// ObjectKeyPrefix is diskless.object.key.prefix: the orphan scan lists
	// "<ObjectKeyPrefix>/". "" selects DefaultObjectKeyPrefix.
	ObjectKeyPrefix string

	// Segments is the store consolidation reads WAL objects from and puts
	// segment objects in (DESIGN §Consolidation); objstore.Store
	// satisfies it. nil: no consolidation.
	Segments SegmentStore
	// ConsolidationMinAge is diskless.consolidation.min.age.ms: the WAL
	// runs of files committed at least this long ago are rewritten into
	// segment objects. 0 selects DefaultConsolidationMinAge; negative
	// disables consolidation.
	ConsolidationMinAge time.Duration
	// ConsolidationInterval is diskless.consolidation.interval.ms: how
	// often a consolidation pass starts. 0 selects
	// DefaultConsolidationInterval; negative stops the periodic pass
	// (tests run runConsolidation themselves).
	ConsolidationInterval time.Duration
	// ConsolidationMaxBytesPerSec is
	// diskless.consolidation.max.bytes.per.sec: the bytes of WAL objects
	// consolidation reads per second, at most. 0 selects
	// DefaultConsolidationMaxBytesPerSec; −1 sets no limit.
	ConsolidationMaxBytesPerSec int64
	// SegmentBytes is diskless.consolidation.segment.bytes: the size a
	// segment object (data, index and trailer) is rolled at, for topics
	// that do not set segment.bytes. 0 selects DefaultSegmentBytes; at
	// most MaxSegmentBytes.
	SegmentBytes int64
	// SegmentRollTime is diskless.consolidation.segment.ms: how long past the
	// minimum age a partition's oldest unconsolidated run waits for its
	// segment to fill before the segment is written anyway, for topics
	// that do not set segment.ms. 0 selects DefaultSegmentRollTime.
	SegmentRollTime time.Duration
	// ConsolidationIndexIntervalBytes is
	// diskless.consolidation.index.interval.bytes: the bytes of batches
	// between two index entries of a segment object. 0 selects
	// DefaultConsolidationIndexIntervalBytes.
	ConsolidationIndexIntervalBytes int32
	// ConsolidationStagingDir is where segments are staged while they are
	// built (data.dir/consolidation): up to a segment per partition,
	// segment.ms of each partition's data. Emptied at Open. "": in
	// memory.
	ConsolidationStagingDir string

	// Groups configures each shard's consumer-group coordinator
	// (group.*, offsets.retention.minutes, offset.metadata.max.bytes);
	// group.Config.Validate names the keys.
	Groups group.Config
	// OffsetsRetentionCheckInterval is offsets.retention.check.interval.ms:
	// how often each shard removes the committed offsets that
	// offsets.retention.minutes expired (records 108 and 109). 0 selects
	// DefaultOffsetsRetentionCheckInterval; negative disables it.
	OffsetsRetentionCheckInterval time.Duration

	// Txns configures each shard's transaction coordinator
	// (transaction.max.timeout.ms; DESIGN §Transactions).
	Txns txn.Config
	// TxnAbortCheckInterval is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms: how
	// often each shard aborts the transactions whose timeout passed and
	// completes those whose markers are not all written (after a crash
	// or a failed write). 0 selects DefaultTxnAbortCheckInterval (Kafka's
	// 10 s); negative disables it.
	TxnAbortCheckInterval time.Duration
	// TxnIDExpirationCheckInterval is
	// transaction.remove.expired.transaction.cleanup.interval.ms: how
	// often each shard removes the transactional ids idle for
	// transactional.id.expiration.ms (Txns.IDExpirationMs). 0 selects
	// DefaultTxnIDExpirationCheckInterval (Kafka's 1 h); negative
	// disables it.
	TxnIDExpirationCheckInterval time.Duration

	// OpenFollower, when set, makes this coordinator one sidecar of a
	// cluster (DESIGN §Shard placement): Open hosts no shard but follows
	// every shard's log through it, as a read replica; Host and Release
	// move the shards this sidecar owns. OpenLog is then required: Host
	// takes a shard's log over with it. nil: every shard is hosted from
	// Open to Close, as a sidecar alone.
	OpenFollower func(shard int32) (metalog.Follower, error)
	// Remote reaches the shards this coordinator does not host, for the
	// steps of a catalog change, a disablement and producer-id blocks
	// that another shard must take; required with OpenFollower. The
	// router of package peer implements it over the coordinator RPCs.
	Remote Remote
}

// Remote is what a coordinator asks of shards other sidecars host (SPEC
// §9): each call is the local one of the same name, at the shard's owner.
type Remote interface {
	CreatePartitionsIn(ctx context.Context, shard int32, topics []diskless.TopicPartitions) error
	DeleteTopicsIn(ctx context.Context, shard int32, ids []diskless.TopicID) error
	DeleteRecords(ctx context.Context, tp diskless.TopicPartition, offset int64) (int64, error)
	AllocateProducerIDBlock(ctx context.Context, node int32) (first int64, size int32, err error)
	// CheckTxn and EndTxnOffsets are the transaction coordinator's calls
	// to a transactional id's and a consumer group's shard (DESIGN
	// §Transactions).
	CheckTxn(ctx context.Context, shard int32, req diskless.TxnCheck) (diskless.TxnCheckResult, error)
	EndTxnOffsets(ctx context.Context, shard int32, group string, pid int64, epoch int16, seq int64, committed bool) error
}

// Validate reports every invalid field of c (zero optional fields count as
// their defaults), each error naming the configuration key (the field, for
// those without one).
func (c Config) Validate() error {
	var errs []error
	if c.Dir == "" && c.OpenLog == nil {
		errs = append(errs, errors.New("coordinator: Dir, the metadata log directory, must be set"))
	}
	if c.NumShards < 1 || c.NumShards > MaxShards {
		errs = append(errs, fmt.Errorf("diskless.metadata.topic.num.partitions %d: must be in [1, %d]", c.NumShards, MaxShards))
	}
	if c.NodeID < 0 {
		errs = append(errs, fmt.Errorf("node.id %d: must be ≥ 0", c.NodeID))
	}
	if c.ProducerIDExpirationMs < 0 {
		errs = append(errs, fmt.Errorf("producer.id.expiration.ms %d: must be ≥ 1", c.ProducerIDExpirationMs))
	}
	if c.ConfirmTimeout < 0 {
		errs = append(errs, fmt.Errorf("coordinator: ConfirmTimeout %v: must be ≥ 0", c.ConfirmTimeout))
	}
	if c.SnapshotIntervalBytes < -1 {
		errs = append(errs, fmt.Errorf("coordinator: SnapshotIntervalBytes %d: must be ≥ -1", c.SnapshotIntervalBytes))
	}
	if c.SnapshotIntervalRecords < -1 {
		errs = append(errs, fmt.Errorf("coordinator: SnapshotIntervalRecords %d: must be ≥ -1", c.SnapshotIntervalRecords))
	}
	if c.FileDeletionDelay < 0 {
		errs = append(errs, fmt.Errorf("diskless.file.deletion.delay.ms %d: must be ≥ 0", c.FileDeletionDelay.Milliseconds()))
	}
	if c.OrphanScanGracePeriod != 0 && c.OrphanScanGracePeriod < MinOrphanScanGracePeriod {
		errs = append(errs, fmt.Errorf("diskless.coordinator.orphan.scan.grace.period.ms %d: must be ≥ %d (far above the longest upload plus commit)",
			c.OrphanScanGracePeriod.Milliseconds(), MinOrphanScanGracePeriod.Milliseconds()))
	}
	if c.ObjectKeyPrefix != "" && objstore.ValidateKey(c.ObjectKeyPrefix+"/x") != nil {
		errs = append(errs, fmt.Errorf("diskless.object.key.prefix %q: must be slash-separated segments without leading or trailing slash, empty, . or .. segments", c.ObjectKeyPrefix))
	}
	if c.ConsolidationMaxBytesPerSec < -1 {
		errs = append(errs, fmt.Errorf("diskless.consolidation.max.bytes.per.sec %d: must be ≥ -1", c.ConsolidationMaxBytesPerSec))
	}
	if c.SegmentBytes != 0 && (c.SegmentBytes < 1<<20 || c.SegmentBytes > MaxSegmentBytes) {
		errs = append(errs, fmt.Errorf("diskless.consolidation.segment.bytes %d: must be in [%d, %d]", c.SegmentBytes, 1<<20, MaxSegmentBytes))
	}
	if c.SegmentRollTime < 0 {
		errs = append(errs, fmt.Errorf("diskless.consolidation.segment.ms %d: must be ≥ 0", c.SegmentRollTime.Milliseconds()))
	}
	if c.ConsolidationIndexIntervalBytes < 0 {
		errs = append(errs, fmt.Errorf("diskless.consolidation.index.interval.bytes %d: must be ≥ 0", c.ConsolidationIndexIntervalBytes))
	}
	if err := c.Txns.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Groups.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.OpenFollower != nil && (c.OpenLog == nil || c.Remote == nil) {
		errs = append(errs, errors.New("coordinator: a clustered coordinator (OpenFollower) needs OpenLog and Remote"))
	}
	return errors.Join(errs...)
}

// withDefaults returns c with defaults filled in.
func (c Config) withDefaults() Config {
	if c.ProducerIDExpirationMs == 0 {
		c.ProducerIDExpirationMs = DefaultProducerIDExpirationMs
	}
	if c.SnapshotIntervalRecords == 0 {
		c.SnapshotIntervalRecords = DefaultSnapshotIntervalRecords
	}
	if c.SnapshotIntervalBytes == 0 {
		c.SnapshotIntervalBytes = DefaultSnapshotIntervalBytes
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.ConfirmTimeout == 0 {
		c.ConfirmTimeout = DefaultConfirmTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.RetentionCheckInterval == 0 {
		c.RetentionCheckInterval = DefaultRetentionCheckInterval
	}
	if c.FileDeletionDelay == 0 {
		c.FileDeletionDelay = DefaultFileDeletionDelay
	}
	if c.OrphanScanInterval == 0 {
		c.OrphanScanInterval = DefaultOrphanScanInterval
	}
	if c.OrphanScanGracePeriod == 0 {
		c.OrphanScanGracePeriod = DefaultOrphanScanGracePeriod
	}
	if c.ObjectKeyPrefix == "" {
		c.ObjectKeyPrefix = DefaultObjectKeyPrefix
	}
	if c.OffsetsRetentionCheckInterval == 0 {
		c.OffsetsRetentionCheckInterval = DefaultOffsetsRetentionCheckInterval
	}
	if c.TxnAbortCheckInterval == 0 {
		c.TxnAbortCheckInterval = DefaultTxnAbortCheckInterval
	}
	if c.TxnIDExpirationCheckInterval == 0 {
		c.TxnIDExpirationCheckInterval = DefaultTxnIDExpirationCheckInterval
	}
	if c.LifecycleInterval == 0 {
		c.LifecycleInterval = DefaultLifecycleInterval
	}
	if c.ConsolidationMinAge == 0 {
		c.ConsolidationMinAge = DefaultConsolidationMinAge
	}
	if c.ConsolidationInterval == 0 {
		c.ConsolidationInterval = DefaultConsolidationInterval
	}
	switch c.ConsolidationMaxBytesPerSec {
	case 0:
		c.ConsolidationMaxBytesPerSec = DefaultConsolidationMaxBytesPerSec
	case -1:
		c.ConsolidationMaxBytesPerSec = 0 // the throttle's "no limit"
	}
	if c.SegmentBytes == 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.SegmentRollTime == 0 {
		c.SegmentRollTime = DefaultSegmentRollTime
	}
	if c.ConsolidationIndexIntervalBytes == 0 {
		c.ConsolidationIndexIntervalBytes = DefaultConsolidationIndexIntervalBytes
	}
	return c
}
