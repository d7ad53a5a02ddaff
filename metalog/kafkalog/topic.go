package kafkalog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/metalog"
)

// ConfigError is returned (wrapped) by Open when the Kafka cluster or the
// existing topic refuses the configuration; Key names the configuration
// key to change.
type ConfigError struct {
	Key string
	Err error
}

func (e *ConfigError) Error() string { return e.Key + ": " + e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// ErrUnreachable is returned (wrapped) by Open when no broker of
// Config.Brokers answered: maybe transient.
var ErrUnreachable = errors.New("kafkalog: the Kafka cluster cannot be reached")

// Topic is one deployment's metadata topic on a Kafka cluster: partition n
// is coordinator shard n's log. Open it once per process; OpenLog opens a
// shard's log (fencing any other writer of it). Safe for concurrent use.
type Topic struct {
	cfg    Config
	logger *slog.Logger
	// cl is the client of metadata, fetch, ListOffsets and DeleteRecords
	// requests (the logs' producers are their own).
	cl        *kgo.Client
	adm       *kadm.Client
	clusterID string
	topicID   [16]byte
	// chunk is the largest part of a record body in one Kafka record, and
	// batchMax the producers' batch limit: both below the topic's
	// max.message.bytes.
	chunk    int
	batchMax int32

	leaders struct {
		sync.Mutex
		m map[int32]int32 // partition → leader broker id
	}
}

// Topic configs the backend creates the topic with and requires of an
// existing one (docs/format/metadata-records.md §The Kafka backend).
const (
	// minMaxMessageBytes is the least max.message.bytes accepted.
	minMaxMessageBytes = 64 << 10
	// defaultBatchMax is the producers' batch limit when the topic allows
	// more: kgo's default, below Kafka's default max.message.bytes
	// (1048588).
	defaultBatchMax = 1_000_000
	// recordOverhead is room for a Kafka record's framing and key, and a
	// batch header, around one part of a body.
	recordOverhead = 512
)

// Open connects to the Kafka cluster, creates the metadata topic if it is
// absent (cfg.Partitions partitions, cfg.ReplicationFactor replicas,
// min.insync.replicas = max(1, RF−1), unclean.leader.election.enable=false,
// retention.ms and retention.bytes −1, cleanup.policy=delete) and checks an
// existing one. Errors: cfg.Validate's; a nil cfg.Snapshots; ErrUnreachable; *ConfigError (an
// existing topic with another partition count names
// diskless.metadata.topic.num.partitions; one that would lose records —
// time or size retention, compaction, unclean leader election — names
// diskless.metadata.topic; a replication factor the cluster cannot place
// names diskless.metadata.topic.replication.factor).
func Open(ctx context.Context, cfg Config) (*Topic, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Snapshots == nil {
		return nil, errors.New("kafkalog: Snapshots, the object store, must be set")
	}
	cfg = cfg.withDefaults()
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID("diskless-sidecar-metalog"),
		kgo.WithLogger(kgoLogger{cfg.Logger}),
		kgo.RetryTimeout(cfg.RequestTimeout),
	}, cfg.ClientOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafkalog: %w", err)
	}
	t := &Topic{cfg: cfg, logger: cfg.Logger, cl: cl, adm: kadm.NewClient(cl)}
	t.leaders.m = make(map[int32]int32)
	if err := t.ensure(ctx); err != nil {
		cl.Close()
		return nil, err
	}
	return t, nil
}

// ensure creates or checks the topic and learns its id, the cluster id and
// the chunk size.
func (t *Topic) ensure(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.RequestTimeout)
	defer cancel()
	name := t.cfg.Topic
	md, err := t.metadata(ctx)
	if err != nil {
		return fmt.Errorf("%w (diskless.metadata.kafka.bootstrap.servers: %s): %w", ErrUnreachable, strings.Join(t.cfg.Brokers, ","), err)
	}
	t.clusterID = t.cfg.ClusterID
	if t.clusterID == "" && md.ClusterID != nil {
		t.clusterID = *md.ClusterID
	}
	if t.clusterID == "" {
		return errors.New("kafkalog: the Kafka cluster reports no cluster id")
	}
	td := md.Topics[0]
	switch err := kerr.ErrorForCode(td.ErrorCode); {
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		if err := t.create(ctx); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("kafkalog: describing topic %s: %w", name, err)
	case int32(len(td.Partitions)) != t.cfg.Partitions:
		return &ConfigError{Key: "diskless.metadata.topic.num.partitions", Err: fmt.Errorf(
			"%d, but the metadata topic %s has %d partitions (one per coordinator shard; the count cannot change)",
			t.cfg.Partitions, name, len(td.Partitions))}
	}
	if err := t.waitLeaders(ctx); err != nil {
		return err
	}
	return t.checkConfigs(ctx)
}

