package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
)

// fetchOffsetsRaw asks OffsetFetch v8 for the group's offsets of the
// partitions named (topics nil: every offset) and returns topic →
// partition → offset as answered (−1: none).
func fetchOffsetsRaw(t *testing.T, rc *RawConn, group string, topics map[string][]int32) map[string]map[int32]int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	for tp, ps := range topics {
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = tp, ps
		rg.Topics = append(rg.Topics, rt)
	}
	req.Groups = append(req.Groups, rg)
	resp := rc.Request(req).(*kmsg.OffsetFetchResponse)
	if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("OffsetFetch %s: %+v", group, resp.Groups)
	}
	out := map[string]map[int32]int64{}
	for _, rt := range resp.Groups[0].Topics {
		out[rt.Topic] = map[int32]int64{}
		for _, p := range rt.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("OffsetFetch %s %s-%d: %v", group, rt.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
			out[rt.Topic][p.Partition] = p.Offset
		}
	}
	return out
}

// TestDeleteTopicRemovesGroupOffsets: deleting a topic removes every
// consumer group's committed offsets of it, as Kafka 4.4 does (SPEC §6):
// OffsetFetch of the group no longer lists the topic and answers −1 for
// its partitions; kafka-consumer-groups --describe shows only the other
// topic's rows, and a group that held only the deleted topic's offsets
// is still listed, with no active members; a commit of the deleted topic
// gets UNKNOWN_TOPIC_OR_PARTITION; all of it holds after a SIGKILL and a
// restart (replay), and a topic re-created under the name inherits no
// offset.
func TestDeleteTopicRemovesGroupOffsets(t *testing.T) {
	t.Parallel()
	kafkatest.Require(t)
	const partitions = 4
	ctx := testCtx(t, 4*time.Minute)
	sc := StartSidecar(t, "", groupSidecarSets...)
	createTopic(t, ctx, sc, "del-t", partitions, nil)
	createTopic(t, ctx, sc, "del-u", 2, nil)
	produceValues(t, ctx, sc, "del-t", partitions, 0, 200)
	produceValues(t, ctx, sc, "del-u", 2, 0, 100)

	// A kgo group member consumes both topics to the end and commits.
	cl := sc.Client(kgo.ConsumerGroup("gd-both"), kgo.ConsumeTopics("del-t", "del-u"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	for got := 0; got < 300; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll: %v", err)
		}
		got += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	cl.Close()
	adm := kadm.NewClient(sc.Client())
	// A simple group (no members) holding only the topic to delete.
	only := kadm.Offsets{}
	only.Add(kadm.Offset{Topic: "del-t", Partition: 1, At: 17, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(ctx, "gd-only", only); err != nil || r.Error() != nil {
		t.Fatalf("commit gd-only: %v %v", err, r.Error())
	}
	rc := sc.DialRaw()
	if got := fetchOffsetsRaw(t, rc, "gd-both", nil); len(got["del-t"]) != partitions || len(got["del-u"]) != 2 {
		t.Fatalf("before the deletion gd-both holds %v", got)
	}

	if _, err := adm.DeleteTopics(ctx, "del-t"); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		got := fetchOffsetsRaw(t, rc, "gd-both", nil)
		if _, ok := got["del-t"]; ok || len(got["del-u"]) != 2 || got["del-u"][0]+got["del-u"][1] != 100 {
			t.Fatalf("%s: gd-both holds %v; want del-u only, at its ends", when, got)
		}
		asked := fetchOffsetsRaw(t, rc, "gd-both", map[string][]int32{"del-t": {0, 1}})
		if asked["del-t"][0] != -1 || asked["del-t"][1] != -1 {
			t.Fatalf("%s: OffsetFetch of the deleted topic's partitions = %v, want -1", when, asked)
		}
		if got := fetchOffsetsRaw(t, rc, "gd-only", nil); len(got) != 0 {
			t.Fatalf("%s: gd-only holds %v", when, got)
		}
	}
	check("after DeleteTopics")
	out := tool(t, ctx, sc, "kafka-consumer-groups", "--describe", "--group", "gd-both")
	if strings.Contains(out, "del-t") || strings.Count(out, "del-u") != 2 {
		t.Fatalf("kafka-consumer-groups --describe after the deletion:\n%s", out)
	}
	// Kafka 4.4 keeps the emptied group until its next expiry check.
	if out := tool(t, ctx, sc, "kafka-consumer-groups", "--list"); !strings.Contains(out, "gd-only") {
		t.Fatalf("the group that held only the deleted topic's offsets is not listed:\n%s", out)
	}
	_, stderr, err := kafkatest.Tool(ctx, "kafka-consumer-groups", "--bootstrap-server", sc.Addr, "--describe", "--group", "gd-only")
	if err != nil || !strings.Contains(stderr, "Consumer group 'gd-only' has no active members.") {
		t.Fatalf("kafka-consumer-groups --describe --group gd-only: %v\n%s", err, stderr)
	}
	// By name (v9): a client with the old topic id in its metadata would
	// get UNKNOWN_TOPIC_ID with v10.
	creq := kmsg.NewPtrOffsetCommitRequest()
	creq.Version, creq.Group, creq.Generation = 9, "gd-only", -1
	creq.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "del-t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5, LeaderEpoch: -1}}}}
	if code := rc.Request(creq).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("commit of the deleted topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(code))
	}

	sc.Kill()
	sc = StartSidecar(t, sc.DataDir, groupSidecarSets...)
	rc = sc.DialRaw()
	check("after a SIGKILL and restart")
	createTopic(t, ctx, sc, "del-t", partitions, nil)
	check("after the topic was created again")
	out = tool(t, ctx, sc, "kafka-consumer-groups", "--describe", "--group", "gd-both")
	if strings.Contains(out, "del-t") {
		t.Fatalf("kafka-consumer-groups --describe shows the re-created topic's offsets:\n%s", out)
	}
	// `sidecar meta verify` reads the groups' records (107 … 110, 113).
	sc.Stop()
	rep, code, mout := metaCmd(t, "verify", "--json", sc.DataDir)
	counts := map[string]int{}
	for _, sh := range rep.Shards {
		for k, n := range sh.Counts {
			counts[k] += n
		}
	}
	if code != 0 || counts["OffsetCommitRecord"] == 0 || counts["TopicOffsetsDeletedRecord"] == 0 || counts["undecodable"] != 0 {
		t.Fatalf("meta verify: exit %d, counts %v\n%s", code, counts, mout)
	}
}
