package group

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// stableGroup brings n v9 members into a Stable group "g" (initial delay
// passed, the leader's assignment synced) and returns their ids and the
// generation.
func stableGroup(t *testing.T, h *harness, n int) ([]string, int32) {
	t.Helper()
	var ids []string
	var joins []*joinResult
	for range n {
		id, j := h.joinNew("g")
		ids, joins = append(ids, id), append(joins, j)
	}
	for _, j := range joins {
		if j.done() {
			t.Fatalf("join answered before the initial rebalance delay: %+v", j.resp)
		}
	}
	// The first rebalance waits the initial delay, extended once per
	// delay in which members were added.
	h.advance(DefaultInitialRebalanceDelay)
	if n > 1 {
		if joins[0].done() {
			t.Fatal("initial delay not extended for the members added during it")
		}
		h.advance(DefaultInitialRebalanceDelay)
	}
	var leader string
	if !joins[0].done() {
		t.Fatal("join not answered after the initial delay")
	}
	gen := joins[0].resp.Generation
	for i, j := range joins {
		if !j.done() || j.resp.ErrorCode != 0 {
			t.Fatalf("member %d join: %+v", i, j.resp)
		}
		if j.resp.Generation != gen {
			t.Fatalf("generations differ")
		}
		leader = j.resp.LeaderID
		if (ids[i] == leader) != (len(j.resp.Members) == n) {
			t.Fatalf("member %d (leader %v) got %d members", i, ids[i] == leader, len(j.resp.Members))
		}
	}
	assign := map[string]string{}
	for _, id := range ids {
		assign[id] = "a-" + id
	}
	var syncs []*syncResult
	for _, id := range ids {
		if id != leader {
			syncs = append(syncs, h.sync("g", id, gen, nil))
		}
	}
	for _, s := range syncs {
		if s.resp != nil {
			t.Fatalf("follower sync answered before the leader's")
		}
	}
	ls := h.sync("g", leader, gen, assign)
	syncs = append(syncs, ls)
	for _, s := range syncs {
		if s.resp == nil || s.resp.ErrorCode != 0 {
			t.Fatalf("sync: %+v", s.resp)
		}
	}
	if got := h.c.classic["g"].state; got != stateStable {
		t.Fatalf("state %v", got)
	}
	return ids, gen
}

func TestClassicJoinSyncRebalance(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := stableGroup(t, h, 2)
	for _, id := range ids {
		wantCode(t, "heartbeat", h.heartbeat("g", id, gen), nil)
	}
	// A third member joins: the others learn it from their heartbeats.
	id3, j3 := h.joinNew("g")
	if j3.done() {
		t.Fatal("join answered before the others rejoined")
	}
	wantCode(t, "heartbeat during rebalance", h.heartbeat("g", ids[0], gen), kerr.RebalanceInProgress)
	// A commit with the current generation is still accepted while
	// preparing (eager clients commit before they rejoin).
	wantCode(t, "commit while preparing", h.commit(9, "g", ids[0], gen, 10), nil)
	j1 := h.join(joinReq(9, "g", ids[0], nil))
	j2 := h.join(joinReq(9, "g", ids[1], nil))
	for _, j := range []*joinResult{j1, j2, j3} {
		if !j.done() || j.resp.ErrorCode != 0 || j.resp.Generation != gen+1 {
			t.Fatalf("rejoin: %+v", j.resp)
		}
	}
	// Completing: commits get REBALANCE_IN_PROGRESS, the old generation is
	// fenced.
	wantCode(t, "commit while completing", h.commit(9, "g", ids[0], gen+1, 11), kerr.RebalanceInProgress)
	wantCode(t, "old generation heartbeat", h.heartbeat("g", ids[0], gen), kerr.IllegalGeneration)
	wantCode(t, "completing heartbeat", h.heartbeat("g", id3, gen+1), nil)
	leader := j1.resp.LeaderID
	syncs := map[string]*syncResult{}
	for _, id := range []string{ids[0], ids[1], id3} {
		if id != leader {
			syncs[id] = h.sync("g", id, gen+1, nil)
		}
	}
	syncs[leader] = h.sync("g", leader, gen+1, map[string]string{ids[0]: "x", ids[1]: "y", id3: "z"})
	want := map[string]string{ids[0]: "x", ids[1]: "y", id3: "z"}
	for id, s := range syncs {
		if s.resp == nil || s.resp.ErrorCode != 0 || string(s.resp.MemberAssignment) != want[id] {
			t.Fatalf("sync of %s: %+v", id, s.resp)
		}
	}
	wantCode(t, "commit when stable", h.commit(9, "g", id3, gen+1, 12), nil)
	if v, _ := h.c.Offsets().Get("g", "t", 0); v.Offset != 12 {
		t.Fatalf("offset %d", v.Offset)
	}
}

