package server

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/topicconfig"
)

func TestCreateTopics(t *testing.T) {
	topic := func(name string, partitions int32, rf int16, configs ...string) kmsg.CreateTopicsRequestTopic {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
		for i := 0; i+1 < len(configs); i += 2 {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = configs[i], kmsg.StringPtr(configs[i+1])
			rt.Configs = append(rt.Configs, c)
		}
		return rt
	}
	assign := func(rt kmsg.CreateTopicsRequestTopic, replicas ...[]int32) kmsg.CreateTopicsRequestTopic {
		for i, r := range replicas {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = int32(i), r
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		}
		return rt
	}
	nullConfig := topic("nullcfg", 1, 1)
	nullConfig.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: topicconfig.RetentionMs}}
	badAssign := assign(topic("badassign", -1, -1), []int32{1}, []int32{2})
	badAssign.ReplicaAssignment[1].Partition = 5

	type want struct {
		name       string
		code       *kerr.Error
		partitions int32 // created (or validated) count
	}
	for _, tc := range []struct {
		name         string
		validateOnly bool
		createErr    error
		topics       []kmsg.CreateTopicsRequestTopic
		want         []want
	}{
		{name: "explicit", topics: []kmsg.CreateTopicsRequestTopic{topic("t", 3, 3, "retention.ms", "1000")},
			want: []want{{name: "t", partitions: 3}}},
		{name: "defaults", topics: []kmsg.CreateTopicsRequestTopic{topic("t", -1, -1)},
			want: []want{{name: "t", partitions: 2}}},
		{name: "exists", topics: []kmsg.CreateTopicsRequestTopic{topic("exists", 1, 1)},
			want: []want{{name: "exists", code: kerr.TopicAlreadyExists}}},
		{name: "invalid name", topics: []kmsg.CreateTopicsRequestTopic{topic("a b", 1, 1)},
			want: []want{{name: "a b", code: kerr.InvalidTopicException}}},
		{name: "zero partitions", topics: []kmsg.CreateTopicsRequestTopic{topic("t", 0, 1)},
			want: []want{{name: "t", code: kerr.InvalidPartitions}}},
		{name: "zero replication factor", topics: []kmsg.CreateTopicsRequestTopic{topic("t", 1, 0)},
			want: []want{{name: "t", code: kerr.InvalidReplicationFactor}}},
		{name: "invalid config", topics: []kmsg.CreateTopicsRequestTopic{topic("t", 1, 1, "cleanup.policy", "compact")},
			want: []want{{name: "t", code: kerr.InvalidConfig}}},
		{name: "null config value", topics: []kmsg.CreateTopicsRequestTopic{nullConfig},
			want: []want{{name: "nullcfg", code: kerr.InvalidConfig}}},
		{name: "duplicates", topics: []kmsg.CreateTopicsRequestTopic{topic("d", 1, 1), topic("ok", 1, 1), topic("d", 2, 1)},
			want: []want{{name: "d", code: kerr.InvalidRequest}, {name: "ok", partitions: 1}}},
		{name: "replica assignment", topics: []kmsg.CreateTopicsRequestTopic{assign(topic("t", -1, -1), []int32{1, 2}, []int32{2, 3}, []int32{3, 1})},
			want: []want{{name: "t", partitions: 3}}},
		{name: "replica assignment with partitions set", topics: []kmsg.CreateTopicsRequestTopic{assign(topic("t", 1, -1), []int32{1})},
			want: []want{{name: "t", code: kerr.InvalidRequest}}},
		{name: "replica assignment with a gap", topics: []kmsg.CreateTopicsRequestTopic{badAssign},
			want: []want{{name: "badassign", code: kerr.InvalidReplicaAssignment}}},
		{name: "replica assignment with uneven replicas", topics: []kmsg.CreateTopicsRequestTopic{assign(topic("t", -1, -1), []int32{1}, []int32{1, 2})},
			want: []want{{name: "t", code: kerr.InvalidReplicaAssignment}}},
		{name: "replica assignment with a duplicate replica", topics: []kmsg.CreateTopicsRequestTopic{assign(topic("t", -1, -1), []int32{1, 1})},
			want: []want{{name: "t", code: kerr.InvalidReplicaAssignment}}},
		{name: "validate only", validateOnly: true, topics: []kmsg.CreateTopicsRequestTopic{topic("t", 4, 3), topic("exists", 1, 1)},
			want: []want{{name: "t", partitions: 4}, {name: "exists", code: kerr.TopicAlreadyExists}}},
		{name: "catalog error code", createErr: kerr.InvalidTopicException, topics: []kmsg.CreateTopicsRequestTopic{topic("t", 1, 1)},
			want: []want{{name: "t", code: kerr.InvalidTopicException}}},
		{name: "catalog failure", createErr: errors.New("coordinator log unavailable"), topics: []kmsg.CreateTopicsRequestTopic{topic("t", 1, 1)},
			want: []want{{name: "t", code: kerr.UnknownServerError}}},
		{name: "catalog timeout", createErr: context.DeadlineExceeded, topics: []kmsg.CreateTopicsRequestTopic{topic("t", 1, 1)},
			want: []want{{name: "t", code: kerr.RequestTimedOut}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, nil)
			mustCreate(t, ts.cat, "exists", 1)
			if tc.createErr != nil {
				ts.cat.createHook = func(string) error { return tc.createErr }
			}
			req := kmsg.NewPtrCreateTopicsRequest()
			req.Version = 7
			req.ValidateOnly = tc.validateOnly
			req.Topics = tc.topics
			resp := ts.handleCreateTopics(context.Background(), req).(*kmsg.CreateTopicsResponse)
			if len(resp.Topics) != len(tc.want) {
				t.Fatalf("%d topics answered, want %d: %+v", len(resp.Topics), len(tc.want), resp.Topics)
			}
			for i, w := range tc.want {
				got := resp.Topics[i]
				if got.Topic != w.name {
					t.Fatalf("answer %d names %q, want %q", i, got.Topic, w.name)
				}
				if w.code != nil {
					if got.ErrorCode != w.code.Code || got.ErrorMessage == nil || *got.ErrorMessage == "" {
						t.Fatalf("%s: error %v (%v), want %v with a message", w.name, kerr.ErrorForCode(got.ErrorCode), got.ErrorMessage, w.code)
					}
					if w.name != "exists" {
						if _, created := ts.cat.Topic(w.name); created {
							t.Fatalf("%s created despite the error", w.name)
						}
					}
					continue
				}
				if got.ErrorCode != 0 {
					t.Fatalf("%s: error %v: %v", w.name, kerr.ErrorForCode(got.ErrorCode), *got.ErrorMessage)
				}
				if got.NumPartitions != w.partitions || got.ReplicationFactor != createdReplicationFactor || len(got.Configs) == 0 {
					t.Fatalf("%s: partitions %d rf %d configs %d", w.name, got.NumPartitions, got.ReplicationFactor, len(got.Configs))
				}
				created, ok := ts.cat.Topic(w.name)
				if tc.validateOnly {
					if ok || got.TopicID != ([16]byte{}) {
						t.Fatalf("%s: validate-only created the topic (id %x)", w.name, got.TopicID)
					}
					continue
				}
				if !ok || created.Partitions != w.partitions || diskless.TopicID(got.TopicID) != created.ID {
					t.Fatalf("%s: catalog %+v, response id %x", w.name, created, got.TopicID)
				}
			}
		})
	}
}

