package kafkalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Defaults of Config.
const (
	// DefaultTopic is diskless.metadata.topic's default (KIP-1164's name).
	DefaultTopic = "__diskless_metadata"
	// DefaultReplicationFactor is
	// diskless.metadata.topic.replication.factor's default: 3, so that
	// with min.insync.replicas 2 a write acknowledged by acks=all survives
	// the loss of any one broker.
	DefaultReplicationFactor = 3
	// DefaultSnapshotPrefix is the first segment of every snapshot object
	// key. The WAL objects' prefix (diskless.object.key.prefix) must not
	// be it: the orphan scan would take snapshots for orphans.
	DefaultSnapshotPrefix = "snapshots"
	// DefaultAppendTimeout bounds one Append's produce and check (and a
	// claim's or pointer's): one that has not ended by then fails, even
	// when its batch was sent and its fate is unknown (the next Replay
	// settles it).
	DefaultAppendTimeout = 30 * time.Second
	// DefaultRequestTimeout bounds one admin or fetch request and a whole
	// replay's wait for a partition with no leader.
	DefaultRequestTimeout = 30 * time.Second
)

// Objects is where snapshots are stored: objstore.Store satisfies it.
type Objects interface {
	// Put stores data under key, atomically (objstore.Store.Put).
	Put(ctx context.Context, key string, data []byte) error
	// ReadRange reads the object's bytes from off into p, all of them or
	// an error, and reports its size (objstore.Store.ReadRange).
	ReadRange(ctx context.Context, key string, off int64, p []byte) (n int, size int64, err error)
	// Delete removes the object; a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

// Config configures the Kafka metadata-log backend. A zero optional field
// takes its default; Validate reports invalid fields naming their
// configuration keys.
type Config struct {
	// Brokers are the Kafka cluster's bootstrap servers, host:port
	// (diskless.metadata.kafka.bootstrap.servers). Required.
	Brokers []string
	// Topic is the metadata topic (diskless.metadata.topic), created if
	// absent; "" selects DefaultTopic.
	Topic string
	// Partitions is the number of coordinator shards
	// (diskless.metadata.topic.num.partitions), one partition each; an
	// existing topic must have exactly this many. 1 … 1024.
	Partitions int32
	// ReplicationFactor of a created topic
	// (diskless.metadata.topic.replication.factor), 1 … 32767; 0 selects
	// DefaultReplicationFactor. The topic is created with
	// min.insync.replicas = max(1, ReplicationFactor − 1).
	ReplicationFactor int16
	// ClusterID names the deployment in the shards' snapshot object keys; "" selects the Kafka cluster's id (from
	// Metadata), so that every sidecar of one Kafka cluster agrees on it.
	ClusterID string
	// Snapshots stores the shards' snapshots. Required.
	Snapshots Objects
	// SnapshotPrefix is the first segment of snapshot object keys
	// (<prefix>/<cluster id>/<topic>/<shard>/…); "" selects
	// DefaultSnapshotPrefix.
	SnapshotPrefix string
	// AppendTimeout and RequestTimeout: see their Default constants; 0
	// selects the default.
	AppendTimeout  time.Duration
	RequestTimeout time.Duration
	// WriterName names this process in the claims its logs append (for
	// people reading the log: e.g. the sidecar's advertised listener);
	// "" selects the host name. The process id and start time are added.
	WriterName string
	// Logger receives warnings (a damaged snapshot passed over) and the
	// Kafka clients' warnings; nil selects slog.Default().
	Logger *slog.Logger
	// ClientOpts are added to every Kafka client's options (tests: e.g.
	// shorter backoffs). Options that set what this package relies on
	// (acks, idempotence, a transactional id, the partitioner) must not be
	// among them.
	ClientOpts []kgo.Opt
}

// topicName is Kafka's legal topic name.
var topicName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// maxPartitions bounds diskless.metadata.topic.num.partitions (the
// coordinator's MaxShards).
const maxPartitions = 1024

// Validate reports every invalid field of c, each error naming its
// configuration key (zero optional fields count as their defaults).
// Snapshots, which no key sets, is checked by Open.
func (c Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("diskless.metadata.kafka.bootstrap.servers: must name at least one host:port with diskless.metadata.log=kafka"))
	}
	if c.Topic != "" && (!topicName.MatchString(c.Topic) || c.Topic == "." || c.Topic == "..") {
		errs = append(errs, fmt.Errorf("diskless.metadata.topic %q: not a Kafka topic name (1 to 249 of a-z A-Z 0-9 . _ -)", c.Topic))
	}
	if c.Partitions < 1 || c.Partitions > maxPartitions {
		errs = append(errs, fmt.Errorf("diskless.metadata.topic.num.partitions %d: must be in [1, %d]", c.Partitions, maxPartitions))
	}
	if c.ReplicationFactor < 0 {
		errs = append(errs, fmt.Errorf("diskless.metadata.topic.replication.factor %d: must be ≥ 1", c.ReplicationFactor))
	}
	if c.AppendTimeout < 0 || c.RequestTimeout < 0 {
		errs = append(errs, errors.New("kafkalog: negative timeout"))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.Topic == "" {
		c.Topic = DefaultTopic
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = DefaultReplicationFactor
	}
	if c.SnapshotPrefix == "" {
		c.SnapshotPrefix = DefaultSnapshotPrefix
	}
	if c.AppendTimeout == 0 {
		c.AppendTimeout = DefaultAppendTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}