// TestClassicCooperativeSequence replays what cooperative-sticky clients
// (KIP-429) send: after a member joins, the incumbent keeps its
// partitions through one rebalance, revokes what it gives up, and rejoins
// at once for a second rebalance; the coordinator only has to run both.
func TestClassicCooperativeSequence(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := stableGroup(t, h, 1)
	a := ids[0]
	b, jb := h.joinNew("g")
	wantCode(t, "heartbeat", h.heartbeat("g", a, gen), kerr.RebalanceInProgress)
	ja := h.join(joinReq(9, "g", a, nil))
	if !ja.done() || !jb.done() || ja.resp.Generation != gen+1 {
		t.Fatalf("first rebalance: a=%+v b=%+v", ja.resp, jb.resp)
	}
	sa := h.sync("g", ja.resp.LeaderID, gen+1, map[string]string{a: "half", b: ""})
	sb := h.sync("g", otherOf(ja.resp.LeaderID, a, b), gen+1, nil)
	if sa.resp == nil || sb.resp == nil {
		t.Fatal("syncs not answered")
	}
	// a revoked partitions and rejoins right away: the second rebalance.
	wantCode(t, "commit of revoked partitions", h.commit(9, "g", a, gen+1, 5), nil)
	ja2 := h.join(joinReq(9, "g", a, nil))
	if ja2.done() {
		t.Fatal("second rebalance completed before b rejoined")
	}
	wantCode(t, "b heartbeat", h.heartbeat("g", b, gen+1), kerr.RebalanceInProgress)
	jb2 := h.join(joinReq(9, "g", b, nil))
	if !ja2.done() || !jb2.done() || ja2.resp.Generation != gen+2 {
		t.Fatalf("second rebalance: %+v %+v", ja2.resp, jb2.resp)
	}
}

func otherOf(x, a, b string) string {
	if x == a {
		return b
	}
	return a
}

func TestClassicSessionTimeout(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := stableGroup(t, h, 2)
	// Only ids[0] heartbeats; ids[1]'s 10 s session expires.
	for range 3 {
		h.advance(3 * time.Second)
		wantCode(t, "heartbeat", h.heartbeat("g", ids[0], gen), nil)
	}
	h.advance(3 * time.Second)
	wantCode(t, "heartbeat after the other expired", h.heartbeat("g", ids[0], gen), kerr.RebalanceInProgress)
	j := h.join(joinReq(9, "g", ids[0], nil))
	if !j.done() || j.resp.Generation != gen+1 || len(j.resp.Members) != 1 {
		t.Fatalf("rejoin: %+v", j.resp)
	}
	wantCode(t, "expired member", h.heartbeat("g", ids[1], gen), kerr.UnknownMemberID)
}

func TestClassicRebalanceTimeoutDropsMembersThatDoNotRejoin(t *testing.T) {
	h := newHarness(t, Config{})
	ids, _ := stableGroup(t, h, 2)
	j := h.join(joinReq(9, "g", ids[0], nil)) // leader rejoins: rebalance
	if j.done() {
		t.Fatal("answered before the rebalance timeout")
	}
	// ids[1] keeps heartbeating but never rejoins.
	for range 5 {
		h.advance(5 * time.Second)
		h.heartbeat("g", ids[1], 1)
	}
	h.advance(10 * time.Second) // 30 s rebalance timeout passed
	if !j.done() || len(j.resp.Members) != 1 || j.resp.Generation != 2 {
		t.Fatalf("join after the rebalance timeout: %+v", j.resp)
	}
}

func TestClassicSyncTimeoutRemovesMembersThatDoNotSync(t *testing.T) {
	h := newHarness(t, Config{})
	a, ja := h.joinNew("g")
	b, jb := h.joinNew("g")
	h.advance(2 * DefaultInitialRebalanceDelay)
	if !ja.done() || !jb.done() {
		t.Fatal("joins not answered")
	}
	leader := ja.resp.LeaderID
	s := h.sync("g", leader, 1, map[string]string{a: "1", b: "2"})
	if s.resp == nil {
		t.Fatal("leader sync")
	}
	// The follower heartbeats but never syncs: after the rebalance
	// timeout it is removed.
	for range 5 {
		h.advance(5 * time.Second)
		wantCode(t, "leader heartbeat", h.heartbeat("g", leader, 1), nil)
		wantCode(t, "follower heartbeat", h.heartbeat("g", otherOf(leader, a, b), 1), nil)
	}
	h.advance(6 * time.Second)
	g := h.c.classic["g"]
	if len(g.members) != 1 || !g.is(statePreparingRebalance) {
		t.Fatalf("members %d state %v", len(g.members), g.state)
	}
}

