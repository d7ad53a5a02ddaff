package group

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func cghReq(group, member string, epoch int32, instance *string, names []string, owned []kmsg.ConsumerGroupHeartbeatRequestTopic) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = group, member, epoch, instance
	req.RebalanceTimeoutMillis = 30_000
	req.SubscribedTopicNames = names
	req.Topics = owned
	if epoch == 0 && owned == nil {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	if epoch != 0 {
		req.RebalanceTimeoutMillis = -1
	}
	return req
}

func (h *harness) cgh(req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := h.c.ConsumerGroupHeartbeat(h.now, req, "client", "/127.0.0.1")
	if t, ok := h.t.(*testing.T); ok { // not in benchmarks: it visits every member
		checkSubscriptions(t, h.c)
		checkReconciliation(t, h.c)
	}
	return resp
}

// checkReconciliation holds every consumer group to what reconciliation
// promises (Kafka 4.4's CurrentAssignmentBuilder), whatever the
// heartbeats and the assignor runs' timing: no member's epoch is ahead of
// the last completed assignor run, nor that run ahead of the group epoch;
// a member at the run's epoch holds only partitions that run gave it; and
// no partition is held (assigned or pending revocation) by two members,
// the owners index agreeing.
func checkReconciliation(t *testing.T, c *Coordinator) {
	t.Helper()
	for id, g := range c.consumer {
		if g.assignmentEpoch > g.epoch {
			t.Fatalf("group %s: assignment epoch %d ahead of group epoch %d", id, g.assignmentEpoch, g.epoch)
		}
		owners := map[[16]byte]map[int32]string{}
		for _, m := range g.members {
			if m.epoch > g.assignmentEpoch {
				t.Fatalf("group %s: member %s at epoch %d (state %d), ahead of the assignment epoch %d", id, m.id, m.epoch, m.state, g.assignmentEpoch)
			}
			if m.epoch == g.assignmentEpoch {
				for tp, ps := range m.assigned {
					for _, p := range ps {
						if !g.target[m.id].has(tp, p) {
							t.Fatalf("group %s: member %s at epoch %d holds %x/%d, not in that epoch's target %v", id, m.id, m.epoch, tp[:1], p, g.target[m.id])
						}
					}
				}
			}
			for _, a := range []assignment{m.assigned, m.revoking} {
				for tp, ps := range a {
					for _, p := range ps {
						if o, ok := owners[tp][p]; ok && o != m.id {
							t.Fatalf("group %s: %x/%d held by %s and %s", id, tp[:1], p, o, m.id)
						}
						if owners[tp] == nil {
							owners[tp] = map[int32]string{}
						}
						owners[tp][p] = m.id
					}
				}
			}
		}
		if !maps.EqualFunc(owners, g.owners, func(a, b map[int32]string) bool { return maps.Equal(a, b) }) {
			t.Fatalf("group %s: owners index %v, members hold %v", id, g.owners, owners)
		}
	}
}

// checkSubscriptions holds every consumer group's counts of name
// subscriptions and subscribed topics equal to what its members say.
func checkSubscriptions(t *testing.T, c *Coordinator) {
	t.Helper()
	for id, g := range c.consumer {
		want := map[string]int{}
		for _, m := range g.members {
			for _, n := range m.names {
				want[n]++
			}
		}
		if !maps.Equal(want, g.byName) {
			t.Fatalf("group %s: name subscriptions counted %v, members say %v", id, g.byName, want)
		}
		if got, all := g.subscribedNames(), g.computeSubscribedByMembers(); !slices.Equal(got, all) {
			t.Fatalf("group %s: subscribed %v, members say %v", id, got, all)
		}
	}
}

// computeSubscribedByMembers is subscribedNames the slow way.
func (g *consumerGroup) computeSubscribedByMembers() []string {
	set := map[string]bool{}
	for _, m := range g.members {
		for _, n := range m.names {
			set[n] = true
		}
		if m.regex != nil {
			if r := g.regexes[*m.regex]; r != nil {
				for _, n := range r.topics {
					set[n] = true
				}
			}
		}
	}
	return sortedKeys(set)
}

