// Package topicconfig parses and validates the Kafka topic configs a diskless
// topic carries (SPEC §11): the ones that change what the sidecar does, and a
// few broker-side ones that tools habitually set and that have no meaning
// for a diskless topic (accepted and kept, so DescribeConfigs shows them).
//
// Configs are stored as the strings the client sent (coordinator record 104)
// and parsed into [Config] whenever they are loaded or changed; a value that
// does not parse is refused with INVALID_CONFIG at CreateTopics and never
// reaches the log.
package topicconfig

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Names of the configs the sidecar acts on.
const (
	MaxMessageBytes        = "max.message.bytes"
	TimestampType          = "message.timestamp.type"
	TimestampBeforeMaxMs   = "message.timestamp.before.max.ms"
	TimestampAfterMaxMs    = "message.timestamp.after.max.ms"
	RetentionMs            = "retention.ms"
	RetentionBytes         = "retention.bytes"
	CleanupPolicy          = "cleanup.policy"
	CompressionType        = "compression.type"
	TimestampTypeCreate    = "CreateTime"
	TimestampTypeLogAppend = "LogAppendTime"
	// DisklessEnable and DisklessDisablePolicy are the disablement
	// configs (SPEC §10): diskless.enable=false (default true) starts
	// disabling the topic, diskless.disable.policy (retain, the default,
	// or delete) says what happens to its data.
	DisklessEnable        = "diskless.enable"
	DisklessDisablePolicy = "diskless.disable.policy"
	PolicyRetain          = "retain"
	PolicyDelete          = "delete"
)

// inert lists topic configs that Kafka tools set routinely but that govern
// broker-local logs or replication, which a diskless topic does not have.
// They are accepted and stored so that describing the topic shows them.
var inert = map[string]bool{
	"min.insync.replicas":                     true,
	"segment.bytes":                           true,
	"segment.ms":                              true,
	"segment.index.bytes":                     true,
	"segment.jitter.ms":                       true,
	"index.interval.bytes":                    true,
	"flush.messages":                          true,
	"flush.ms":                                true,
	"file.delete.delay.ms":                    true,
	"preallocate":                             true,
	"unclean.leader.election.enable":          true,
	"local.retention.ms":                      true,
	"local.retention.bytes":                   true,
	"remote.storage.enable":                   true,
	"message.downconversion.enable":           true,
	"follower.replication.throttled.replicas": true,
	"leader.replication.throttled.replicas":   true,
	"delete.retention.ms":                     true,
	"min.compaction.lag.ms":                   true,
	"max.compaction.lag.ms":                   true,
	"min.cleanable.dirty.ratio":               true,
}

// Config is the parsed form of a topic's configs. Durations are in ms, sizes
// in bytes; −1 means unlimited where Kafka uses that convention.
type Config struct {
	// MaxMessageBytes is the largest record batch accepted, in bytes
	// (default 1048588).
	MaxMessageBytes int32
	// LogAppendTime is true for message.timestamp.type=LogAppendTime.
	LogAppendTime bool
	// TimestampBeforeMaxMs and TimestampAfterMaxMs bound how far a
	// CreateTime batch's timestamps may lie before or after the server's
	// clock (defaults: unlimited and 3600000).
	TimestampBeforeMaxMs int64
	TimestampAfterMaxMs  int64
	// RetentionMs is the time retention in ms; −1 keeps data forever
	// (default 604800000).
	RetentionMs int64
	// RetentionBytes is the size retention per partition in bytes; −1 means
	// no limit (default −1).
	RetentionBytes int64
	// DisklessEnabled is diskless.enable (default true).
	DisklessEnabled bool
	// DisableDelete is diskless.disable.policy=delete (default retain).
	DisableDelete bool
	// Raw holds the configs as set on the topic, name → value, only those
	// explicitly set.
	Raw map[string]string
}

// Default values (SPEC §11, Kafka's topic defaults).
const (
	DefaultMaxMessageBytes      = 1048588
	DefaultRetentionMs          = 604800000
	DefaultRetentionBytes       = -1
	DefaultTimestampBeforeMaxMs = math.MaxInt64
	DefaultTimestampAfterMaxMs  = 3600000
)

// Defaults returns the config of a topic that sets nothing.
func Defaults() Config {
	return Config{
		MaxMessageBytes:      DefaultMaxMessageBytes,
		TimestampBeforeMaxMs: DefaultTimestampBeforeMaxMs,
		TimestampAfterMaxMs:  DefaultTimestampAfterMaxMs,
		RetentionMs:          DefaultRetentionMs,
		RetentionBytes:       DefaultRetentionBytes,
		DisklessEnabled:      true,
		Raw:                  map[string]string{},
	}
}