func TestClassicInitialDelayExtendsForNewMembers(t *testing.T) {
	h := newHarness(t, Config{})
	_, j1 := h.joinNew("g")
	h.advance(3 * time.Second) // nobody else came: done
	if !j1.done() {
		t.Fatal("a lone member waited past the initial delay")
	}
	_, j1 = h.joinNew("g2")
	h.advance(2 * time.Second)
	_, j2 := h.joinNew("g2")
	h.advance(1 * time.Second) // first delay ends; a member was added: extended
	if j1.done() {
		t.Fatal("initial rebalance did not wait after a new member")
	}
	h.advance(3 * time.Second)
	if !j1.done() || !j2.done() || len(j1.resp.Members)+len(j2.resp.Members) != 2 {
		t.Fatalf("joins: %+v %+v", j1.resp, j2.resp)
	}
}

func TestClassicStaticMemberRejoinsWithoutRebalance(t *testing.T) {
	h := newHarness(t, Config{})
	inst := strp("instance-a")
	j := h.join(joinReq(9, "g", "", inst)) // static: no MEMBER_ID_REQUIRED
	other, jo := h.joinNew("g")
	h.advance(2 * DefaultInitialRebalanceDelay)
	if !j.done() || j.resp.ErrorCode != 0 || !jo.done() {
		t.Fatalf("static join: %+v", j.resp)
	}
	old := j.resp.MemberID
	leader := j.resp.LeaderID
	s1 := h.sync("g", leader, 1, map[string]string{old: "mine", other: "theirs"})
	s2 := h.sync("g", otherOf(leader, old, other), 1, nil)
	if s1.resp == nil || s2.resp == nil {
		t.Fatal("syncs")
	}
	// The instance restarts and joins with no member id.
	for _, v := range []int16{5, 9} {
		r := h.join(joinReq(v, "g", "", inst))
		if !r.done() || r.resp.ErrorCode != 0 || r.resp.Generation != 1 {
			t.Fatalf("v%d static rejoin: %+v", v, r.resp)
		}
		if h.c.classic["g"].state != stateStable {
			t.Fatalf("v%d static rejoin started a rebalance", v)
		}
		// As a Kafka 4.x broker answers (checked against one): before v9
		// the rejoined leader is told the old leader id, so it syncs as a
		// follower; from v9 it learns it leads, with the members, and that
		// it need not assign (KIP-814).
		leads := r.resp.LeaderID == r.resp.MemberID
		if v == 5 && (leads || r.resp.LeaderID != old || len(r.resp.Members) != 0 || r.resp.SkipAssignment) ||
			v == 9 && (!leads || len(r.resp.Members) != 2 || !r.resp.SkipAssignment) {
			t.Fatalf("v%d static rejoin of the leader: leader %q (self %q, old %q), %d members, skip %v", v, r.resp.LeaderID, r.resp.MemberID, old, len(r.resp.Members), r.resp.SkipAssignment)
		}
		s := h.sync("g", r.resp.MemberID, 1, nil)
		if s.resp == nil || string(s.resp.MemberAssignment) != "mine" {
			t.Fatalf("v%d rejoined instance's assignment: %+v", v, s.resp)
		}
		// The old member id is fenced.
		req := kmsg.NewPtrHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.Generation, req.InstanceID = 4, "g", old, 1, inst
		wantCode(t, "old instance heartbeat", h.c.Heartbeat(h.now, req).ErrorCode, kerr.FencedInstanceID)
		// So are its commits; the instance's new member id commits.
		commit := func(member string) int16 {
			c := kmsg.NewPtrOffsetCommitRequest()
			c.Version, c.Group, c.MemberID, c.Generation, c.InstanceID = 8, "g", member, 1, inst
			c.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5, LeaderEpoch: -1}}}}
			resp, rec := h.c.CommitOffsets(h.now, c)
			if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 || rec == nil {
				return code
			}
			h.apply(rec)
			return 0
		}
		wantCode(t, "old instance commit", commit(old), kerr.FencedInstanceID)
		wantCode(t, "rejoined instance commit", commit(r.resp.MemberID), nil)
		old = r.resp.MemberID
	}
	wantCode(t, "other member heartbeat", h.heartbeat("g", other, 1), nil)
}

