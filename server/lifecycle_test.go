package server

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDeleteTopicsAnswers pins DeleteTopics v6's answers to what Kafka
// 4.4 answers (observed): by id and by name, unknown ids, both or neither,
// and a name whose id was given too.
func TestDeleteTopicsAnswers(t *testing.T) {
	ts := startServer(t, nil)
	ctx := context.Background()
	a, _ := ts.cat.CreateTopic(ctx, "a", 1, nil)
	b, _ := ts.cat.CreateTopic(ctx, "b", 1, nil)
	c := dialRaw(t, ts.Addr())
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	topic := func(name string, id [16]byte) kmsg.DeleteTopicsRequestTopic {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		if name != "" {
			rt.Topic = kmsg.StringPtr(name)
		}
		rt.TopicID = id
		return rt
	}
	req.Topics = []kmsg.DeleteTopicsRequestTopic{
		topic("", a.ID), topic("", a.ID), topic("b", [16]byte{}), topic("b", a.ID), topic("", [16]byte{}), topic("zz", [16]byte{}),
	}
	resp := c.roundTrip(req).(*kmsg.DeleteTopicsResponse)
	want := []struct {
		code int16
		name string
		msg  string
	}{
		{0, "a", ""},
		{kerr.UnknownTopicID.Code, "", "This server does not host this topic ID."},
		{0, "b", ""},
		{kerr.InvalidRequest.Code, "b", "You may not specify both topic name and topic id."},
		{kerr.InvalidRequest.Code, "", "Neither topic name nor id were specified."},
		{kerr.UnknownTopicOrPartition.Code, "zz", kerr.UnknownTopicOrPartition.Description},
	}
	if len(resp.Topics) != len(want) {
		t.Fatalf("%d answers", len(resp.Topics))
	}
	for i, w := range want {
		got := resp.Topics[i]
		name, msg := "", ""
		if got.Topic != nil {
			name = *got.Topic
		}
		if got.ErrorMessage != nil {
			msg = *got.ErrorMessage
		}
		if got.ErrorCode != w.code || name != w.name || msg != w.msg {
			t.Errorf("topic %d: code %d name %q msg %q, want %d %q %q", i, got.ErrorCode, name, msg, w.code, w.name, w.msg)
		}
	}
	if resp.Topics[2].TopicID != b.ID {
		t.Error("by name in v6: the id is not filled in")
	}
	if _, ok := ts.cat.Topic("a"); ok {
		t.Error("a not deleted")
	}
}

// TestDescribeConfigsAsKafka: the 37 configs Kafka 4.4 describes plus the
// diskless ones, sources and synonyms as Kafka answers for a set and an
// unset config.
func TestDescribeConfigsAsKafka(t *testing.T) {
	ts := startServer(t, nil)
	if _, err := ts.cat.CreateTopic(context.Background(), "t", 1, map[string]string{"max.message.bytes": "2000000"}); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, ts.Addr())
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
	req.Resources = []kmsg.DescribeConfigsRequestResource{r}
	req.Version, req.IncludeSynonyms = 4, true
	resp := c.roundTrip(req).(*kmsg.DescribeConfigsResponse)
	got := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, e := range resp.Resources[0].Configs {
		got[e.Name] = e
	}
	if n := len(got); n != 37+4 {
		t.Fatalf("%d configs, want 37 of Kafka's and 4 diskless ones", n)
	}
	mmb := got["max.message.bytes"]
	if *mmb.Value != "2000000" || mmb.Source != kmsg.ConfigSourceDynamicTopicConfig || len(mmb.ConfigSynonyms) != 2 ||
		mmb.ConfigSynonyms[0].Name != "max.message.bytes" || mmb.ConfigSynonyms[1].Name != "message.max.bytes" ||
		*mmb.ConfigSynonyms[1].Value != "1048588" || mmb.ConfigSynonyms[1].Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("max.message.bytes: %+v", mmb)
	}
	seg := got["segment.bytes"]
	if *seg.Value != "1073741824" || seg.Source != kmsg.ConfigSourceDefaultConfig || seg.IsDefault || seg.ConfigType != kmsg.ConfigTypeInt ||
		len(seg.ConfigSynonyms) != 1 || seg.ConfigSynonyms[0].Name != "log.segment.bytes" {
		t.Errorf("segment.bytes: %+v", seg)
	}
	if st := got["diskless.state"]; *st.Value != "ENABLED" || !st.ReadOnly {
		t.Errorf("diskless.state: %+v", st)
	}
}