// create creates the metadata topic; another sidecar creating it at the
// same time is not an error.
func (t *Topic) create(ctx context.Context) error {
	rf := t.cfg.ReplicationFactor
	configs := map[string]*string{
		"min.insync.replicas":            ptr(strconv.Itoa(max(1, int(rf)-1))),
		"unclean.leader.election.enable": ptr("false"),
		"retention.ms":                   ptr("-1"),
		"retention.bytes":                ptr("-1"),
		"cleanup.policy":                 ptr("delete"),
	}
	resp, err := t.adm.CreateTopic(ctx, t.cfg.Partitions, rf, configs, t.cfg.Topic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case err == nil:
		t.logger.Info("kafkalog: created the metadata topic", "topic", t.cfg.Topic,
			"partitions", t.cfg.Partitions, "replication.factor", rf, "min.insync.replicas", max(1, int(rf)-1))
		return nil
	case errors.Is(err, kerr.TopicAlreadyExists):
		// Created by another sidecar meanwhile: check it like any other.
		md, err := t.metadata(ctx)
		if err != nil {
			return fmt.Errorf("kafkalog: describing topic %s: %w", t.cfg.Topic, err)
		}
		if n := int32(len(md.Topics[0].Partitions)); n != t.cfg.Partitions {
			return &ConfigError{Key: "diskless.metadata.topic.num.partitions", Err: fmt.Errorf(
				"%d, but the metadata topic %s has %d partitions", t.cfg.Partitions, t.cfg.Topic, n)}
		}
		return nil
	case errors.Is(err, kerr.InvalidReplicationFactor):
		return &ConfigError{Key: "diskless.metadata.topic.replication.factor", Err: fmt.Errorf(
			"%d: the Kafka cluster cannot place that many replicas of %s: %w", rf, t.cfg.Topic, err)}
	default:
		return fmt.Errorf("kafkalog: creating topic %s: %w", t.cfg.Topic, err)
	}
}

// checkConfigs refuses a topic that could lose records on its own, and
// derives the chunk size from its max.message.bytes.
func (t *Topic) checkConfigs(ctx context.Context) error {
	var rc kadm.ResourceConfig
	if err := retryUnknownTopic(ctx, func() error {
		rcs, err := t.adm.DescribeTopicConfigs(ctx, t.cfg.Topic)
		if err == nil {
			rc, err = rcs.On(t.cfg.Topic, nil)
		}
		if err == nil {
			err = rc.Err
		}
		return err
	}); err != nil {
		return fmt.Errorf("kafkalog: describing the configs of topic %s: %w", t.cfg.Topic, err)
	}
	get := func(k string) (string, bool) {
		for _, c := range rc.Configs {
			if c.Key == k && c.Value != nil {
				return *c.Value, true
			}
		}
		return "", false
	}
	refuse := func(format string, args ...any) error {
		return &ConfigError{Key: "diskless.metadata.topic", Err: fmt.Errorf("%s: "+format, append([]any{t.cfg.Topic}, args...)...)}
	}
	if v, _ := get("cleanup.policy"); strings.Contains(v, "compact") {
		return refuse("cleanup.policy=%s: the metadata topic must use cleanup.policy=delete (compaction would refuse DeleteRecords)", v)
	}
	for _, k := range []string{"retention.ms", "retention.bytes"} {
		if v, ok := get(k); ok && v != "-1" {
			return refuse("%s=%s: the metadata topic must keep every record until the coordinator removes it after a snapshot; set %s=-1", k, v, k)
		}
	}
	if v, _ := get("unclean.leader.election.enable"); v == "true" {
		return refuse("unclean.leader.election.enable=true could lose acknowledged commits; set it to false")
	}
	mmb := int64(1048588) // Kafka's default max.message.bytes
	if v, ok := get("max.message.bytes"); ok {
		var err error
		if mmb, err = strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("kafkalog: topic %s: max.message.bytes %q: %w", t.cfg.Topic, v, err)
		}
	}
	if mmb < minMaxMessageBytes {
		return refuse("max.message.bytes=%d: at least %d needed", mmb, minMaxMessageBytes)
	}
	t.batchMax = int32(min(mmb, defaultBatchMax))
	t.chunk = int(t.batchMax) - recordOverhead
	if v, ok := get("min.insync.replicas"); ok && v == "1" && t.cfg.ReplicationFactor > 1 {
		t.logger.Warn("kafkalog: the metadata topic has min.insync.replicas=1: an acknowledged commit survives only while the broker that took it does",
			"topic", t.cfg.Topic)
	}
	return nil
}