func TestClassicJoinErrors(t *testing.T) {
	h := newHarness(t, Config{MaxSize: 3})
	ids, _ := stableGroup(t, h, 2)
	bad := func(mut func(*kmsg.JoinGroupRequest)) *kmsg.JoinGroupRequest {
		r := joinReq(9, "g", "", nil)
		mut(r)
		return r
	}
	for _, tc := range []struct {
		name string
		req  *kmsg.JoinGroupRequest
		want *kerr.Error
	}{
		{"empty group id", bad(func(r *kmsg.JoinGroupRequest) { r.Group = "" }), kerr.InvalidGroupID},
		{"session timeout below min", bad(func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis = 5999 }), kerr.InvalidSessionTimeout},
		{"session timeout above max", bad(func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis = 1_800_001 }), kerr.InvalidSessionTimeout},
		{"unknown member of unknown group", bad(func(r *kmsg.JoinGroupRequest) { r.Group, r.MemberID = "other", "m" }), kerr.UnknownMemberID},
		{"unknown member", bad(func(r *kmsg.JoinGroupRequest) { r.MemberID = "nobody" }), kerr.UnknownMemberID},
		{"protocol type differs", bad(func(r *kmsg.JoinGroupRequest) { r.MemberID = ids[0]; r.ProtocolType = "connect" }), kerr.InconsistentGroupProtocol},
		{"no common protocol", bad(func(r *kmsg.JoinGroupRequest) { r.MemberID = ids[0]; r.Protocols[0].Name = "roundrobin" }), kerr.InconsistentGroupProtocol},
		{"empty protocol type on a new group", bad(func(r *kmsg.JoinGroupRequest) { r.Group = "new"; r.ProtocolType = "" }), kerr.InconsistentGroupProtocol},
		{"static id fenced", bad(func(r *kmsg.JoinGroupRequest) { r.MemberID = ids[0]; r.InstanceID = strp("x") }), kerr.UnknownMemberID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.join(tc.req)
			if !r.done() {
				t.Fatal("not answered")
			}
			wantCode(t, tc.name, r.resp.ErrorCode, tc.want)
			if r.resp.Version != tc.req.Version {
				t.Fatalf("answer version %d", r.resp.Version)
			}
		})
	}
}

func TestClassicGroupMaxSize(t *testing.T) {
	h := newHarness(t, Config{MaxSize: 2})
	stableGroup(t, h, 2)
	for _, mid := range []string{"", "nobody"} {
		r := h.join(joinReq(9, "g", mid, nil))
		wantCode(t, "join of a full group", r.resp.ErrorCode, kerr.GroupMaxSizeReached)
	}
}

func TestClassicSyncAndHeartbeatErrors(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := stableGroup(t, h, 1)
	syncReq := func(mut func(*kmsg.SyncGroupRequest)) *kmsg.SyncGroupRequest {
		r := kmsg.NewPtrSyncGroupRequest()
		r.Version, r.Group, r.MemberID, r.Generation = 5, "g", ids[0], gen
		r.ProtocolType, r.Protocol = strp(consumerProtocolType), strp("range")
		mut(r)
		return r
	}
	for _, tc := range []struct {
		name string
		req  *kmsg.SyncGroupRequest
		want *kerr.Error
	}{
		{"ok", syncReq(func(*kmsg.SyncGroupRequest) {}), nil},
		{"empty group id", syncReq(func(r *kmsg.SyncGroupRequest) { r.Group = "" }), kerr.InvalidGroupID},
		{"unknown group", syncReq(func(r *kmsg.SyncGroupRequest) { r.Group = "nope" }), kerr.UnknownMemberID},
		{"unknown member", syncReq(func(r *kmsg.SyncGroupRequest) { r.MemberID = "nobody" }), kerr.UnknownMemberID},
		{"illegal generation", syncReq(func(r *kmsg.SyncGroupRequest) { r.Generation = gen + 1 }), kerr.IllegalGeneration},
		{"protocol name differs", syncReq(func(r *kmsg.SyncGroupRequest) { r.Protocol = strp("roundrobin") }), kerr.InconsistentGroupProtocol},
		{"protocol type differs", syncReq(func(r *kmsg.SyncGroupRequest) { r.ProtocolType = strp("connect") }), kerr.InconsistentGroupProtocol},
		{"v5 without protocol type", syncReq(func(r *kmsg.SyncGroupRequest) { r.ProtocolType = nil }), kerr.InconsistentGroupProtocol},
		{"v4 without protocol type", syncReq(func(r *kmsg.SyncGroupRequest) { r.Version, r.ProtocolType, r.Protocol = 4, nil, nil }), nil},
		{"unknown instance", syncReq(func(r *kmsg.SyncGroupRequest) { r.InstanceID = strp("i") }), kerr.UnknownMemberID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *kmsg.SyncGroupResponse
			h.c.SyncGroup(h.now, tc.req, func(r *kmsg.SyncGroupResponse) { got = r })
			if got == nil {
				t.Fatal("not answered")
			}
			wantCode(t, tc.name, got.ErrorCode, tc.want)
		})
	}
	wantCode(t, "heartbeat unknown group", h.heartbeat("nope", ids[0], gen), kerr.UnknownMemberID)
	wantCode(t, "heartbeat empty group id", h.heartbeat("", ids[0], gen), kerr.InvalidGroupID)
	wantCode(t, "heartbeat unknown member", h.heartbeat("g", "x", gen), kerr.UnknownMemberID)
	wantCode(t, "heartbeat generation", h.heartbeat("g", ids[0], gen-1), kerr.IllegalGeneration)
}