// TestIncrementalAlterConfigsRefusals: Kafka's refusals, per resource.
func TestIncrementalAlterConfigsRefusals(t *testing.T) {
	ts := startServer(t, nil)
	if _, err := ts.cat.CreateTopic(context.Background(), "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, ts.Addr())
	for _, tc := range []struct {
		topic, name, value string
		op                 kmsg.IncrementalAlterConfigOp
		code               int16
		msg                string
	}{
		{"t", "retention.ms", "1000", 0, 0, ""},
		{"t", "bogus.key", "1", 0, kerr.InvalidConfig.Code, "Unknown topic config name: bogus.key"},
		{"t", "retention.ms", "abc", 0, kerr.InvalidConfig.Code, `invalid value "abc" for topic config retention.ms: must be a long ≥ -1`},
		{"t", "retention.ms", "1", 2, kerr.InvalidConfig.Code, "Config value append is not allowed for config key: retention.ms"},
		{"t", "diskless.disable.policy", "shred", 0, kerr.InvalidRequest.Code, `invalid value "shred" for topic config diskless.disable.policy: must be retain or delete`},
		{"t", "diskless.state", "DISABLED", 0, kerr.InvalidConfig.Code, "topic config diskless.state is read-only"},
		{"nope", "retention.ms", "1", 0, kerr.UnknownTopicOrPartition.Code, "The topic 'nope' does not exist."},
	} {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, tc.topic
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Op, cfg.Value = tc.name, tc.op, kmsg.StringPtr(tc.value)
		r.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{cfg}
		req.Resources = []kmsg.IncrementalAlterConfigsRequestResource{r}
		got := c.roundTrip(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
		msg := ""
		if got.ErrorMessage != nil {
			msg = *got.ErrorMessage
		}
		if got.ErrorCode != tc.code || msg != tc.msg {
			t.Errorf("%s %s=%s: %d %q, want %d %q", tc.topic, tc.name, tc.value, got.ErrorCode, msg, tc.code, tc.msg)
		}
	}
	if tp, _ := ts.cat.Topic("t"); tp.Config.RetentionMs != 1000 {
		t.Errorf("retention.ms %d after the change", tp.Config.RetentionMs)
	}
}

// TestCreatePartitionsAssignments pins CreatePartitions v3's answers to
// replica assignments: Kafka 4.4's INVALID_REPLICA_ASSIGNMENT messages
// (observed) for a count of assignments other than the partitions added,
// an empty replica list and a broker named twice; assignments of differing
// widths refused too; broker ids and widths otherwise taken (SPEC §6).
func TestCreatePartitionsAssignments(t *testing.T) {
	ts := startServer(t, nil)
	ctx := context.Background()
	if _, err := ts.cat.CreateTopic(ctx, "grow", 2, nil); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, ts.Addr())
	for _, tc := range []struct {
		name    string
		count   int32
		as      [][]int32
		code    int16
		message string
	}{
		{"fewer assignments", 4, [][]int32{{0}}, kerr.InvalidReplicaAssignment.Code,
			"Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."},
		{"more assignments", 3, [][]int32{{0}, {0}}, kerr.InvalidReplicaAssignment.Code,
			"Attempted to add 1 additional partition(s), but only 2 assignment(s) were specified."},
		{"empty replica list", 4, [][]int32{{0}, {}}, kerr.InvalidReplicaAssignment.Code,
			"The manual partition assignment includes an empty replica list."},
		{"a broker twice", 3, [][]int32{{1, 1}}, kerr.InvalidReplicaAssignment.Code,
			"The manual partition assignment includes the broker 1 more than once."},
		{"widths differ", 4, [][]int32{{0, 1}, {0}}, kerr.InvalidReplicaAssignment.Code,
			"The manual partition assignment includes a partition with 1 replica(s), but the first new partition has 2."},
		{"any brokers, any width", 4, [][]int32{{7, 8, 9}, {1, 2, 3}}, 0, ""},
	} {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.Version = 3
		req.TimeoutMillis = 30000
		req.ValidateOnly = true
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = "grow", tc.count
		for _, r := range tc.as {
			a := kmsg.NewCreatePartitionsRequestTopicAssignment()
			a.Replicas = r
			rt.Assignment = append(rt.Assignment, a)
		}
		req.Topics = append(req.Topics, rt)
		resp := c.roundTrip(req).(*kmsg.CreatePartitionsResponse)
		if len(resp.Topics) != 1 {
			t.Fatalf("%s: %d answers", tc.name, len(resp.Topics))
		}
		got := resp.Topics[0]
		msg := ""
		if got.ErrorMessage != nil {
			msg = *got.ErrorMessage
		}
		if got.ErrorCode != tc.code || msg != tc.message {
			t.Errorf("%s: %d %q, want %d %q", tc.name, got.ErrorCode, msg, tc.code, tc.message)
		}
	}
}
