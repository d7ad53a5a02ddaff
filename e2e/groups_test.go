package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupSidecarSets are the settings of the group tests' sidecars: four
// coordinator shards (groups spread over them), a short initial
// rebalance delay and short session timeouts so that a killed member is
// noticed within seconds.
var groupSidecarSets = []string{
	"diskless.metadata.topic.num.partitions=4",
	"group.initial.rebalance.delay.ms=100",
	"group.min.session.timeout.ms=1000",
	"group.consumer.session.timeout.ms=3000",
	"group.consumer.heartbeat.interval.ms=500",
}

// produceValues produces values "<prefix>-<i>" for i in [from, to), i on
// partition i mod partitions, and returns them.
func produceValues(t *testing.T, ctx context.Context, sc *Sidecar, topic string, partitions, from, to int) []string {
	t.Helper()
	// Uncompressed: kafka-python reads snappy only with python-snappy.
	cl := sc.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()))
	var recs []*kgo.Record
	var vals []string
	for i := from; i < to; i++ {
		v := fmt.Sprintf("%s-%06d", topic, i)
		recs = append(recs, &kgo.Record{Partition: int32(i % partitions), Value: []byte(v)})
		vals = append(vals, v)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	return vals
}

// waitFor polls cond every 100 ms until it holds, failing the test with
// what after within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// committedAtEnd reports whether the group's committed offsets equal the
// topic's end offsets on every partition.
func committedAtEnd(ctx context.Context, adm *kadm.Client, group, topic string, partitions int) (bool, string) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return false, err.Error()
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return false, err.Error()
	}
	for p := range int32(partitions) {
		end, _ := ends.Lookup(topic, p)
		c, ok := offs.Lookup(topic, p)
		if !ok || c.At != end.Offset {
			return false, fmt.Sprintf("partition %d: committed %d (found %v), end %d", p, c.At, ok, end.Offset)
		}
	}
	return true, ""
}

func missing(want []string, members ...*member) []string {
	seen := map[string]bool{}
	for _, m := range members {
		vals, _, _, _ := m.state()
		for _, v := range vals {
			seen[v] = true
		}
	}
	var out []string
	for _, v := range want {
		if !seen[v] {
			out = append(out, v)
		}
	}
	return out
}

// TestGroupsKgo runs kgo group consumers as subprocesses with the eager
// range balancer, the cooperative-sticky balancer and KIP-848
// (server-side assignment): three members join and split an 8-partition
// topic; one leaves (SIGTERM: LeaveGroup), one is SIGKILLed (its session
// times out); the last consumes everything and its commits reach the end
// offsets; every record was consumed by some member; after a SIGKILL and
// restart of the sidecar the committed offsets are still the end offsets.
func TestGroupsKgo(t *testing.T) {
	t.Parallel()
	for _, balancer := range []string{"range", "cooperative-sticky", "consumer"} {
		t.Run(balancer, func(t *testing.T) { runGroupsKgo(t, balancer) })
	}
}

func runGroupsKgo(t *testing.T, balancer string) {
	const (
		partitions = 8
		phase      = 1200
	)
	ctx := testCtx(t, 4*time.Minute)
	sc := StartSidecar(t, "", groupSidecarSets...)
	topic, groupID := "groups-"+balancer, "g-"+balancer
	createTopic(t, ctx, sc, topic, partitions, nil)
	want := produceValues(t, ctx, sc, topic, partitions, 0, phase)

	cfg := memberConfig{brokers: sc.Addr, group: groupID, topic: topic, balancer: balancer, session: 3 * time.Second}
	ms := []*member{startMember(t, "m0", cfg), startMember(t, "m1", cfg), startMember(t, "m2", cfg)}
	owns := func(members ...*member) bool {
		total := 0
		for _, m := range members {
			_, o, _, _ := m.state()
			if o == 0 {
				return false
			}
			total += o
		}
		return total == partitions
	}
	waitFor(t, 60*time.Second, "three members splitting 8 partitions", func() bool { return owns(ms...) })
	adm := kadm.NewClient(sc.Client())
	wantType := "classic"
	if balancer == "consumer" {
		wantType = "consumer"
	}
	listed, err := adm.ListGroups(ctx, "Stable")
	if err != nil || listed[groupID].GroupType != wantType || listed[groupID].State != "Stable" {
		t.Fatalf("ListGroups(Stable) = %+v, %v; want %s Stable %s", listed, err, groupID, wantType)
	}
	if balancer == "consumer" {
		d, err := adm.DescribeConsumerGroups(ctx, groupID)
		if err != nil || len(d[groupID].Members) != 3 {
			t.Fatalf("DescribeConsumerGroups = %+v, %v; want 3 members", d, err)
		}
	} else {
		d, err := adm.DescribeGroups(ctx, groupID)
		if err != nil || len(d[groupID].Members) != 3 {
			t.Fatalf("DescribeGroups = %+v, %v; want 3 members", d, err)
		}
	}

	ms[0].stop()
	want = append(want, produceValues(t, ctx, sc, topic, partitions, phase, 2*phase)...)
	waitFor(t, 60*time.Second, "two members splitting 8 partitions after one left", func() bool { return owns(ms[1:]...) })

	ms[1].kill()
	want = append(want, produceValues(t, ctx, sc, topic, partitions, 2*phase, 3*phase)...)
	waitFor(t, 60*time.Second, "the last member owning all 8 partitions after one was killed", func() bool { return owns(ms[2]) })

	var why string
	waitFor(t, 60*time.Second, "the group's commits reaching the end offsets", func() bool {
		ok, w := committedAtEnd(ctx, adm, groupID, topic, partitions)
		why = w
		return ok
	})
	if miss := missing(want, ms...); len(miss) > 0 {
		t.Fatalf("%d of %d records consumed by no member, e.g. %q", len(miss), len(want), miss[0])
	}
	for _, m := range ms {
		if len(m.errors) > 0 {
			t.Errorf("member %s reported errors: %v", m.name, m.errors)
		}
	}
	ms[2].stop()
	checkGroupsEndpoint(t, sc, groupID, topic, partitions)
	checkOffsetsTopicListed(t, ctx, sc)

	sc.Kill()
	sc = StartSidecar(t, sc.DataDir, groupSidecarSets...)
	adm = kadm.NewClient(sc.Client())
	if ok, w := committedAtEnd(ctx, adm, groupID, topic, partitions); !ok {
		t.Fatalf("after SIGKILL and restart the commits are not at the end: %s (before: %s)", w, why)
	}
}