// waitLeaders waits until every partition has a leader and learns the
// topic id.
func (t *Topic) waitLeaders(ctx context.Context) error {
	for {
		md, err := t.metadata(ctx)
		if err == nil {
			td := md.Topics[0]
			ok := td.ErrorCode == 0 && int32(len(td.Partitions)) == t.cfg.Partitions
			for _, p := range td.Partitions {
				ok = ok && p.ErrorCode == 0 && p.Leader >= 0
			}
			if ok {
				t.topicID = td.TopicID
				t.leaders.Lock()
				for _, p := range td.Partitions {
					t.leaders.m[p.Partition] = p.Leader
				}
				t.leaders.Unlock()
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafkalog: the partitions of topic %s have no leader: %w", t.cfg.Topic, cmp.Or(err, ctx.Err()))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// metadata asks a broker (never the client's cache) for the topic's
// metadata; the answer holds exactly one topic.
func (t *Topic) metadata(ctx context.Context) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = ptr(t.cfg.Topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, t.cl)
	if err != nil {
		return nil, err
	}
	if len(resp.Topics) != 1 {
		return nil, fmt.Errorf("kafkalog: Metadata answered %d topics for 1", len(resp.Topics))
	}
	return resp, nil
}

// ClusterID returns the cluster id the topic's snapshot keys use: Config.ClusterID, or the Kafka cluster's.
func (t *Topic) ClusterID() string { return t.clusterID }

// Name returns the topic's name.
func (t *Topic) Name() string { return t.cfg.Topic }

// Close closes the topic's client. Close the logs first.
func (t *Topic) Close() { t.cl.Close() }

// OpenLog opens shard's log: the partition of that number. Its first
// Replay takes the shard over (a claim), fencing every other writer of
// it. Its signature fits coordinator.Config.OpenLog.
func (t *Topic) OpenLog(shard int32) (metalog.Log, error) {
	if shard < 0 || shard >= t.cfg.Partitions {
		return nil, fmt.Errorf("kafkalog: shard %d out of [0, %d)", shard, t.cfg.Partitions)
	}
	return t.openLog(shard)
}

// leader returns partition's leader as last learned, refreshing it from
// Metadata when unknown or when refresh is set.
func (t *Topic) leader(ctx context.Context, partition int32, refresh bool) (int32, error) {
	t.leaders.Lock()
	id, ok := t.leaders.m[partition]
	t.leaders.Unlock()
	if ok && !refresh && id >= 0 {
		return id, nil
	}
	resp, err := t.metadata(ctx)
	if err != nil {
		return -1, err
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			return -1, err
		}
		for _, p := range rt.Partitions {
			t.leaders.Lock()
			t.leaders.m[p.Partition] = p.Leader
			t.leaders.Unlock()
			if p.Partition == partition {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil && p.Leader < 0 {
					return -1, err
				}
				id = p.Leader
			}
		}
	}
	if id < 0 {
		return -1, kerr.LeaderNotAvailable
	}
	return id, nil
}

// unknownTopicWait bounds how long retryUnknownTopic waits for a broker
// to learn of the topic: far above the moments observed (a start-up in a
// full test run failed on the first answer), far below a start-up's
// bound.
const unknownTopicWait = 10 * time.Second

// retryUnknownTopic calls fn until it returns anything but
// UNKNOWN_TOPIC_OR_PARTITION — what a broker that has not yet learned of
// the topic just created answers for a moment — every 50 ms, for at most
// unknownTopicWait or until ctx ends, and returns fn's last error.
func retryUnknownTopic(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(unknownTopicWait)
	for {
		err := fn()
		if !errors.Is(err, kerr.UnknownTopicOrPartition) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// listOffset returns partition's offset for timestamp: −1 the high
// watermark, −2 the log start offset; UNKNOWN_TOPIC_OR_PARTITION is asked
// again (retryUnknownTopic).
func (t *Topic) listOffset(ctx context.Context, partition int32, timestamp int64) (off int64, err error) {
	err = retryUnknownTopic(ctx, func() error {
		off, err = t.listOffsetOnce(ctx, partition, timestamp)
		return err
	})
	return off, err
}

func (t *Topic) listOffsetOnce(ctx context.Context, partition int32, timestamp int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	req.IsolationLevel = 0 // read_uncommitted: nothing here is transactional
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = t.cfg.Topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = partition
	rp.CurrentLeaderEpoch = -1
	rp.Timestamp = timestamp
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, t.cl)
	if err != nil {
		return -1, err
	}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if p.Partition == partition {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return -1, err
				}
				return p.Offset, nil
			}
		}
	}
	return -1, fmt.Errorf("kafkalog: ListOffsets answered without partition %d", partition)
}

// deleteRecords moves partition's log start offset to before
// (DeleteRecords), deleting the records below it.
func (t *Topic) deleteRecords(ctx context.Context, partition int32, before int64) error {
	os := make(kadm.Offsets)
	os.Add(kadm.Offset{Topic: t.cfg.Topic, Partition: partition, At: before})
	resps, err := t.adm.DeleteRecords(ctx, os)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return fmt.Errorf("kafkalog: deleting the records of partition %d of %s before offset %d: %w", partition, t.cfg.Topic, before, err)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// kgoLogger passes the Kafka clients' log to slog: warnings and errors as
// such, everything else at debug when that is enabled.
type kgoLogger struct{ l *slog.Logger }

func (k kgoLogger) Level() kgo.LogLevel {
	if k.l.Enabled(context.Background(), slog.LevelDebug) {
		return kgo.LogLevelDebug
	}
	return kgo.LogLevelWarn
}

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lv := slog.LevelDebug
	switch level {
	case kgo.LogLevelError:
		lv = slog.LevelError
	case kgo.LogLevelWarn:
		lv = slog.LevelWarn
	}
	k.l.Log(context.Background(), lv, "kafkalog: kafka client: "+msg, keyvals...)
}