// consumerJoin joins a member (v1: the client picks its id).
func (h *harness) consumerJoin(group, member string, instance *string, names []string) *kmsg.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	if member == "" {
		h.ids++
		member = "m" + string(rune('a'+h.ids))
	}
	resp := h.cgh(cghReq(group, member, 0, instance, names, nil))
	if resp.ErrorCode != 0 {
		h.t.Fatalf("join: %s", errName(resp.ErrorCode))
	}
	return resp
}

func owned(resp *kmsg.ConsumerGroupHeartbeatResponse, prev []kmsg.ConsumerGroupHeartbeatRequestTopic) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	if resp.Assignment == nil {
		return prev
	}
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for _, t := range resp.Assignment.Topics {
		out = append(out, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t.TopicID, Partitions: slices.Clone(t.Partitions)})
	}
	return out
}

func count(o []kmsg.ConsumerGroupHeartbeatRequestTopic) int {
	n := 0
	for _, t := range o {
		n += len(t.Partitions)
	}
	return n
}

// member is a simulated KIP-848 client: it heartbeats with what it owns
// and takes whatever assignment it is given (revoking at once).
type member struct {
	id    string
	epoch int32
	owns  []kmsg.ConsumerGroupHeartbeatRequestTopic
}

func (h *harness) beat(group string, m *member) *kmsg.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	resp := h.cgh(cghReq(group, m.id, m.epoch, nil, nil, m.owns))
	if resp.ErrorCode != 0 {
		h.t.Fatalf("heartbeat of %s: %s", m.id, errName(resp.ErrorCode))
	}
	m.epoch = resp.MemberEpoch
	m.owns = owned(resp, m.owns)
	return resp
}

func TestConsumerJoinRevokeBeforeReassign(t *testing.T) {
	// Every epoch assigned at once: the test is about reconciliation
	// (TestConsumerAssignmentInterval batches).
	h := newHarness(t, Config{AssignmentInterval: -1})
	r := h.consumerJoin("g", "a", nil, []string{"t"})
	a := &member{id: "a", epoch: r.MemberEpoch, owns: owned(r, nil)}
	if a.epoch != 1 || count(a.owns) != 8 {
		t.Fatalf("first member: epoch %d, %d partitions", a.epoch, count(a.owns))
	}
	r = h.consumerJoin("g", "b", nil, []string{"t"})
	b := &member{id: "b", epoch: r.MemberEpoch, owns: owned(r, nil)}
	// b's target is 4 partitions, all still owned by a: b gets none yet.
	if count(b.owns) != 0 || b.epoch != 2 {
		t.Fatalf("b before a revoked: epoch %d, %d partitions", b.epoch, count(b.owns))
	}
	if st := h.c.consumer["g"].state(); st != cStateReconciling {
		t.Fatalf("state %v", st)
	}
	// a's next heartbeat asks it to revoke 4 (its epoch stays 1 until it has).
	h.beat("g", a)
	if count(a.owns) != 4 || a.epoch != 1 {
		t.Fatalf("a asked to revoke: epoch %d, %d partitions", a.epoch, count(a.owns))
	}
	h.beat("g", a) // reports only 4: revoked, moves to epoch 2
	if a.epoch != 2 {
		t.Fatalf("a after revoking: epoch %d", a.epoch)
	}
	h.beat("g", b)
	if count(b.owns) != 4 {
		t.Fatalf("b after a revoked: %d partitions", count(b.owns))
	}
	for _, p := range b.owns[0].Partitions {
		if slices.Contains(a.owns[0].Partitions, p) {
			t.Fatalf("partition %d owned twice", p)
		}
	}
	if st := h.c.consumer["g"].state(); st != cStateStable {
		t.Fatalf("state %v", st)
	}
	// b leaves: a gets everything back at the next epoch.
	r = h.cgh(cghReq("g", "b", leaveEpoch, nil, nil, nil))
	wantCode(t, "leave", r.ErrorCode, nil)
	h.beat("g", a)
	if count(a.owns) != 8 || a.epoch != 3 {
		t.Fatalf("a after b left: epoch %d, %d partitions", a.epoch, count(a.owns))
	}
	// Offsets: members commit with their epoch (v9+).
	wantCode(t, "member commit", h.commit(9, "g", "a", 3, 1), nil)
	wantCode(t, "stale epoch", h.commit(9, "g", "a", 2, 1), kerr.StaleMemberEpoch)
	wantCode(t, "v8 from a KIP-848 member", h.commit(8, "g", "a", 3, 1), kerr.UnsupportedVersion)
	wantCode(t, "unknown member", h.commit(9, "g", "zz", 3, 1), kerr.UnknownMemberID)
}