// TestGroupsStaticMembers: two static members (group.instance.id) split a
// topic, with the eager range balancer, the cooperative-sticky balancer
// and KIP-848 (server-side assignment); one goes away and comes back with
// its instance id within the session timeout: it gets its partitions back
// without a rebalance (the other member sees no revocation and no new
// assignment — kgo calls OnPartitionsAssigned on every rebalance, even
// one that assigns it nothing new; for KIP-848 the group epoch stays),
// and consumes what was produced meanwhile. The member is SIGKILLed: a
// classic static member sends no LeaveGroup anyway; a KIP-848 static
// member that is to come back must first leave for now with member epoch
// -2 (Kafka answers a join for an instance still held by a member
// UNRELEASED_INSTANCE_ID, until the session times out and the group
// rebalances), which leaveStatic848 sends for it.
func TestGroupsStaticMembers(t *testing.T) {
	t.Parallel()
	for _, balancer := range []string{"range", "cooperative-sticky", "consumer"} {
		t.Run(balancer, func(t *testing.T) { runGroupsStaticMembers(t, balancer) })
	}
}

func runGroupsStaticMembers(t *testing.T, balancer string) {
	const partitions = 8
	ctx := testCtx(t, 3*time.Minute)
	// A KIP-848 session timeout of 20 s, as the classic members ask for:
	// the instance must be back before it, which on a loaded machine may
	// take more than the group tests' 3 s.
	sets := slices.Clone(groupSidecarSets)
	for i, set := range sets {
		if strings.HasPrefix(set, "group.consumer.session.timeout.ms=") {
			sets[i] = "group.consumer.session.timeout.ms=20000"
		}
	}
	sc := StartSidecar(t, "", sets...)
	topic, groupID := "static-"+balancer, "g-static-"+balancer
	createTopic(t, ctx, sc, topic, partitions, nil)
	want := produceValues(t, ctx, sc, topic, partitions, 0, 400)
	cfg := memberConfig{brokers: sc.Addr, group: groupID, topic: topic, balancer: balancer, session: 20 * time.Second}
	ca, cb := cfg, cfg
	ca.instance, cb.instance = "instance-a", "instance-b"
	a, b := startMember(t, "a", ca), startMember(t, "b", cb)
	waitFor(t, 60*time.Second, "two static members owning 4 partitions each", func() bool {
		_, oa, _, _ := a.state()
		_, ob, _, _ := b.state()
		return oa == 4 && ob == 4
	})
	adm := kadm.NewClient(sc.Client())
	groupEpoch := func() int32 {
		d, err := adm.DescribeConsumerGroups(ctx, groupID)
		if err != nil || d[groupID].Err != nil {
			t.Fatalf("DescribeConsumerGroups: %v %+v", err, d)
		}
		return d[groupID].Epoch
	}
	var epoch int32
	if balancer == "consumer" {
		// The epoch settles once both members acknowledged the target.
		waitFor(t, 30*time.Second, "both KIP-848 members at the group epoch", func() bool {
			d, err := adm.DescribeConsumerGroups(ctx, groupID)
			if err != nil || len(d[groupID].Members) != 2 {
				return false
			}
			for _, m := range d[groupID].Members {
				if m.MemberEpoch != d[groupID].Epoch {
					return false
				}
			}
			epoch = d[groupID].Epoch
			return true
		})
	}
	_, _, assignA, revokeA := a.state()
	b.kill()
	if balancer == "consumer" {
		leaveStatic848(t, ctx, sc, groupID, cb.instance, b)
	}
	b2 := startMember(t, "b2", cb)
	waitFor(t, 30*time.Second, "the restarted static member owning its 4 partitions", func() bool {
		_, o, _, _ := b2.state()
		return o == 4
	})
	want = append(want, produceValues(t, ctx, sc, topic, partitions, 400, 800)...)
	waitFor(t, 60*time.Second, "every record consumed", func() bool { return len(missing(want, a, b, b2)) == 0 })
	if _, o, as, rv := a.state(); o != 4 || as != assignA || rv != revokeA {
		t.Fatalf("the other member saw a rebalance: owns %d, assignments %d→%d, revocations %d→%d", o, assignA, as, revokeA, rv)
	}
	if balancer == "consumer" {
		if e := groupEpoch(); e != epoch {
			t.Fatalf("the group epoch moved from %d to %d on a static member's return", epoch, e)
		}
	}
	for _, m := range []*member{a, b, b2} {
		m.mu.Lock()
		errs := append([]string(nil), m.errors...)
		m.mu.Unlock()
		if len(errs) > 0 {
			t.Errorf("member %s reported errors: %v", m.name, errs)
		}
	}
}

