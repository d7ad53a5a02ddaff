package e2e

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func joinReq(group, member string, instance *string, rebalance int32) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = 9
	r.Group, r.MemberID, r.InstanceID = group, member, instance
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 10_000, rebalance
	r.ProtocolType = "consumer"
	r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1, 0, 0, 0, 0}}}
	return r
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	if got != errCode(want) {
		t.Fatalf("%s: got %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

func errCode(e *kerr.Error) int16 {
	if e == nil {
		return 0
	}
	return e.Code
}

// TestGroupsBadInput drives the group APIs over raw connections and checks
// Kafka's error codes: MEMBER_ID_REQUIRED, ILLEGAL_GENERATION (a sync,
// heartbeat or commit of another generation, a commit of a stale one),
// UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, GROUP_MAX_SIZE_REACHED
// (group.max.size), FENCED_INSTANCE_ID (a heartbeat and a commit of a
// static member id its instance's new join fenced), NON_EMPTY_GROUP,
// GROUP_ID_NOT_FOUND, and FindCoordinator's batched keys and OffsetFetch
// v8's several groups; the sidecar stays up.
func TestGroupsBadInput(t *testing.T) {
	t.Parallel()
	sc := StartSidecar(t, "", append(append([]string(nil), groupSidecarSets...), "group.max.size=2")...)
	ctx := testCtx(t, 2*time.Minute)
	createTopic(t, ctx, sc, "bad-groups", 2, nil)
	rc := sc.DialRaw()

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKeys = 4, []string{"g", "other"}
	fcr := rc.Request(fc).(*kmsg.FindCoordinatorResponse)
	if len(fcr.Coordinators) != 2 || fcr.Coordinators[0].ErrorCode != 0 || fcr.Coordinators[1].Port <= 0 {
		t.Fatalf("FindCoordinator v4 = %+v; want two coordinators", fcr.Coordinators)
	}
	// A sidecar alone is its transactions' coordinator too (DESIGN
	// §Transactions).
	fc.CoordinatorType = 1
	fcr = rc.Request(fc).(*kmsg.FindCoordinatorResponse)
	wantCode(t, "FindCoordinator of a transaction coordinator", fcr.Coordinators[0].ErrorCode, nil)

	// MEMBER_ID_REQUIRED, then generation 1.
	jr := rc.Request(joinReq("g", "", nil, 3000)).(*kmsg.JoinGroupResponse)
	wantCode(t, "JoinGroup without a member id", jr.ErrorCode, kerr.MemberIDRequired)
	m1 := jr.MemberID
	jr = rc.Request(joinReq("g", m1, nil, 3000)).(*kmsg.JoinGroupResponse)
	wantCode(t, "JoinGroup", jr.ErrorCode, nil)
	if jr.Generation != 1 || jr.LeaderID != m1 {
		t.Fatalf("JoinGroup = generation %d leader %s; want 1 led by %s", jr.Generation, jr.LeaderID, m1)
	}
	sync := func(member string, gen int32) int16 {
		r := kmsg.NewPtrSyncGroupRequest()
		r.Version, r.Group, r.MemberID, r.Generation = 5, "g", member, gen
		r.ProtocolType, r.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
		if member == m1 {
			r.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: m1, MemberAssignment: []byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 0}}}
		}
		return rc.Request(r).(*kmsg.SyncGroupResponse).ErrorCode
	}
	wantCode(t, "SyncGroup of another generation", sync(m1, 5), kerr.IllegalGeneration)
	wantCode(t, "SyncGroup of an unknown member", sync("nobody", 1), kerr.UnknownMemberID)
	wantCode(t, "SyncGroup", sync(m1, 1), nil)
	hb := func(c *RawConn, member string, gen int32, instance *string) int16 {
		r := kmsg.NewPtrHeartbeatRequest()
		r.Version, r.Group, r.MemberID, r.Generation, r.InstanceID = 4, "g", member, gen, instance
		return c.Request(r).(*kmsg.HeartbeatResponse).ErrorCode
	}
	wantCode(t, "Heartbeat", hb(rc, m1, 1, nil), nil)
	wantCode(t, "Heartbeat of an unknown member", hb(rc, "nobody", 1, nil), kerr.UnknownMemberID)
	wantCode(t, "Heartbeat of another generation", hb(rc, m1, 9, nil), kerr.IllegalGeneration)

	commit := func(group, member string, gen int32) int16 {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Version, r.Group, r.MemberID, r.Generation = 8, group, member, gen
		r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "bad-groups", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 7, LeaderEpoch: -1}}}}
		return rc.Request(r).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	wantCode(t, "OffsetCommit of another generation", commit("g", m1, 4), kerr.IllegalGeneration)
	wantCode(t, "OffsetCommit of an unknown member", commit("g", "nobody", 1), kerr.UnknownMemberID)
	wantCode(t, "OffsetCommit", commit("g", m1, 1), nil)
	wantCode(t, "OffsetCommit of a simple group", commit("simple", "", -1), nil)

	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 8
	of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g"}, {Group: "simple"}, {Group: "none"}}
	ofr := rc.Request(of).(*kmsg.OffsetFetchResponse)
	if len(ofr.Groups) != 3 || len(ofr.Groups[0].Topics) != 1 || ofr.Groups[0].Topics[0].Partitions[0].Offset != 7 ||
		ofr.Groups[1].Topics[0].Partitions[0].Offset != 7 || len(ofr.Groups[2].Topics) != 0 {
		t.Fatalf("OffsetFetch v8 of three groups = %+v", ofr.Groups)
	}

	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version, del.Groups = 2, []string{"g", "nope", "simple"}
	dr := rc.Request(del).(*kmsg.DeleteGroupsResponse)
	wantCode(t, "DeleteGroups of a group with members", dr.Groups[0].ErrorCode, kerr.NonEmptyGroup)
	wantCode(t, "DeleteGroups of an unknown group", dr.Groups[1].ErrorCode, kerr.GroupIDNotFound)
	wantCode(t, "DeleteGroups of a simple group", dr.Groups[2].ErrorCode, nil)

	// A second member starts a rebalance: the first's heartbeat gets
	// REBALANCE_IN_PROGRESS; a third is over group.max.size.
	rc2 := sc.DialRaw()
	jr2 := rc2.Request(joinReq("g", "", nil, 3000)).(*kmsg.JoinGroupResponse)
	wantCode(t, "second JoinGroup without a member id", jr2.ErrorCode, kerr.MemberIDRequired)
	parked := make(chan error, 1)
	go func() {
		_, err := rc2.TryRequest(joinReq("g", jr2.MemberID, nil, 3000))
		parked <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for code := hb(rc, m1, 1, nil); code != errCode(kerr.RebalanceInProgress); code = hb(rc, m1, 1, nil) {
		if time.Now().After(deadline) {
			t.Fatalf("Heartbeat during a rebalance: %v, want REBALANCE_IN_PROGRESS", kerr.ErrorForCode(code))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The first member rejoins: the join phase completes with both.
	jr = rc.Request(joinReq("g", m1, nil, 3000)).(*kmsg.JoinGroupResponse)
	wantCode(t, "the first member's rejoin", jr.ErrorCode, nil)
	if err := <-parked; err != nil {
		t.Fatalf("the parked JoinGroup: %v", err)
	}
	if jr.Generation != 2 || len(jr.Members) != 2 {
		t.Fatalf("rejoin: generation %d with %d members; want 2 and 2", jr.Generation, len(jr.Members))
	}
	wantCode(t, "OffsetCommit of the stale generation 1", commit("g", m1, 1), kerr.IllegalGeneration)
	rc3 := sc.DialRaw()
	jr3 := rc3.Request(joinReq("g", "", nil, 3000)).(*kmsg.JoinGroupResponse)
	if jr3.ErrorCode == errCode(kerr.MemberIDRequired) {
		jr3 = rc3.Request(joinReq("g", jr3.MemberID, nil, 3000)).(*kmsg.JoinGroupResponse)
	}
	wantCode(t, "JoinGroup past group.max.size", jr3.ErrorCode, kerr.GroupMaxSizeReached)

	// Static membership: a new join of the instance fences the old
	// member id.
	inst := kmsg.StringPtr("instance-1")
	rs := sc.DialRaw()
	js := rs.Request(joinReq("static", "", inst, 3000)).(*kmsg.JoinGroupResponse)
	wantCode(t, "static JoinGroup", js.ErrorCode, nil)
	old := js.MemberID
	js2 := rs.Request(joinReq("static", "", inst, 3000)).(*kmsg.JoinGroupResponse)
	wantCode(t, "static JoinGroup again", js2.ErrorCode, nil)
	if js2.MemberID == old {
		t.Fatalf("the rejoined static member kept member id %s", old)
	}
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.Generation, r.InstanceID = 4, "static", old, js.Generation, inst
	wantCode(t, "Heartbeat of the fenced static member id", rs.Request(r).(*kmsg.HeartbeatResponse).ErrorCode, kerr.FencedInstanceID)
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version, oc.Group, oc.MemberID, oc.Generation, oc.InstanceID = 8, "static", old, js.Generation, inst
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "bad-groups", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 3, LeaderEpoch: -1}}}}
	wantCode(t, "OffsetCommit of the fenced static member id", rs.Request(oc).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode, kerr.FencedInstanceID)

	// KIP-848: a heartbeat into a classic group with members, and an
	// unknown member of a consumer group.
	cg := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	cg.Version, cg.Group, cg.MemberID, cg.MemberEpoch = 1, "g", "0123456789abcdefghijkl", 0
	cg.RebalanceTimeoutMillis, cg.SubscribedTopicNames = 5000, []string{"bad-groups"}
	cg.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{} // empty, not null, when joining
	wantCode(t, "ConsumerGroupHeartbeat into a classic group", rc.Request(cg).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode, kerr.GroupIDNotFound)
	cg.Group, cg.MemberEpoch = "kip848", 3
	wantCode(t, "ConsumerGroupHeartbeat of an unknown member", rc.Request(cg).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode, kerr.UnknownMemberID)
	cg.MemberEpoch = 0
	cgr := rc.Request(cg).(*kmsg.ConsumerGroupHeartbeatResponse)
	wantCode(t, "ConsumerGroupHeartbeat joining", cgr.ErrorCode, nil)
	if cgr.MemberEpoch < 1 {
		t.Fatalf("ConsumerGroupHeartbeat joined with epoch %d", cgr.MemberEpoch)
	}
	cg.MemberEpoch = cgr.MemberEpoch + 5
	wantCode(t, "ConsumerGroupHeartbeat with a future epoch", rc.Request(cg).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode, kerr.FencedMemberEpoch)
	cgd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cgd.Groups = []string{"kip848", "g"}
	cgdr := rc.Request(cgd).(*kmsg.ConsumerGroupDescribeResponse)
	if len(cgdr.Groups) != 2 || cgdr.Groups[0].ErrorCode != 0 || len(cgdr.Groups[0].Members) != 1 || cgdr.Groups[1].ErrorCode != errCode(kerr.GroupIDNotFound) {
		t.Fatalf("ConsumerGroupDescribe = %+v", cgdr.Groups)
	}
	if !sc.Alive() {
		t.Fatal("the sidecar died")
	}
}