// Error describes one config that was refused; servers answer it with
// INVALID_CONFIG and its message.
type Error struct {
	Name, Value, Reason string
	// Request marks a refusal answered INVALID_REQUEST instead (an
	// unknown diskless.disable.policy, SPEC §10, as KIP-950 answers an
	// unknown remote.log.disable.policy).
	Request bool
}

func (e *Error) Error() string {
	return fmt.Sprintf("invalid value %q for topic config %s: %s", e.Value, e.Name, e.Reason)
}

// Parse validates raw (name → value) and returns the resulting Config. The
// first problem is returned as an *[Error]; unknown names are refused as
// Kafka does.
func Parse(raw map[string]string) (Config, error) {
	c := Defaults()
	names := make([]string, 0, len(raw))
	for n := range raw {
		names = append(names, n)
	}
	sort.Strings(names) // deterministic first error
	for _, name := range names {
		v := raw[name]
		if err := c.set(name, v); err != nil {
			return Config{}, err
		}
		c.Raw[name] = v
	}
	return c, nil
}

func (c *Config) set(name, v string) error {
	bad := func(reason string) error { return &Error{Name: name, Value: v, Reason: reason} }
	switch name {
	case MaxMessageBytes:
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			return bad("must be an int32 ≥ 0")
		}
		c.MaxMessageBytes = int32(n)
	case TimestampType:
		switch v {
		case TimestampTypeCreate:
			c.LogAppendTime = false
		case TimestampTypeLogAppend:
			c.LogAppendTime = true
		default:
			return bad("must be CreateTime or LogAppendTime")
		}
	case TimestampBeforeMaxMs, TimestampAfterMaxMs:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return bad("must be a long ≥ 0")
		}
		if name == TimestampBeforeMaxMs {
			c.TimestampBeforeMaxMs = n
		} else {
			c.TimestampAfterMaxMs = n
		}
	case RetentionMs, RetentionBytes:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < -1 {
			return bad("must be a long ≥ -1")
		}
		if name == RetentionMs {
			c.RetentionMs = n
		} else {
			c.RetentionBytes = n
		}
	case DisklessEnable:
		switch strings.ToLower(v) {
		case "true":
			c.DisklessEnabled = true
		case "false":
			c.DisklessEnabled = false
		default:
			return bad("must be true or false")
		}
	case DisklessDisablePolicy:
		switch v {
		case PolicyRetain:
			c.DisableDelete = false
		case PolicyDelete:
			c.DisableDelete = true
		default:
			return &Error{Name: name, Value: v, Reason: "must be retain or delete", Request: true}
		}
	case CleanupPolicy:
		if strings.TrimSpace(v) != "delete" {
			return bad("diskless topics support only cleanup.policy=delete")
		}
	case CompressionType:
		// The sidecar stores producers' batches untouched; it never recompresses.
		if v != "producer" {
			return bad("diskless topics keep the producer's compression; only \"producer\" is supported")
		}
	default:
		if !inert[name] {
			return &Error{Name: name, Value: v, Reason: "unknown topic config"}
		}
	}
	return nil
}

// MaxNameLen is Kafka's limit on topic names, in bytes.
const MaxNameLen = 249

// ValidateName applies Kafka's topic name rules: 1 … 249 characters of
// [a-zA-Z0-9._-], and neither "." nor "..". Brokers answer a name breaking
// them with INVALID_TOPIC_EXCEPTION; the error says which rule.
func ValidateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("topic name must not be empty")
	case name == "." || name == "..":
		return fmt.Errorf("topic name %q is not allowed", name)
	case len(name) > MaxNameLen:
		return fmt.Errorf("topic name is %d characters long; at most %d are allowed", len(name), MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		switch b := name[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9', b == '.', b == '_', b == '-':
		default:
			return fmt.Errorf("topic name %q holds %q; only ASCII letters, digits, '.', '_' and '-' are allowed", name, b)
		}
	}
	return nil
}

// ValidateCreate refuses configs a new topic may not have: a topic created
// on the sidecar is diskless, so diskless.enable=false (which disables an
// existing topic, SPEC §10) is refused naming the key.
func ValidateCreate(c Config) error {
	if !c.DisklessEnabled {
		return &Error{Name: DisklessEnable, Value: c.Raw[DisklessEnable], Reason: "a topic created on the sidecar is diskless; set it to false on an existing topic to disable diskless"}
	}
	return nil
}