func TestConsumerSessionTimeoutFencesMember(t *testing.T) {
	h := newHarness(t, Config{})
	ra := h.consumerJoin("g", "a", nil, []string{"t"})
	a := &member{id: "a", epoch: ra.MemberEpoch, owns: owned(ra, nil)}
	h.consumerJoin("g", "b", nil, []string{"t"})
	h.beat("g", a)
	h.beat("g", a)
	// b never heartbeats again: after 45 s it is fenced; a gets all 8.
	for range 10 {
		h.advance(5 * time.Second)
		h.beat("g", a)
	}
	if count(a.owns) != 8 {
		t.Fatalf("a after b's session expired: %d partitions", count(a.owns))
	}
	r := h.cgh(cghReq("g", "b", 2, nil, nil, []kmsg.ConsumerGroupHeartbeatRequestTopic{}))
	wantCode(t, "fenced member", r.ErrorCode, kerr.UnknownMemberID)
}

func TestConsumerRebalanceTimeoutFencesMemberThatDoesNotRevoke(t *testing.T) {
	h := newHarness(t, Config{})
	ra := h.consumerJoin("g", "a", nil, []string{"t"})
	a := &member{id: "a", epoch: ra.MemberEpoch, owns: owned(ra, nil)}
	rb := h.consumerJoin("g", "b", nil, []string{"t"})
	b := &member{id: "b", epoch: rb.MemberEpoch}
	full := a.owns
	// a heartbeats but keeps reporting all 8 partitions (never revokes).
	for range 7 {
		r := h.cgh(cghReq("g", "a", a.epoch, nil, nil, full))
		if r.ErrorCode != 0 {
			wantCode(t, "a after its rebalance timeout", r.ErrorCode, kerr.UnknownMemberID)
			break
		}
		h.advance(5 * time.Second)
		h.beat("g", b)
	}
	if _, ok := h.c.consumer["g"].members["a"]; ok {
		t.Fatal("a not fenced after its rebalance timeout")
	}
	h.beat("g", b)
	if count(b.owns) != 8 {
		t.Fatalf("b: %d partitions", count(b.owns))
	}
}

func TestConsumerEpochFencing(t *testing.T) {
	// Every epoch assigned at once: the test is about reconciliation
	// (TestConsumerAssignmentInterval batches).
	h := newHarness(t, Config{AssignmentInterval: -1})
	r := h.consumerJoin("g", "a", nil, []string{"t"})
	a := &member{id: "a", epoch: r.MemberEpoch, owns: owned(r, nil)}
	h.consumerJoin("g", "b", nil, []string{"t"})
	h.beat("g", a)
	h.beat("g", a) // a at epoch 2 now, previous 1
	for _, tc := range []struct {
		name  string
		epoch int32
		owns  []kmsg.ConsumerGroupHeartbeatRequestTopic
		want  *kerr.Error
	}{
		{"epoch ahead", a.epoch + 1, a.owns, kerr.FencedMemberEpoch},
		{"previous epoch, owned a subset", a.epoch - 1, a.owns, nil},
		{"previous epoch owning more", a.epoch - 1, []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: topicID("t"), Partitions: []int32{0, 1, 2, 3, 4, 5, 6, 7}}}, kerr.FencedMemberEpoch},
		{"older epoch", 0 - 5, a.owns, kerr.InvalidRequest},
	} {
		r := h.cgh(cghReq("g", "a", tc.epoch, nil, nil, tc.owns))
		wantCode(t, tc.name, r.ErrorCode, tc.want)
	}
}

