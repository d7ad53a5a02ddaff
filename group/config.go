package group

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Defaults, Kafka 4.x's (GroupCoordinatorConfig of kafka-group-coordinator).
const (
	DefaultMinSessionTimeout       = 6 * time.Second
	DefaultMaxSessionTimeout       = 30 * time.Minute
	DefaultInitialRebalanceDelay   = 3 * time.Second
	DefaultMaxSize                 = math.MaxInt32
	DefaultOffsetsRetention        = 7 * 24 * time.Hour
	DefaultOffsetMetadataMaxBytes  = 4096
	DefaultConsumerSessionTimeout  = 45 * time.Second
	DefaultConsumerHeartbeat       = 5 * time.Second
	DefaultConsumerMaxSize         = math.MaxInt32
	DefaultRegexRefreshInterval    = 10 * time.Minute
	DefaultAssignmentInterval      = time.Second
	DefaultNewMemberJoinTimeout    = 5 * time.Minute
	DefaultOffsetsRetentionCheck   = 10 * time.Minute
	maxRebalanceTimeoutMs          = math.MaxInt32
	defaultClassicRebalanceTimeout = 60_000 // JoinGroup v0 has no rebalance timeout: it is the session timeout
)

// Assignor names of the KIP-848 server-side assignors.
const (
	AssignorUniform = "uniform"
	AssignorRange   = "range"
)

// Config configures the group coordinator of one coordinator shard. The
// zero value of a field means its default.
type Config struct {
	// MinSessionTimeout and MaxSessionTimeout bound a classic member's
	// session timeout (group.min.session.timeout.ms, 6000;
	// group.max.session.timeout.ms, 1800000): a JoinGroup outside gets
	// INVALID_SESSION_TIMEOUT.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// InitialRebalanceDelay is how long the first rebalance of an empty
	// classic group waits for more members, extended by each new member up
	// to the rebalance timeout (group.initial.rebalance.delay.ms, 3000).
	InitialRebalanceDelay time.Duration
	// MaxSize is the most members a classic group holds (group.max.size,
	// 2147483647); past it a JoinGroup gets GROUP_MAX_SIZE_REACHED.
	MaxSize int
	// NewMemberJoinTimeout is how long a new classic member's JoinGroup may
	// wait in a rebalance before the member is dropped (Kafka's constant, 5
	// minutes).
	NewMemberJoinTimeout time.Duration
	// OffsetsRetention is how long committed offsets of an empty group (or
	// of topics a group no longer consumes) are kept
	// (offsets.retention.minutes, 10080), KIP-211.
	OffsetsRetention time.Duration
	// OffsetMetadataMaxBytes bounds a committed offset's metadata string
	// (offset.metadata.max.bytes, 4096): OFFSET_METADATA_TOO_LARGE past it.
	OffsetMetadataMaxBytes int
	// ConsumerSessionTimeout is a KIP-848 member's session timeout
	// (group.consumer.session.timeout.ms, 45000).
	ConsumerSessionTimeout time.Duration
	// ConsumerHeartbeatInterval is the interval KIP-848 members are told to
	// heartbeat at (group.consumer.heartbeat.interval.ms, 5000); it must be
	// below ConsumerSessionTimeout.
	ConsumerHeartbeatInterval time.Duration
	// ConsumerMaxSize is the most members a KIP-848 group holds
	// (group.consumer.max.size, 2147483647).
	ConsumerMaxSize int
	// Assignors are the server-side assignors offered to KIP-848 groups,
	// the first the default (group.consumer.assignors, "uniform,range").
	Assignors []string
	// AssignmentInterval is the least time between two runs of a KIP-848
	// group's assignor (group.consumer.assignment.interval.ms, 1000;
	// KIP-1263's assignment batching): a group epoch bumped within it —
	// members joining, leaving, changing their subscriptions — is
	// assigned when it has passed, once for all of them, so that a large
	// group coming up runs its assignor about once a second rather than
	// once per member, each run on the shard's driver. A group's first
	// run is at once. Negative: every epoch at once (the key's 0).
	AssignmentInterval time.Duration
	// RegexRefreshInterval is how often a KIP-848 group's subscribed
	// regular expressions are resolved again even when the topic catalog
	// did not change (group.consumer.regex.refresh.interval.ms, 600000).
	RegexRefreshInterval time.Duration
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.MinSessionTimeout, DefaultMinSessionTimeout)
	def(&c.MaxSessionTimeout, DefaultMaxSessionTimeout)
	def(&c.InitialRebalanceDelay, DefaultInitialRebalanceDelay)
	def(&c.NewMemberJoinTimeout, DefaultNewMemberJoinTimeout)
	def(&c.OffsetsRetention, DefaultOffsetsRetention)
	def(&c.ConsumerSessionTimeout, DefaultConsumerSessionTimeout)
	def(&c.ConsumerHeartbeatInterval, DefaultConsumerHeartbeat)
	def(&c.RegexRefreshInterval, DefaultRegexRefreshInterval)
	def(&c.AssignmentInterval, DefaultAssignmentInterval)
	if c.MaxSize == 0 {
		c.MaxSize = DefaultMaxSize
	}
	if c.ConsumerMaxSize == 0 {
		c.ConsumerMaxSize = DefaultConsumerMaxSize
	}
	if c.OffsetMetadataMaxBytes == 0 {
		c.OffsetMetadataMaxBytes = DefaultOffsetMetadataMaxBytes
	}
	if len(c.Assignors) == 0 {
		c.Assignors = []string{AssignorUniform, AssignorRange}
	}
	return c
}