func TestClassicLeaveGroup(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := stableGroup(t, h, 3)
	// v0: one member, error at the top level.
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version, req.Group, req.MemberID = 0, "g", "nobody"
	resp := h.c.LeaveGroup(h.now, req)
	wantCode(t, "v0 unknown member", resp.ErrorCode, kerr.UnknownMemberID)
	req.MemberID = ids[0]
	resp = h.c.LeaveGroup(h.now, req)
	wantCode(t, "v0 leave", resp.ErrorCode, nil)
	wantCode(t, "remaining heartbeat", h.heartbeat("g", ids[1], gen), kerr.RebalanceInProgress)
	// v3+: a batch, errors per member.
	req = kmsg.NewPtrLeaveGroupRequest()
	req.Version, req.Group = 5, "g"
	req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: ids[1]}, {MemberID: "nobody"}, {MemberID: "", InstanceID: strp("nope")}, {MemberID: ids[2]}}
	resp = h.c.LeaveGroup(h.now, req)
	codes := []*kerr.Error{nil, kerr.UnknownMemberID, kerr.UnknownMemberID, nil}
	for i, m := range resp.Members {
		wantCode(t, "batched leave", m.ErrorCode, codes[i])
	}
	if g := h.c.classic["g"]; !g.is(stateEmpty) || len(g.members) != 0 {
		t.Fatalf("group after everyone left: %v, %d members", g.state, len(g.members))
	}
	req.Group = "nope"
	for _, m := range h.c.LeaveGroup(h.now, req).Members {
		wantCode(t, "unknown group", m.ErrorCode, kerr.UnknownMemberID)
	}
}

// TestClassicReplacedCallsAnswered: a member's JoinGroup parked in a
// rebalance that a later JoinGroup of the same member replaces (a late
// copy through a half-open connection, or the client's retry on a new
// one) gets the same answer as the later one at the join's end, and a
// SyncGroup replaced so gets the leader's assignment — Kafka leaves the
// replaced call unanswered, and a client waiting on it waits for its
// request timeout (SPEC §6, a member's parked call replaced).
func TestClassicReplacedCallsAnswered(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := stableGroup(t, h, 2)
	leader, follower := ids[0], ids[1]
	first := h.join(joinReq(9, "g", leader, nil)) // the leader's rejoin begins a rebalance
	late := joinReq(9, "g", leader, nil)
	late.Version = 7
	second := h.join(late)
	fj := h.join(joinReq(9, "g", follower, nil))
	for name, j := range map[string]*joinResult{"the replaced join": first, "the later join": second} {
		if !j.done() || j.resp.ErrorCode != 0 || j.resp.Generation != gen+1 || j.resp.MemberID != leader || len(j.resp.Members) != 2 {
			t.Fatalf("%s: %+v; want generation %d with both members", name, j.resp, gen+1)
		}
	}
	if first.resp.Version != 9 || second.resp.Version != 7 {
		t.Fatalf("answer versions %d and %d, want each its request's (9, 7)", first.resp.Version, second.resp.Version)
	}
	if !fj.done() || fj.resp.ErrorCode != 0 {
		t.Fatalf("the follower's join: %+v", fj.resp)
	}
	s1 := h.sync("g", follower, gen+1, nil)
	s2 := h.sync("g", follower, gen+1, nil)
	if s1.resp != nil || s2.resp != nil {
		t.Fatalf("a follower's sync answered before the leader's: %+v, %+v", s1.resp, s2.resp)
	}
	ls := h.sync("g", leader, gen+1, map[string]string{leader: "x", follower: "y"})
	for name, s := range map[string]*syncResult{"the replaced sync": s1, "the later sync": s2, "the leader's sync": ls} {
		if s.resp == nil || s.resp.ErrorCode != 0 {
			t.Fatalf("%s: %+v", name, s.resp)
		}
	}
	if string(s1.resp.MemberAssignment) != "y" || string(s2.resp.MemberAssignment) != "y" {
		t.Fatalf("the follower's syncs got %q and %q, want %q", s1.resp.MemberAssignment, s2.resp.MemberAssignment, "y")
	}
}