func TestTopicConfigEntries(t *testing.T) {
	cfg, err := topicconfig.Parse(map[string]string{"retention.ms": "1000", "segment.bytes": "1024", "message.timestamp.type": "LogAppendTime"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]kmsg.CreateTopicsResponseTopicConfig{}
	prev := ""
	for _, e := range topicConfigEntries(cfg) {
		if e.Name <= prev {
			t.Fatalf("entries not sorted: %q after %q", e.Name, prev)
		}
		prev = e.Name
		got[e.Name] = e
	}
	for name, want := range map[string]struct {
		value  string
		source int8
	}{
		"retention.ms":           {"1000", int8(kmsg.ConfigSourceDynamicTopicConfig)},
		"segment.bytes":          {"1024", int8(kmsg.ConfigSourceDynamicTopicConfig)},
		"message.timestamp.type": {"LogAppendTime", int8(kmsg.ConfigSourceDynamicTopicConfig)},
		"max.message.bytes":      {"1048588", int8(kmsg.ConfigSourceDefaultConfig)},
		"retention.bytes":        {"-1", int8(kmsg.ConfigSourceDefaultConfig)},
		"cleanup.policy":         {"delete", int8(kmsg.ConfigSourceDefaultConfig)},
	} {
		e, ok := got[name]
		if !ok || e.Value == nil || *e.Value != want.value || e.Source != want.source {
			t.Errorf("%s: %+v, want %q from source %d", name, e, want.value, want.source)
		}
	}
}

func TestCheckTopicName(t *testing.T) {
	long := make([]byte, topicconfig.MaxNameLen+1)
	for i := range long {
		long[i] = 'a'
	}
	for name, ok := range map[string]bool{
		"orders": true, "a.b_c-D9": true, string(long[:topicconfig.MaxNameLen]): true,
		"": false, ".": false, "..": false, string(long): false, "a b": false, "a/b": false, "é": false,
	} {
		if got := topicconfig.ValidateName(name) == nil; got != ok {
			t.Errorf("ValidateName(%q) valid=%v, want %v", name, got, ok)
		}
	}
}

// TestCreateTopicsConfigsAsDescribeConfigs: CreateTopics v7 answers the
// created topic's configs as DescribeConfigs then describes them — the
// same names, values, sources and read-only flags, sorted — as Kafka 4.4
// does (observed: 37 configs in both, the ones set DYNAMIC_TOPIC_CONFIG,
// the others DEFAULT_CONFIG), here with the four diskless ones.
func TestCreateTopicsConfigsAsDescribeConfigs(t *testing.T) {
	ts := startServer(t, nil)
	c := dialRaw(t, ts.Addr())
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "cfgs", 2, 1
	for _, kv := range [][2]string{{"retention.ms", "1000"}, {"segment.bytes", "1048576"}} {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = kv[0], kmsg.StringPtr(kv[1])
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	created := c.roundTrip(req).(*kmsg.CreateTopicsResponse)
	if len(created.Topics) != 1 || created.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics: %+v", created.Topics)
	}
	type entry struct {
		name, value string
		source      int8
		readOnly    bool
	}
	var fromCreate, fromDescribe []entry
	for _, e := range created.Topics[0].Configs {
		fromCreate = append(fromCreate, entry{e.Name, *e.Value, e.Source, e.ReadOnly})
	}
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	dreq.Version = 4
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "cfgs"
	dreq.Resources = append(dreq.Resources, res)
	described := c.roundTrip(dreq).(*kmsg.DescribeConfigsResponse)
	if len(described.Resources) != 1 || described.Resources[0].ErrorCode != 0 {
		t.Fatalf("DescribeConfigs: %+v", described.Resources)
	}
	for _, e := range described.Resources[0].Configs {
		fromDescribe = append(fromDescribe, entry{e.Name, *e.Value, int8(e.Source), e.ReadOnly})
	}
	if want := len(kafkaTopicConfigs) + 2; len(fromCreate) != want {
		t.Fatalf("CreateTopics answered %d configs, want %d (Kafka's 37, diskless.enable, .disable.policy, .state, .state.epoch)", len(fromCreate), want)
	}
	if !slices.Equal(fromCreate, fromDescribe) {
		t.Fatalf("CreateTopics configs differ from DescribeConfigs':\n%v\n%v", fromCreate, fromDescribe)
	}
	for _, e := range fromCreate {
		set := e.name == "retention.ms" || e.name == "segment.bytes"
		if want := int8(kmsg.ConfigSourceDefaultConfig); set {
			want = int8(kmsg.ConfigSourceDynamicTopicConfig)
			if e.source != want {
				t.Errorf("%s: source %d, want %d", e.name, e.source, want)
			}
		} else if e.source != want {
			t.Errorf("%s: source %d, want %d", e.name, e.source, want)
		}
	}
}
