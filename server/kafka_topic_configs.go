package server

import (
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/topicconfig"
)

// kafkaTopicConfig is one topic config as a Kafka 4.4 broker with default
// broker configs describes it (DescribeConfigs v4 with synonyms, observed;
// SPEC §11): its type, default value, and the broker config that is its
// synonym ("" when Kafka lists none).
type kafkaTopicConfig struct {
	name    string
	typ     kmsg.ConfigType
	value   string
	synonym string
}

// kafkaTopicConfigs are the 37 configs Kafka 4.4 describes for a topic,
// then the two of SPEC §10. The values the sidecar acts on come from the
// topic's parsed config instead (topicConfigs).
var kafkaTopicConfigs = []kafkaTopicConfig{
	{"cleanup.policy", kmsg.ConfigTypeList, "delete", "log.cleanup.policy"},
	{"compression.gzip.level", kmsg.ConfigTypeInt, "-1", "compression.gzip.level"},
	{"compression.lz4.level", kmsg.ConfigTypeInt, "9", "compression.lz4.level"},
	{"compression.type", kmsg.ConfigTypeString, "producer", "compression.type"},
	{"compression.zstd.level", kmsg.ConfigTypeInt, "3", "compression.zstd.level"},
	{"delete.retention.ms", kmsg.ConfigTypeLong, "86400000", "log.cleaner.delete.retention.ms"},
	{"errors.deadletterqueue.group.enable", kmsg.ConfigTypeBoolean, "false", ""},
	{"file.delete.delay.ms", kmsg.ConfigTypeLong, "60000", "log.segment.delete.delay.ms"},
	{"flush.messages", kmsg.ConfigTypeLong, "9223372036854775807", "log.flush.interval.messages"},
	{"flush.ms", kmsg.ConfigTypeLong, "9223372036854775807", ""},
	{"follower.replication.throttled.replicas", kmsg.ConfigTypeList, "", ""},
	{"index.interval.bytes", kmsg.ConfigTypeInt, "4096", "log.index.interval.bytes"},
	{"leader.replication.throttled.replicas", kmsg.ConfigTypeList, "", ""},
	{"local.retention.bytes", kmsg.ConfigTypeLong, "-2", "log.local.retention.bytes"},
	{"local.retention.ms", kmsg.ConfigTypeLong, "-2", "log.local.retention.ms"},
	{"max.compaction.lag.ms", kmsg.ConfigTypeLong, "9223372036854775807", "log.cleaner.max.compaction.lag.ms"},
	{"max.decompressed.message.bytes", kmsg.ConfigTypeInt, "2147483639", "max.decompressed.message.bytes"},
	{"max.message.bytes", kmsg.ConfigTypeInt, "1048588", "message.max.bytes"},
	{"message.timestamp.after.max.ms", kmsg.ConfigTypeLong, "3600000", "log.message.timestamp.after.max.ms"},
	{"message.timestamp.before.max.ms", kmsg.ConfigTypeLong, "9223372036854775807", "log.message.timestamp.before.max.ms"},
	{"message.timestamp.type", kmsg.ConfigTypeString, "CreateTime", "log.message.timestamp.type"},
	{"min.cleanable.dirty.ratio", kmsg.ConfigTypeDouble, "0.5", "log.cleaner.min.cleanable.ratio"},
	{"min.compaction.lag.ms", kmsg.ConfigTypeLong, "0", "log.cleaner.min.compaction.lag.ms"},
	{"min.insync.replicas", kmsg.ConfigTypeInt, "1", "min.insync.replicas"},
	{"preallocate", kmsg.ConfigTypeBoolean, "false", "log.preallocate"},
	{"remote.copy.lag.bytes", kmsg.ConfigTypeLong, "-1", "log.remote.copy.lag.bytes"},
	{"remote.copy.lag.ms", kmsg.ConfigTypeLong, "0", "log.remote.copy.lag.ms"},
	{"remote.log.copy.disable", kmsg.ConfigTypeBoolean, "false", ""},
	{"remote.log.delete.on.disable", kmsg.ConfigTypeBoolean, "false", ""},
	{"remote.storage.enable", kmsg.ConfigTypeBoolean, "false", ""},
	{"retention.bytes", kmsg.ConfigTypeLong, "-1", "log.retention.bytes"},
	{"retention.ms", kmsg.ConfigTypeLong, "604800000", ""},
	{"segment.bytes", kmsg.ConfigTypeInt, "1073741824", "log.segment.bytes"},
	{"segment.index.bytes", kmsg.ConfigTypeInt, "10485760", "log.index.size.max.bytes"},
	{"segment.jitter.ms", kmsg.ConfigTypeLong, "0", ""},
	{"segment.ms", kmsg.ConfigTypeLong, "604800000", ""},
	{"unclean.leader.election.enable", kmsg.ConfigTypeBoolean, "false", "unclean.leader.election.enable"},
	// SPEC §10.
	{topicconfig.DisklessEnable, kmsg.ConfigTypeBoolean, "true", ""},
	{topicconfig.DisklessDisablePolicy, kmsg.ConfigTypeString, topicconfig.PolicyRetain, ""},
}