// TestClassicReplacedCallsBounded: a client sending one member's
// JoinGroup, then its SyncGroup, over and over in one rebalance (each
// connection given up after its request) makes the member keep no more
// than maxReplacedCalls replaced calls of each kind: the latest are
// answered with the parked call, the older dropped unanswered, as Kafka
// leaves every replaced call. Before, every call was kept until the
// rebalance moved on, without bound.
func TestClassicReplacedCallsBounded(t *testing.T) {
	const calls = 50
	h := newHarness(t, Config{})
	ids, gen := stableGroup(t, h, 2)
	leader, follower := ids[0], ids[1]
	var joins []*joinResult
	for range calls {
		joins = append(joins, h.join(joinReq(9, "g", leader, nil))) // the follower has not rejoined: the join phase goes on
	}
	if n := len(h.c.classic["g"].members[leader].replacedJoins); n != maxReplacedCalls {
		t.Fatalf("the leader keeps %d replaced JoinGroups after %d, want %d", n, calls, maxReplacedCalls)
	}
	if fj := h.join(joinReq(9, "g", follower, nil)); !fj.done() || fj.resp.ErrorCode != 0 {
		t.Fatalf("the follower's join: %+v", fj.resp)
	}
	for i, j := range joins {
		if answered := j.done(); answered != (i >= calls-1-maxReplacedCalls) {
			t.Fatalf("JoinGroup %d of %d answered: %v; want only the last and the %d it replaced last", i, calls, answered, maxReplacedCalls)
		}
	}
	var syncs []*syncResult
	for range calls {
		syncs = append(syncs, h.sync("g", follower, gen+1, nil)) // parked until the leader's assignment
	}
	if n := len(h.c.classic["g"].members[follower].replacedSyncs); n != maxReplacedCalls {
		t.Fatalf("the follower keeps %d replaced SyncGroups after %d, want %d", n, calls, maxReplacedCalls)
	}
	h.sync("g", leader, gen+1, map[string]string{leader: "x", follower: "y"})
	for i, s := range syncs {
		if answered := s.resp != nil; answered != (i >= calls-1-maxReplacedCalls) {
			t.Fatalf("SyncGroup %d of %d answered: %v; want only the last and the %d it replaced last", i, calls, answered, maxReplacedCalls)
		}
	}
}

func TestClassicPendingMemberExpires(t *testing.T) {
	h := newHarness(t, Config{})
	first := h.join(joinReq(9, "g", "", nil))
	wantCode(t, "v4+ join", first.resp.ErrorCode, kerr.MemberIDRequired)
	h.advance(11 * time.Second) // session timeout: the pending id is dropped
	r := h.join(joinReq(9, "g", first.resp.MemberID, nil))
	wantCode(t, "expired pending id", r.resp.ErrorCode, kerr.UnknownMemberID)
	// JoinGroup v3 has no MEMBER_ID_REQUIRED.
	r = h.join(joinReq(3, "g2", "", nil))
	if r.done() {
		t.Fatalf("v3 join answered before the initial delay: %+v", r.resp)
	}
	h.advance(DefaultInitialRebalanceDelay)
	if !r.done() || r.resp.ErrorCode != 0 || r.resp.MemberID == "" {
		t.Fatalf("v3 join: %+v", r.resp)
	}
}

// TestClassicAdoptMembers: a Coordinator over a shard taken over from
// another sidecar (AdoptMembers) takes the members of a group it never
// saw for its members from before the takeover — their Heartbeat and
// SyncGroup are answered REBALANCE_IN_PROGRESS, their JoinGroup with the
// old member id joins as it is — until the group completes a rebalance
// here or the window ends; without AdoptMembers, and after, a member it
// does not know is unknown (UNKNOWN_MEMBER_ID), as Kafka answers.
func TestClassicAdoptMembers(t *testing.T) {
	h := newHarness(t, Config{})
	wantCode(t, "heartbeat of an unknown member", h.heartbeat("g", "old-1", 4), kerr.UnknownMemberID)
	wantCode(t, "join with an unknown member id", h.join(joinReq(9, "g", "old-1", nil)).resp.ErrorCode, kerr.UnknownMemberID)
	h.c.AdoptMembers(h.now)
	wantCode(t, "heartbeat of a member from before the takeover", h.heartbeat("g", "old-1", 4), kerr.RebalanceInProgress)
	wantCode(t, "sync of a member from before the takeover", h.sync("g", "old-2", 4, nil).resp.ErrorCode, kerr.RebalanceInProgress)
	j1 := h.join(joinReq(9, "g", "old-1", nil))
	wantCode(t, "a static member's heartbeat", h.c.Heartbeat(h.now, &kmsg.HeartbeatRequest{Version: 4, Group: "g", MemberID: "old-s", InstanceID: strp("i")}).ErrorCode, kerr.UnknownMemberID)
	j2 := h.join(joinReq(9, "g", "old-2", nil))
	wantCode(t, "heartbeat of an adopted member while preparing", h.heartbeat("g", "old-1", 0), kerr.RebalanceInProgress)
	for range 3 {
		h.advance(DefaultInitialRebalanceDelay)
	}
	for i, j := range []*joinResult{j1, j2} {
		if want := []string{"old-1", "old-2"}[i]; !j.done() || j.resp.ErrorCode != 0 || j.resp.MemberID != want || j.resp.Generation != 1 {
			t.Fatalf("join of %s: %+v", want, j.resp)
		}
	}
	leader := j1.resp.LeaderID
	other := map[string]string{"old-1": "old-2", "old-2": "old-1"}[leader]
	so := h.sync("g", other, 1, nil)
	sl := h.sync("g", leader, 1, map[string]string{"old-1": "a", "old-2": "b"})
	if so.resp == nil || sl.resp == nil || so.resp.ErrorCode != 0 || sl.resp.ErrorCode != 0 {
		t.Fatalf("syncs: %+v, %+v", so.resp, sl.resp)
	}
	wantCode(t, "heartbeat of an adopted member", h.heartbeat("g", "old-1", 1), nil)
	// The group completed a rebalance here: no more adoptions in it.
	wantCode(t, "heartbeat of another unknown member", h.heartbeat("g", "old-3", 4), kerr.UnknownMemberID)
	wantCode(t, "join of another unknown member", h.join(joinReq(9, "g", "old-3", nil)).resp.ErrorCode, kerr.UnknownMemberID)
	// Nor in any group once the window (MaxSessionTimeout) ended.
	wantCode(t, "another group in the window", h.heartbeat("g2", "old-9", 2), kerr.RebalanceInProgress)
	h.advance(DefaultMaxSessionTimeout)
	wantCode(t, "another group after the window", h.heartbeat("g2", "old-9", 2), kerr.UnknownMemberID)
}