// leaveStatic848 sends, for the SIGKILLed KIP-848 member m of static
// instance instance, the ConsumerGroupHeartbeat with member epoch -2 that
// Kafka's consumer sends when a static member closes: the instance keeps
// its partitions until it rejoins or its session times out. kgo v1.22.3
// sends that leave without the instance id, which Kafka (and the sidecar)
// reject with INVALID_REQUEST, and a kgo member cannot stop heartbeating
// without that leave; so the test kills the member (no heartbeat after
// the leave can race it) and leaves on its behalf.
func leaveStatic848(t *testing.T, ctx context.Context, sc *Sidecar, group, instance string, m *member) {
	t.Helper()
	m.mu.Lock()
	memberID := m.memberID
	m.mu.Unlock()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group = group
	req.MemberID = memberID
	req.MemberEpoch = -2
	req.InstanceID = &instance
	resp, err := req.RequestWith(ctx, sc.Client())
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil || memberID == "" || resp.MemberEpoch != -2 {
		t.Fatalf("static leave of member %q (%s): %v, response %+v", memberID, instance, err, resp)
	}
}

// checkGroupsEndpoint: /v1/groups lists the group with every partition's
// committed offset at the topic's end.
func checkGroupsEndpoint(t *testing.T, sc *Sidecar, group, topic string, partitions int) {
	t.Helper()
	code, body := httpGet(t, "http://"+sc.HTTP+"/v1/groups")
	if code != 200 {
		t.Fatalf("GET /v1/groups: %d %s", code, body)
	}
	var gs []struct {
		Group   string `json:"group"`
		Type    string `json:"type"`
		State   string `json:"state"`
		Offsets map[string]map[string]struct {
			Offset int64 `json:"offset"`
		} `json:"offsets"`
	}
	if err := json.Unmarshal([]byte(body), &gs); err != nil {
		t.Fatalf("GET /v1/groups: %v\n%s", err, body)
	}
	for _, g := range gs {
		if g.Group != group {
			continue
		}
		if len(g.Offsets[topic]) != partitions || g.Type == "" || g.State == "" {
			t.Fatalf("/v1/groups shows %s as %+v; want %d committed partitions of %s", group, g, partitions, topic)
		}
		for p, o := range g.Offsets[topic] {
			if o.Offset != 450 {
				t.Fatalf("/v1/groups: %s %s/%s committed %d, want 450 (the end)", group, topic, p, o.Offset)
			}
		}
		return
	}
	t.Fatalf("/v1/groups does not list %s:\n%s", group, body)
}

// checkOffsetsTopicListed: once groups hold offsets, Metadata for all
// topics lists __consumer_offsets as internal, one partition per shard,
// as Kafka does.
func checkOffsetsTopicListed(t *testing.T, ctx context.Context, sc *Sidecar) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(ctx, sc.Client())
	if err != nil {
		t.Fatal(err)
	}
	for _, mt := range resp.Topics {
		if mt.Topic != nil && *mt.Topic == "__consumer_offsets" {
			if !mt.IsInternal || len(mt.Partitions) != 4 {
				t.Fatalf("__consumer_offsets: internal %v, %d partitions; want internal, 4 (the shards)", mt.IsInternal, len(mt.Partitions))
			}
			return
		}
	}
	t.Fatal("Metadata does not list __consumer_offsets once groups hold offsets")
}