func TestConsumerStaticMembership(t *testing.T) {
	h := newHarness(t, Config{})
	inst := strp("i1")
	r := h.consumerJoin("g", "a", inst, []string{"t"})
	a := &member{id: "a", epoch: r.MemberEpoch, owns: owned(r, nil)}
	h.consumerJoin("g", "b", nil, []string{"t"})
	h.beat("g", a)
	h.beat("g", a)
	groupEpoch := h.c.consumer["g"].epoch
	kept := a.owns
	// Another process with the same instance id while a holds it.
	r = h.cgh(cghReq("g", "a2", 0, inst, []string{"t"}, nil))
	wantCode(t, "instance in use", r.ErrorCode, kerr.UnreleasedInstanceID)
	// a leaves for now (−2) and comes back under a new member id: same
	// partitions, no new group epoch.
	r = h.cgh(cghReq("g", "a", leaveStaticEpoch, inst, nil, nil))
	wantCode(t, "static leave", r.ErrorCode, nil)
	r = h.cgh(cghReq("g", "a2", 0, inst, []string{"t"}, nil))
	wantCode(t, "static rejoin", r.ErrorCode, nil)
	if got := owned(r, nil); count(got) != count(kept) || !slices.Equal(got[0].Partitions, kept[0].Partitions) {
		t.Fatalf("rejoined with %v, had %v", got, kept)
	}
	if h.c.consumer["g"].epoch != groupEpoch {
		t.Fatalf("group epoch moved %d → %d", groupEpoch, h.c.consumer["g"].epoch)
	}
	r = h.cgh(cghReq("g", "a", 3, inst, nil, kept))
	wantCode(t, "old member id", r.ErrorCode, kerr.FencedInstanceID)
}

func TestConsumerHeartbeatValidation(t *testing.T) {
	h := newHarness(t, Config{})
	mk := func(mut func(*kmsg.ConsumerGroupHeartbeatRequest)) *kmsg.ConsumerGroupHeartbeatRequest {
		r := cghReq("g", "m", 0, nil, []string{"t"}, nil)
		mut(r)
		return r
	}
	for _, tc := range []struct {
		name string
		req  *kmsg.ConsumerGroupHeartbeatRequest
		want *kerr.Error
	}{
		{"empty member id v1", mk(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "" }), kerr.InvalidRequest},
		{"empty group", mk(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = "" }), kerr.InvalidRequest},
		{"empty instance id", mk(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = strp("") }), kerr.InvalidRequest},
		{"no rebalance timeout", mk(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 }), kerr.InvalidRequest},
		{"owned partitions on join", mk(func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: topicID("t"), Partitions: []int32{1}}}
		}), kerr.InvalidRequest},
		{"no subscription", mk(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil }), kerr.InvalidRequest},
		{"static leave without instance", mk(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -2 }), kerr.InvalidRequest},
		{"unknown assignor", mk(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = strp("sticky") }), kerr.UnsupportedAssignor},
		{"bad regex", mk(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicRegex = strp("(") }), kerr.InvalidRegularExpression},
		{"unknown member", mk(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = 3; r.Topics = nil }), kerr.UnknownMemberID},
		{"v0 join without member id", mk(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Version = 0; r.MemberID = "" }), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.cgh(tc.req)
			wantCode(t, tc.name, r.ErrorCode, tc.want)
			if tc.want == nil && (r.MemberID == nil || *r.MemberID == "") {
				t.Fatal("no member id given")
			}
		})
	}
}