// The read-only entries that show a topic's diskless state and epoch
// (SPEC §10) in DescribeConfigs: source DYNAMIC_TOPIC_CONFIG once the
// topic was ever disabled (so that kafka-configs.sh --describe, which
// lists the dynamic ones, shows them), else DEFAULT_CONFIG.
const (
	disklessStateConfig      = "diskless.state"
	disklessStateEpochConfig = "diskless.state.epoch"
)

// describedConfig is one entry of a topic's DescribeConfigs answer.
type describedConfig struct {
	name, value string
	typ         kmsg.ConfigType
	source      kmsg.ConfigSource
	readOnly    bool
	// synonyms, most specific first (Kafka's order): the topic's own
	// setting when set, then the broker default.
	synonyms []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
}

// describeTopic lists a topic's configs as Kafka describes them: every
// config of kafkaTopicConfigs with its value in effect, set ones with
// source DYNAMIC_TOPIC_CONFIG and the others DEFAULT_CONFIG (isDefault is
// false for both, as Kafka 4.x answers), then any other config set on the
// topic, then the diskless state entries; sorted by name.
func describeTopic(t diskless.Topic) []describedConfig {
	effective := effectiveValues(t.Config)
	known := make(map[string]bool, len(kafkaTopicConfigs))
	var out []describedConfig
	for _, k := range kafkaTopicConfigs {
		known[k.name] = true
		value := k.value
		if v, ok := effective[k.name]; ok {
			value = v
		}
		d := describedConfig{name: k.name, value: value, typ: k.typ, source: kmsg.ConfigSourceDefaultConfig}
		if v, set := t.Config.Raw[k.name]; set {
			d.value, d.source = v, kmsg.ConfigSourceDynamicTopicConfig
			d.synonyms = append(d.synonyms, synonym(k.name, v, kmsg.ConfigSourceDynamicTopicConfig))
		}
		if k.synonym != "" {
			d.synonyms = append(d.synonyms, synonym(k.synonym, k.value, kmsg.ConfigSourceDefaultConfig))
		}
		out = append(out, d)
	}
	for n, v := range t.Config.Raw {
		if !known[n] {
			out = append(out, describedConfig{name: n, value: v, typ: kmsg.ConfigTypeString, source: kmsg.ConfigSourceDynamicTopicConfig,
				synonyms: []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{synonym(n, v, kmsg.ConfigSourceDynamicTopicConfig)}})
		}
	}
	src := kmsg.ConfigSourceDefaultConfig
	if t.Disablement.Epoch > 0 {
		src = kmsg.ConfigSourceDynamicTopicConfig
	}
	out = append(out,
		describedConfig{name: disklessStateConfig, value: t.Disablement.State.String(), typ: kmsg.ConfigTypeString, source: src, readOnly: true},
		describedConfig{name: disklessStateEpochConfig, value: strconv.Itoa(int(t.Disablement.Epoch)), typ: kmsg.ConfigTypeInt, source: src, readOnly: true},
	)
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func synonym(name, value string, src kmsg.ConfigSource) kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
	s.Name, s.Value, s.Source = name, kmsg.StringPtr(value), src
	return s
}

// effectiveValues are the values in effect of the configs the sidecar acts
// on (SPEC §11).
func effectiveValues(cfg topicconfig.Config) map[string]string {
	m := map[string]string{
		topicconfig.MaxMessageBytes:       strconv.FormatInt(int64(cfg.MaxMessageBytes), 10),
		topicconfig.TimestampType:         topicconfig.TimestampTypeCreate,
		topicconfig.TimestampBeforeMaxMs:  strconv.FormatInt(cfg.TimestampBeforeMaxMs, 10),
		topicconfig.TimestampAfterMaxMs:   strconv.FormatInt(cfg.TimestampAfterMaxMs, 10),
		topicconfig.RetentionMs:           strconv.FormatInt(cfg.RetentionMs, 10),
		topicconfig.RetentionBytes:        strconv.FormatInt(cfg.RetentionBytes, 10),
		topicconfig.DisklessEnable:        strconv.FormatBool(cfg.DisklessEnabled),
		topicconfig.DisklessDisablePolicy: topicconfig.PolicyRetain,
	}
	if cfg.LogAppendTime {
		m[topicconfig.TimestampType] = topicconfig.TimestampTypeLogAppend
	}
	if cfg.DisableDelete {
		m[topicconfig.DisklessDisablePolicy] = topicconfig.PolicyDelete
	}
	return m
}

// listConfigs are the list-typed topic configs, the only ones
// IncrementalAlterConfigs may APPEND to or SUBTRACT from (as Kafka).
var listConfigs = map[string]bool{
	"cleanup.policy": true,
	"follower.replication.throttled.replicas": true,
	"leader.replication.throttled.replicas":   true,
}