// TestClassicAdoptedGhostBounded: a JoinGroup under a member id the
// client has dropped (a late copy through a half-open connection after a
// partition healed) is taken for a member from before the takeover
// (AdoptMembers) — a ghost: it never syncs nor heartbeats. Leader or
// not, it holds the group for no longer than Kafka's own bounds for a
// member that stops: its session timeout (leader: the followers wait in
// SyncGroup until then, and are then told to rejoin), or the sync
// deadline, the rebalance timeout, when that comes first (follower whose
// session is longer); the group then completes a generation without it.
func TestClassicAdoptedGhostBounded(t *testing.T) {
	const session, rebalance = 10 * time.Second, 30 * time.Second
	for _, tc := range []struct {
		name         string
		ghostLeads   bool
		ghostSession time.Duration
		bound        time.Duration // from the join's end
	}{
		{"leader, session first", true, session, session},
		{"follower, sync deadline first", false, 45 * time.Second, rebalance},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			h.c.AdoptMembers(h.now)
			join := func(id string, sess time.Duration) *joinResult {
				req := joinReq(9, "g", id, nil)
				req.SessionTimeoutMillis = int32(sess.Milliseconds())
				return h.join(req)
			}
			var ghost, j1, j2 *joinResult
			if tc.ghostLeads {
				ghost, j1, j2 = join("ghost", tc.ghostSession), join("old-1", session), join("old-2", session)
			} else {
				j1, ghost, j2 = join("old-1", session), join("ghost", tc.ghostSession), join("old-2", session)
			}
			for !j1.done() {
				h.advance(100 * time.Millisecond)
			}
			for _, j := range []*joinResult{ghost, j1, j2} {
				if !j.done() || j.resp.ErrorCode != 0 || j.resp.Generation != 1 {
					t.Fatalf("join: %+v", j.resp)
				}
			}
			if lead := j1.resp.LeaderID == "ghost"; lead != tc.ghostLeads {
				t.Fatalf("leader %s", j1.resp.LeaderID)
			}
			// The live members sync (the ghost's answer went nowhere).
			s1 := h.sync("g", "old-1", 1, map[string]string{"old-1": "a", "old-2": "b", "ghost": "c"})
			s2 := h.sync("g", "old-2", 1, nil)
			if !tc.ghostLeads && (s1.resp == nil || s2.resp == nil || s1.resp.ErrorCode != 0 || s2.resp.ErrorCode != 0) {
				t.Fatalf("syncs with a live leader: %+v, %+v", s1.resp, s2.resp)
			}
			// Live members heartbeat every second; nothing moves before
			// the bound.
			for elapsed := time.Duration(0); elapsed < tc.bound-time.Second; elapsed += time.Second {
				h.advance(time.Second)
				if !tc.ghostLeads {
					for _, id := range []string{"old-1", "old-2"} {
						wantCode(t, "a live member's heartbeat before the bound", h.heartbeat("g", id, 1), nil)
					}
				}
			}
			if tc.ghostLeads && (s1.resp != nil || s2.resp != nil) {
				t.Fatalf("syncs answered before the ghost leader's session expired: %+v, %+v", s1.resp, s2.resp)
			}
			h.advance(time.Second)
			if g := h.c.classic["g"]; g.members["ghost"] != nil || !g.is(statePreparingRebalance) {
				t.Fatalf("at the bound: state %v, ghost still a member: %v", g.state, g.members["ghost"] != nil)
			}
			if tc.ghostLeads {
				wantCode(t, "the parked sync at the ghost leader's expiry", s1.resp.ErrorCode, kerr.RebalanceInProgress)
				wantCode(t, "the parked sync at the ghost leader's expiry", s2.resp.ErrorCode, kerr.RebalanceInProgress)
			} else {
				wantCode(t, "a live member's heartbeat after the ghost's removal", h.heartbeat("g", "old-1", 1), kerr.RebalanceInProgress)
			}
			r1, r2 := h.join(joinReq(9, "g", "old-1", nil)), h.join(joinReq(9, "g", "old-2", nil))
			for _, j := range []*joinResult{r1, r2} {
				if !j.done() || j.resp.ErrorCode != 0 || j.resp.Generation != 2 {
					t.Fatalf("rejoin: %+v", j.resp)
				}
			}
			if lead := r1.resp.LeaderID; lead != "old-1" || len(r1.resp.Members) != 2 {
				t.Fatalf("generation 2: leader %s, members %v; want old-1 leading old-1 and old-2", lead, r1.resp.Members)
			}
		})
	}
}