func TestConsumerAndClassicAreExclusive(t *testing.T) {
	h := newHarness(t, Config{})
	stableGroup(t, h, 1)
	r := h.cgh(cghReq("g", "m", 0, nil, []string{"t"}, nil))
	wantCode(t, "consumer join of a classic group", r.ErrorCode, kerr.GroupIDNotFound)
	h.consumerJoin("cg", "m", nil, []string{"t"})
	j := h.join(joinReq(9, "cg", "", nil))
	wantCode(t, "classic join of a consumer group", j.resp.ErrorCode, kerr.InconsistentGroupProtocol)
	// An empty consumer group is replaced by a classic one.
	wantCode(t, "leave", h.cgh(cghReq("cg", "m", leaveEpoch, nil, nil, nil)).ErrorCode, nil)
	j = h.join(joinReq(9, "cg", "", nil))
	wantCode(t, "classic join of an empty consumer group", j.resp.ErrorCode, kerr.MemberIDRequired)
}

func TestConsumerRegexSubscription(t *testing.T) {
	// Every epoch assigned at once: the test is about reconciliation
	// (TestConsumerAssignmentInterval batches).
	h := newHarness(t, Config{AssignmentInterval: -1})
	req := cghReq("g", "a", 0, nil, nil, nil)
	req.SubscribedTopicRegex = strp("^[tu]$")
	r := h.cgh(req)
	wantCode(t, "regex join", r.ErrorCode, nil)
	a := &member{id: "a", epoch: r.MemberEpoch, owns: owned(r, nil)}
	if count(a.owns) != 12 {
		t.Fatalf("regex assignment: %d partitions", count(a.owns))
	}
	// A matching topic appears: the next heartbeat assigns it.
	h.topics.set("v", 2)
	h.topics.set("u", 6) // and u grows
	h.beat("g", a)
	if count(a.owns) != 14 {
		t.Fatalf("after u grew: %d partitions", count(a.owns))
	}
	d := h.c.ConsumerGroupDescribe([]string{"g", "nope"})
	if d[0].ErrorCode != 0 || len(d[0].Members) != 1 || *d[0].Members[0].SubscribedTopicRegex != "^[tu]$" || d[0].State != "Stable" {
		t.Fatalf("describe: %+v", d[0])
	}
	wantCode(t, "describe unknown", d[1].ErrorCode, kerr.GroupIDNotFound)
}

// TestConsumerAssignmentInterval: the assignor runs at most once per
// group.consumer.assignment.interval.ms (KIP-1263): the group's first
// epoch is assigned at once; members joining within the interval after a
// run are assigned together when it has passed (Tick), the group
// Assigning meanwhile, their first heartbeats reconciling toward the
// current target; then every member reconciles to the one new target.
func TestConsumerAssignmentInterval(t *testing.T) {
	h := newHarness(t, Config{}) // the default: 1 s
	a := &member{id: "a"}
	r := h.cgh(cghReq("g", "a", 0, nil, []string{"t"}, nil))
	a.epoch, a.owns = r.MemberEpoch, owned(r, nil)
	if count(a.owns) != 8 || r.MemberEpoch != 1 {
		t.Fatalf("the first member: epoch %d, %d partitions; want its target at once (epoch 1, 8)", r.MemberEpoch, count(a.owns))
	}
	// Three more join 100 ms apart: no run yet.
	ms := []*member{a}
	for _, id := range []string{"b", "c", "d"} {
		h.advance(100 * time.Millisecond)
		r := h.cgh(cghReq("g", id, 0, nil, []string{"t"}, nil))
		m := &member{id: id, epoch: r.MemberEpoch, owns: owned(r, nil)}
		if count(m.owns) != 0 || m.epoch != 1 {
			t.Fatalf("%s joining within the interval: epoch %d, %d partitions; want the current target's epoch 1 and none", id, m.epoch, count(m.owns))
		}
		ms = append(ms, m)
	}
	g := h.c.consumer["g"]
	if g.state() != cStateAssigning || g.epoch != 4 || g.assignmentEpoch != 1 {
		t.Fatalf("group %v, epoch %d, assignment epoch %d; want Assigning at 4 over 1", g.state(), g.epoch, g.assignmentEpoch)
	}
	if at, ok := h.c.NextDeadline(); !ok || !at.Equal(epoch0.Add(time.Second)) {
		t.Fatalf("next deadline %v (%v), want the run a second after the first", at, ok)
	}
	h.advance(700 * time.Millisecond) // 1 s after the first run
	if g.assignmentEpoch != 4 {
		t.Fatalf("assignment epoch %d after the interval, want 4 (one run for the three joins)", g.assignmentEpoch)
	}
	for round := 0; g.state() != cStateStable; round++ {
		if round > 5 {
			t.Fatalf("not Stable after %d rounds: %v", round, g.state())
		}
		for _, m := range ms {
			h.beat("g", m)
		}
	}
	for _, m := range ms {
		if count(m.owns) != 2 || m.epoch != 4 {
			t.Fatalf("%s: epoch %d, %d partitions; want 4 and 2", m.id, m.epoch, count(m.owns))
		}
	}
	// A leave more than an interval after the last run is assigned at
	// its next heartbeat.
	h.advance(2 * time.Second)
	leave := cghReq("g", "d", leaveEpoch, nil, nil, nil)
	if r := h.cgh(leave); r.ErrorCode != 0 {
		t.Fatalf("leave: %s", errName(r.ErrorCode))
	}
	h.beat("g", a)
	if g.assignmentEpoch != g.epoch {
		t.Fatalf("assignment epoch %d, group epoch %d: a heartbeat past the interval runs the assignor", g.assignmentEpoch, g.epoch)
	}
}

