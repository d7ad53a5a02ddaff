package e2e

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroupPendingMemberHoldsJoinMatchesKafka asks Apache Kafka 4.4 (the
// package's cluster) and the sidecar the same question: a JoinGroup v9
// with an empty member id (session 6 s) is answered MEMBER_ID_REQUIRED
// and never followed by the JoinGroup with the id it was given (a client
// that no longer waits, as after a network partition's half-open
// connections: DESIGN §Consumer groups); then the only member of the
// Stable group, its leader, rejoins. Both coordinators hold the leader's
// JoinGroup until the pending member's session has expired (KIP-394: a
// pending member counts as one not yet joined) and then complete the
// rebalance without it — generation 2, the leader alone — well before the
// leader's rebalance timeout (25 s). The bounds tell the two apart, not
// a speed: no earlier than the pending member's session (6 s), and well
// before the rebalance timeout (under 20 s) — a coordinator that held the
// JoinGroup for the leader's rebalance timeout instead fails the second.
// Both coordinators answered at 6.0 s.
func TestGroupPendingMemberHoldsJoinMatchesKafka(t *testing.T) {
	t.Parallel()
	kc := sharedKafka(t)
	sc := StartSidecar(t, "", groupSidecarSets...)
	const group = "pending-ghost"
	for _, tg := range []struct {
		name string
		dial func(t *testing.T) *RawConn
	}{
		{"kafka", func(t *testing.T) *RawConn { return dialCoordinator(t, kc.BootstrapServers(), group) }},
		{"sidecar", func(t *testing.T) *RawConn { return dialRaw(t, sc.Addr) }},
	} {
		t.Run(tg.name, func(t *testing.T) {
			leader, ghost := tg.dial(t), tg.dial(t)
			const ghostSession = 6_000
			// ghostHeldAtMost lies between the pending member's session
			// (6 s) and the leader's rebalance timeout (25 s).
			const ghostHeldAtMost = 20 * time.Second
			jr := leader.Request(joinReq(group, "", nil, 25_000)).(*kmsg.JoinGroupResponse)
			wantCode(t, "JoinGroup without a member id", jr.ErrorCode, kerr.MemberIDRequired)
			id := jr.MemberID
			jr = leader.Request(joinReq(group, id, nil, 25_000)).(*kmsg.JoinGroupResponse)
			wantCode(t, "JoinGroup", jr.ErrorCode, nil)
			if jr.Generation != 1 || jr.LeaderID != id {
				t.Fatalf("JoinGroup: generation %d led by %s; want 1 led by %s", jr.Generation, jr.LeaderID, id)
			}
			sync := kmsg.NewPtrSyncGroupRequest()
			sync.Version, sync.Group, sync.MemberID, sync.Generation = 5, group, id, 1
			sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
			sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: id, MemberAssignment: []byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 0}}}
			wantCode(t, "SyncGroup", leader.Request(sync).(*kmsg.SyncGroupResponse).ErrorCode, nil)

			sent := time.Now()
			gj := joinReq(group, "", nil, 25_000)
			gj.SessionTimeoutMillis = ghostSession
			gr := ghost.Request(gj).(*kmsg.JoinGroupResponse)
			wantCode(t, "the pending member's JoinGroup", gr.ErrorCode, kerr.MemberIDRequired)

			jr = leader.Request(joinReq(group, id, nil, 25_000)).(*kmsg.JoinGroupResponse)
			answered := time.Since(sent)
			wantCode(t, "the leader's rejoin", jr.ErrorCode, nil)
			if jr.Generation != 2 || jr.LeaderID != id || len(jr.Members) != 1 || jr.Members[0].MemberID != id {
				t.Fatalf("the leader's rejoin: generation %d led by %s, members %v; want 2, led by %s alone", jr.Generation, jr.LeaderID, jr.Members, id)
			}
			if answered < ghostSession*time.Millisecond {
				t.Fatalf("the leader's rejoin answered %v after the pending member's JoinGroup was sent: before its %d ms session expired", answered, ghostSession)
			}
			if answered >= ghostHeldAtMost {
				t.Fatalf("the leader's rejoin answered %v after the pending member's JoinGroup was sent: held toward the leader's 25 s rebalance timeout, not until the pending member's %d ms session", answered, ghostSession)
			}
			t.Logf("the leader's rejoin answered %v after the pending member's JoinGroup", answered)
		})
	}
}

// dialCoordinator opens a raw connection to group's coordinator in the
// Kafka cluster at bootstrap (comma-separated addresses) once it serves
// the group: FindCoordinator and DescribeGroups are sent again while
// __consumer_offsets is being created and its leaders elected
// (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS).
func dialCoordinator(t *testing.T, bootstrap, group string) *RawConn {
	t.Helper()
	rc := dialRaw(t, strings.Split(bootstrap, ",")[0])
	deadline := time.Now().Add(60 * time.Second)
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorKeys = 4, []string{group}
		c := rc.Request(req).(*kmsg.FindCoordinatorResponse).Coordinators[0]
		code := c.ErrorCode
		if code == 0 {
			cc := dialRaw(t, net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))))
			dg := kmsg.NewPtrDescribeGroupsRequest()
			dg.Version, dg.Groups = 5, []string{group}
			code = cc.Request(dg).(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode
			switch code {
			case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code:
			default:
				return cc
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the coordinator of %s: %v", group, kerr.ErrorForCode(code))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