// TestClassicAdoptMembersCommit: in AdoptMembers' window a member from
// before the takeover that commits offsets before it rejoined is answered
// REBALANCE_IN_PROGRESS, as its Heartbeat is (a client keeps its
// partitions and rejoins), not UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION
// (the Java client resets its generation and loses its partitions); a
// simple consumer's commit is untouched, and after the window the answers
// are Kafka's for a member it does not know.
func TestClassicAdoptMembersCommit(t *testing.T) {
	h := newHarness(t, Config{})
	wantCode(t, "a simple consumer's commit", h.commit(8, "g", "", -1, 5), nil)
	wantCode(t, "an unknown member's commit, group with offsets", h.commit(8, "g", "old-1", 4, 6), kerr.UnknownMemberID)
	wantCode(t, "an unknown member's commit, no group", h.commit(8, "g2", "old-9", 2, 6), kerr.IllegalGeneration)
	h.c.AdoptMembers(h.now)
	wantCode(t, "commit of a member from before the takeover", h.commit(8, "g", "old-1", 4, 6), kerr.RebalanceInProgress)
	wantCode(t, "commit of a member from before the takeover, no offsets", h.commit(8, "g2", "old-9", 2, 6), kerr.RebalanceInProgress)
	wantCode(t, "a simple consumer's commit in the window", h.commit(8, "g", "", -1, 7), nil)
	h.advance(DefaultMaxSessionTimeout)
	wantCode(t, "an unknown member's commit after the window", h.commit(8, "g", "old-1", 4, 8), kerr.UnknownMemberID)
}

// TestClassicLogsStateChanges: a group's rebalances, with their reason,
// generation and members, and a member's expiry are debug lines of the
// Coordinator's logger (Deps.Logger), and the adoption window an info
// line — what a stalled group is analysed from.
func TestClassicLogsStateChanges(t *testing.T) {
	var buf bytes.Buffer
	h := newHarnessLogged(t, Config{}, slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	h.c.AdoptMembers(h.now)
	ids, gen := stableGroup(t, h, 2)
	for range 3 {
		h.advance(3 * time.Second)
		wantCode(t, "heartbeat", h.heartbeat("g", ids[0], gen), nil)
	}
	h.advance(3 * time.Second) // ids[1]'s 10 s session expires
	for _, want := range []string{
		`level=INFO msg="group: adopting the members`,
		`msg="group: rebalance begun" group=g from=Empty generation=0 members=[` + ids[0] + `] reason="member ` + ids[0] + ` joined"`,
		`msg="group: join phase ended" group=g generation=1 state=CompletingRebalance members="[` + ids[0] + ` ` + ids[1] + `]" leader=` + ids[0] + ` protocol=range removed=[]`,
		`msg="group: stable" group=g generation=1`,
		`msg="group: member removed" group=g member=` + ids[1] + ` state=Stable generation=1 reason="member ` + ids[1] + `'s session expired"`,
		`msg="group: rebalance begun" group=g from=Stable generation=1 members=[` + ids[0] + `] reason="member ` + ids[1] + `'s session expired"`,
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("the log lacks %s:\n%s", want, buf.String())
		}
	}
}

// TestClassicDebugLinesOffCostNothing: with the Coordinator's logger not
// taking debug lines, beginning a rebalance of a 20-member group
// allocates only its join deadline — the debug line listing its members
// is not built.
func TestClassicDebugLinesOffCostNothing(t *testing.T) {
	h := newHarnessLogged(t, Config{}, slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})))
	stableGroup(t, h, 20)
	g := h.c.classic["g"]
	at := h.now.Add(time.Minute).UnixMilli()
	deadline := testing.AllocsPerRun(100, func() { h.c.scheduleJoinTimeout("g", at) })
	rebalance := testing.AllocsPerRun(100, func() {
		g.transition(stateStable, h.now.UnixMilli())
		h.c.prepareRebalance(g, h.now.UnixMilli(), "a test's rebalance")
	})
	if !g.is(statePreparingRebalance) {
		t.Fatalf("state %v after prepareRebalance", g.state)
	}
	if rebalance != deadline {
		t.Fatalf("beginning a rebalance allocates %v times, its join deadline alone %v", rebalance, deadline)
	}
}