// TestConsumerGroupMaxSize: group.consumer.max.size bounds a KIP-848 group
// at the size of the large group: the 1,000th member joins, the
// 1,001st gets GROUP_MAX_SIZE_REACHED (Kafka's code), a member already in
// heartbeats on, and once one leaves another may join.
func TestConsumerGroupMaxSize(t *testing.T) {
	const size = 1000
	h := newHarness(t, Config{ConsumerMaxSize: size})
	h.topics.set("big", 10_000)
	for i := range size {
		if r := h.c.ConsumerGroupHeartbeat(h.now, cghReq("g", fmt.Sprintf("m%04d", i), 0, nil, []string{"big"}, nil), "c", "/h"); r.ErrorCode != 0 {
			t.Fatalf("member %d: %s", i, errName(r.ErrorCode))
		}
	}
	r := h.cgh(cghReq("g", "one-too-many", 0, nil, []string{"big"}, nil))
	wantCode(t, "join past group.consumer.max.size", r.ErrorCode, kerr.GroupMaxSizeReached)
	beat := cghReq("g", "m0000", h.c.consumer["g"].members["m0000"].epoch, nil, nil, nil)
	beat.Topics = nil
	wantCode(t, "heartbeat of a member of a full group", h.cgh(beat).ErrorCode, nil)
	wantCode(t, "leave", h.cgh(cghReq("g", "m0001", leaveEpoch, nil, nil, nil)).ErrorCode, nil)
	wantCode(t, "join after a leave", h.cgh(cghReq("g", "one-too-many", 0, nil, []string{"big"}, nil)).ErrorCode, nil)
}

// topicsOf returns the names (by the harness's ids) of the topics in an
// owned list.
func topicsOf(o []kmsg.ConsumerGroupHeartbeatRequestTopic) []string {
	var out []string
	for _, t := range o {
		if len(t.Partitions) > 0 {
			out = append(out, string(t.TopicID[:1]))
		}
	}
	slices.Sort(out)
	return out
}