// Validate reports the first invalid field, naming its config key.
func (c Config) Validate() error {
	c = c.withDefaults()
	pos := func(key string, d time.Duration) error {
		if d < 0 || d > math.MaxInt32*time.Millisecond {
			return fmt.Errorf("%s: %d ms is out of range", key, d.Milliseconds())
		}
		return nil
	}
	for _, f := range []struct {
		key string
		d   time.Duration
	}{
		{"group.min.session.timeout.ms", c.MinSessionTimeout},
		{"group.max.session.timeout.ms", c.MaxSessionTimeout},
		{"group.initial.rebalance.delay.ms", c.InitialRebalanceDelay},
		{"group.consumer.session.timeout.ms", c.ConsumerSessionTimeout},
		{"group.consumer.heartbeat.interval.ms", c.ConsumerHeartbeatInterval},
		{"group.consumer.regex.refresh.interval.ms", c.RegexRefreshInterval},
		{"group.consumer.assignment.interval.ms", max(c.AssignmentInterval, 0)},
	} {
		if err := pos(f.key, f.d); err != nil {
			return err
		}
	}
	if c.OffsetsRetention < time.Minute {
		return errors.New("offsets.retention.minutes: must be at least 1")
	}
	if c.MaxSessionTimeout < c.MinSessionTimeout {
		return errors.New("group.max.session.timeout.ms: below group.min.session.timeout.ms")
	}
	if c.ConsumerHeartbeatInterval >= c.ConsumerSessionTimeout {
		return errors.New("group.consumer.heartbeat.interval.ms: must be below group.consumer.session.timeout.ms")
	}
	if c.MaxSize < 1 {
		return errors.New("group.max.size: must be at least 1")
	}
	if c.ConsumerMaxSize < 1 {
		return errors.New("group.consumer.max.size: must be at least 1")
	}
	if c.OffsetMetadataMaxBytes < 0 {
		return errors.New("offset.metadata.max.bytes: must not be negative")
	}
	seen := map[string]bool{}
	for _, a := range c.Assignors {
		if a != AssignorUniform && a != AssignorRange {
			return fmt.Errorf("group.consumer.assignors: unknown assignor %q (uniform, range)", a)
		}
		if seen[a] {
			return fmt.Errorf("group.consumer.assignors: %q named twice", a)
		}
		seen[a] = true
	}
	return nil
}
