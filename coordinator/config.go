package coordinator

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults and limits of Config.
const (
	// DefaultProducerIDExpirationMs is Kafka's producer.id.expiration.ms
	// default: one day (SPEC §11).
	DefaultProducerIDExpirationMs int64 = 86400000
	// DefaultSnapshotIntervalRecords is how many records a shard appends to
	// its log between two snapshots.
	DefaultSnapshotIntervalRecords int64 = 100000
	// MaxShards bounds diskless.metadata.topic.num.partitions: every shard
	// holds an open segment and a goroutine.
	MaxShards = 1024
)

// Config configures the coordinator shards of one node. The zero value of an
// optional field selects its default.
type Config struct {
	// Dir is the directory holding one subdirectory per shard's metadata
	// log (shard-<n>); it is created if missing. Required.
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
	// Now is the clock log-append times are taken from. nil selects
	// time.Now.
	Now func() time.Time
	// Logger receives warnings (torn log tails) and errors (failed log
	// writes). nil selects slog.Default().
	Logger *slog.Logger
	// OpenLog, when set, opens shard's metadata log instead of the
	// embedded file log under Dir (a Kafka-topic backend, or a test
	// double). The Coordinator closes the logs it opened.
	OpenLog func(shard int32) (Log, error)
}

// Validate reports the first invalid field, naming its config key.
func (c Config) Validate() error {
	switch {
	case c.Dir == "" && c.OpenLog == nil:
		return errors.New("coordinator: the metadata log directory (Dir) must be set")
	case c.NumShards < 1:
		return fmt.Errorf("diskless.metadata.topic.num.partitions must be ≥ 1, got %d", c.NumShards)
	case c.NumShards > MaxShards:
		return fmt.Errorf("diskless.metadata.topic.num.partitions must be ≤ %d, got %d", MaxShards, c.NumShards)
	case c.NodeID < 0:
		return fmt.Errorf("node.id must be ≥ 0, got %d", c.NodeID)
	case c.ProducerIDExpirationMs < 0:
		return fmt.Errorf("producer.id.expiration.ms must be ≥ 1, got %d", c.ProducerIDExpirationMs)
	case c.SnapshotIntervalRecords < -1:
		return fmt.Errorf("coordinator: SnapshotIntervalRecords must be ≥ -1, got %d", c.SnapshotIntervalRecords)
	}
	return nil
}

// withDefaults returns c with defaults filled in.
func (c Config) withDefaults() Config {
	if c.ProducerIDExpirationMs == 0 {
		c.ProducerIDExpirationMs = DefaultProducerIDExpirationMs
	}
	if c.SnapshotIntervalRecords == 0 {
		c.SnapshotIntervalRecords = DefaultSnapshotIntervalRecords
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}