// TestConsumerSubscriptionChangeWithinInterval: with assignor runs batched
// the target can be older than a subscription; as Kafka 4.4 reconciles
// (KIP-1263), a member that leaves a topic within the interval gives up
// its partitions at once (revoking them first while it still reports
// them, its epoch unchanged), and a member is never given a partition of
// a topic it no longer subscribes to that its older target still holds.
func TestConsumerSubscriptionChangeWithinInterval(t *testing.T) {
	h := newHarness(t, Config{}) // the default interval: 1 s
	r := h.consumerJoin("g", "a", nil, []string{"t", "u"})
	a := &member{id: "a", epoch: r.MemberEpoch, owns: owned(r, nil)}
	if count(a.owns) != 12 {
		t.Fatalf("a: %d partitions, want 12 (t's 8, u's 4)", count(a.owns))
	}

	// a leaves u 100 ms later: no assignor run yet, but u is revoked at
	// once. Its heartbeat still reports u's partitions, so it must revoke
	// them before they count as released.
	h.advance(100 * time.Millisecond)
	req := cghReq("g", "a", a.epoch, nil, []string{"t"}, a.owns)
	r = h.cgh(req)
	wantCode(t, "a leaves u", r.ErrorCode, nil)
	g := h.c.consumer["g"]
	if g.assignmentEpoch == g.epoch {
		t.Fatalf("assignor ran within the interval (epoch %d)", g.epoch)
	}
	if r.Assignment == nil || r.MemberEpoch != 1 {
		t.Fatalf("a after leaving u: epoch %d, assignment %v; want epoch 1 and a new assignment", r.MemberEpoch, r.Assignment)
	}
	a.owns = owned(r, a.owns)
	if got := topicsOf(a.owns); !slices.Equal(got, []string{"t"}) || count(a.owns) != 8 {
		t.Fatalf("a after leaving u owns %v (%d partitions), want t's 8", got, count(a.owns))
	}
	if m := g.members["a"]; m.state != mUnrevoked || m.revoking.count() != 4 {
		t.Fatalf("a: state %d, %d partitions revoking; want Unrevoked, 4", m.state, m.revoking.count())
	}
	h.beat("g", a) // reports t only: u released
	if m := g.members["a"]; m.state != mStable || m.revoking.count() != 0 || a.epoch != 1 {
		t.Fatalf("a after revoking u: state %d, %d revoking, epoch %d", m.state, m.revoking.count(), a.epoch)
	}

	// Later, b joins subscribed to t and u: a run at once (the interval
	// passed) gives b u's 4 and half of t, the halves of t a still owns
	// withheld. Then b leaves u before the next run: it is not given
	// u's partitions its target still holds.
	h.advance(2 * time.Second)
	h.beat("g", a)
	r = h.consumerJoin("g", "b", nil, []string{"t", "u"})
	b := &member{id: "b", epoch: r.MemberEpoch, owns: owned(r, nil)}
	if g.assignmentEpoch != g.epoch {
		t.Fatalf("b's join past the interval: assignment epoch %d, group epoch %d", g.assignmentEpoch, g.epoch)
	}
	if tgt := g.target["b"]; !slices.Contains(topicsOfAssignment(tgt), "u") {
		t.Fatalf("b's target %v holds no partition of u", tgt)
	}
	if !slices.Equal(topicsOf(b.owns), []string{"u"}) {
		t.Fatalf("b joining owns %v, want u's partitions (free) only", topicsOf(b.owns))
	}
	// b drops u at once: it owns u's 4, which it revokes.
	h.advance(100 * time.Millisecond)
	r = h.cgh(cghReq("g", "b", b.epoch, nil, []string{"t"}, b.owns))
	wantCode(t, "b leaves u", r.ErrorCode, nil)
	b.epoch, b.owns = r.MemberEpoch, owned(r, b.owns)
	if len(topicsOf(b.owns)) != 0 {
		t.Fatalf("b after leaving u owns %v, want nothing (u revoked, t still a's)", topicsOf(b.owns))
	}
	for range 3 {
		h.beat("g", a)
		h.beat("g", b)
	}
	if got := topicsOf(b.owns); !slices.Equal(got, []string{"t"}) {
		t.Fatalf("b owns %v once a revoked, want t only (its target's u not given: it left u)", got)
	}
	// The next run assigns by the new subscriptions: u to nobody.
	h.advance(time.Second)
	for round := 0; g.state() != cStateStable || g.assignmentEpoch != g.epoch; round++ {
		if round > 5 {
			t.Fatalf("not Stable after %d rounds: %v", round, g.state())
		}
		h.beat("g", a)
		h.beat("g", b)
	}
	if count(a.owns)+count(b.owns) != 8 || !slices.Equal(topicsOf(a.owns), []string{"t"}) || !slices.Equal(topicsOf(b.owns), []string{"t"}) {
		t.Fatalf("after the next run a owns %v, b %v (%d, %d): want t's 8 between them", topicsOf(a.owns), topicsOf(b.owns), count(a.owns), count(b.owns))
	}
}

func topicsOfAssignment(a assignment) []string {
	var out []string
	for t, ps := range a {
		if len(ps) > 0 {
			out = append(out, string(t[:1]))
		}
	}
	slices.Sort(out)
	return out
}

// ownedOf returns the part of an owned list of the named topics (by the
// harness's ids).
func ownedOf(o []kmsg.ConsumerGroupHeartbeatRequestTopic, names ...string) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for _, t := range o {
		if slices.Contains(names, string(t.TopicID[:1])) {
			out = append(out, t)
		}
	}
	return out
}

// TestConsumerSecondSubscriptionChangeWhileRevoking: a member revoking a
// topic it left within the assignment interval (Unrevoked at the target's
// epoch) leaves another topic in the heartbeat that acknowledges the
// first revocation. It must revoke the second topic too, at the same
// epoch: as in Kafka 4.4, a member that has revoked what it had to is
// reconciled at its own epoch, never moved past the last completed
// assignor run (its epoch would be one no run produced, ahead of the
// group's assignment epoch).
func TestConsumerSecondSubscriptionChangeWhileRevoking(t *testing.T) {
	h := newHarness(t, Config{}) // the default interval: 1 s
	h.topics.set("v", 2)
	r := h.consumerJoin("g", "a", nil, []string{"t", "u", "v"})
	a := &member{id: "a", epoch: r.MemberEpoch, owns: owned(r, nil)}
	if count(a.owns) != 14 || a.epoch != 1 {
		t.Fatalf("a: epoch %d, %d partitions; want 1, 14", a.epoch, count(a.owns))
	}
	g := h.c.consumer["g"]

	// Leave u, still reporting it: u pending revocation, epoch 1.
	h.advance(100 * time.Millisecond)
	r = h.cgh(cghReq("g", "a", a.epoch, nil, []string{"t", "v"}, a.owns))
	wantCode(t, "a leaves u", r.ErrorCode, nil)
	if m := g.members["a"]; m.state != mUnrevoked || r.MemberEpoch != 1 {
		t.Fatalf("a after leaving u: state %d, epoch %d; want Unrevoked at 1", m.state, r.MemberEpoch)
	}

	// Acknowledge u's revocation and leave v in the same heartbeat, still
	// reporting v: v pending revocation, the epoch still 1.
	h.advance(100 * time.Millisecond)
	r = h.cgh(cghReq("g", "a", 1, nil, []string{"t"}, ownedOf(a.owns, "t", "v")))
	wantCode(t, "a revokes u, leaves v", r.ErrorCode, nil)
	if g.assignmentEpoch != 1 {
		t.Fatalf("assignor ran within the interval: assignment epoch %d", g.assignmentEpoch)
	}
	m := g.members["a"]
	if r.MemberEpoch != 1 || m.state != mUnrevoked || m.revoking.count() != 2 {
		t.Fatalf("a after leaving v: epoch %d, state %d, %d revoking; want epoch 1 (the last run's), Unrevoked, v's 2", r.MemberEpoch, m.state, m.revoking.count())
	}
	a.epoch, a.owns = r.MemberEpoch, owned(r, a.owns)
	if got := topicsOf(a.owns); !slices.Equal(got, []string{"t"}) {
		t.Fatalf("a is told it owns %v, want t", got)
	}

	// v revoked; the next run (the interval passed) assigns t alone.
	h.beat("g", a)
	h.advance(time.Second)
	for round := 0; g.state() != cStateStable; round++ {
		if round > 5 {
			t.Fatalf("not Stable after %d rounds: %v", round, g.state())
		}
		h.beat("g", a)
	}
	if a.epoch != g.assignmentEpoch || g.assignmentEpoch != g.epoch || count(a.owns) != 8 {
		t.Fatalf("a: epoch %d, %d partitions; group epoch %d, assignment epoch %d", a.epoch, count(a.owns), g.epoch, g.assignmentEpoch)
	}
}
