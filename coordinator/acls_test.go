package coordinator

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/acl"
)

func testACL(topic, principal string, op kmsg.ACLOperation) acl.Binding {
	return acl.Binding{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: topic, PatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: principal, Host: "*", Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
}

// TestACLsSurviveRestart: entries added and deleted through shard 0 are
// found after a reopen, from a snapshot plus the records after it as from
// a replay of every record; adding one held writes nothing, and a delete
// answers each filter with what it selected (a binding two filters select
// in both).
func TestACLsSurviveRestart(t *testing.T) {
	e := newEnv(t, 2, func(c *Config) { c.SnapshotIntervalRecords = 5 })
	full := newEnv(t, 2, func(c *Config) { c.SnapshotIntervalRecords = -1 })
	ctx := context.Background()
	for _, env := range []*env{e, full} {
		for i := range 20 {
			err := env.c.CreateACLs(ctx, []acl.Binding{
				testACL(fmt.Sprintf("t%02d", i), "User:alice", kmsg.ACLOperationRead),
				testACL(fmt.Sprintf("t%02d", i), "User:bob", kmsg.ACLOperationWrite),
				testACL(fmt.Sprintf("t%02d", i), "User:bob", kmsg.ACLOperationWrite), // twice: once
			})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
		}
		if err := env.c.CreateACLs(ctx, []acl.Binding{testACL("t00", "User:alice", kmsg.ACLOperationRead)}); err != nil {
			t.Fatalf("create again: %v", err)
		}
		bob, t03 := "User:bob", "t03"
		matched, err := env.c.DeleteACLs(ctx, []acl.Filter{
			{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Principal: &bob,
				Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny},
			{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: &t03, PatternType: kmsg.ACLResourcePatternTypeMatch,
				Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny},
		})
		if err != nil || len(matched) != 2 || len(matched[0]) != 20 || len(matched[1]) != 2 {
			t.Fatalf("delete: %v, %d filters answered: %v", err, len(matched), matched)
		}
	}
	if n := len(e.c.ACLs()); n != 19 {
		t.Fatalf("%d ACLs held, want 19 (alice's but t03's)", n)
	}
	before := stateBytes(e.c)
	if !reflect.DeepEqual(before, stateBytes(full.c)) {
		t.Fatal("states differ before the restart")
	}
	e.reopen()
	full.reopen()
	if got := stateBytes(e.c); !reflect.DeepEqual(got, before) {
		t.Fatal("snapshot + replay differs from the state before the restart")
	}
	if got := stateBytes(full.c); !reflect.DeepEqual(got, before) {
		t.Fatal("full replay differs from the state before the restart")
	}
	got := e.c.ACLs()
	if len(got) != 19 || !slices.IsSortedFunc(got, acl.Compare) || slices.Contains(got, testACL("t03", "User:alice", kmsg.ACLOperationRead)) ||
		!slices.Contains(got, testACL("t19", "User:alice", kmsg.ACLOperationRead)) {
		t.Fatalf("after the restart: %v", got)
	}
}

// TestACLRecordsRefused: a record 117 that would add an entry held, remove
// one not held, or hold an invalid entry refuses the log (the state is
// unchanged); a snapshot's entries out of order refuse the load.
func TestACLRecordsRefused(t *testing.T) {
	st := newState(0, 0, discardLogger())
	a := testACL("t", "User:a", kmsg.ACLOperationRead)
	if err := st.apply(aclRecord(a, false)); err != nil {
		t.Fatal(err)
	}
	bad := a
	bad.Principal = "alice"
	for name, rec := range map[string]*records.ACL{
		"added twice":       aclRecord(a, false),
		"removed, not held": aclRecord(testACL("u", "User:a", kmsg.ACLOperationRead), true),
		"no colon":          aclRecord(bad, false),
		"pattern MATCH":     func() *records.ACL { r := aclRecord(a, false); r.PatternType = 2; return r }(),
		"operation ANY":     func() *records.ACL { r := aclRecord(a, false); r.Operation = 1; return r }(),
	} {
		if err := st.apply(rec); !errors.Is(err, errInconsistent) {
			t.Errorf("%s: %v, want errInconsistent", name, err)
		}
	}
	if len(st.acls) != 1 {
		t.Fatalf("refused records changed the state: %v", st.acls)
	}
	b := testACL("u", "User:a", kmsg.ACLOperationRead)
	enc := appendACLSnapshot([]acl.Binding{a, b})
	if err := newState(0, 0, discardLogger()).readACLSnapshot(&kbin.Reader{Src: enc}); err != nil {
		t.Fatalf("good snapshot: %v", err)
	}
	swapped := appendACLSnapshot([]acl.Binding{b, a})
	if err := newState(0, 0, discardLogger()).readACLSnapshot(&kbin.Reader{Src: swapped}); err == nil {
		t.Fatal("entries out of order loaded")
	}
}

// TestACLsOnReplicas: an entry added at shard 0's owner is found on
// another sidecar's replica of shard 0 (so every sidecar authorizes with
// it), also on one opened after snapshots; a sidecar not hosting shard 0
// refuses to write one (diskless.ErrNotCoordinator: the server forwards
// CreateAcls and DeleteAcls to the controller).
func TestACLsOnReplicas(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 2, func(c *Config) { c.SnapshotIntervalRecords = 3 })
	cl.host(0, 0, 1, 2, 3)
	owner, replica := cl.nodes[0], cl.nodes[1]
	for i := range 10 {
		if err := owner.CreateACLs(ctx, []acl.Binding{testACL(fmt.Sprintf("t%d", i), "User:a", kmsg.ACLOperationWrite)}); err != nil {
			t.Fatalf("create: %v", err)
		}
	}
	waitFor(t, replica, "the replica's ACLs", func() bool { return len(replica.ACLs()) == 10 })
	if err := replica.CreateACLs(ctx, []acl.Binding{testACL("x", "User:a", kmsg.ACLOperationRead)}); !errors.Is(err, diskless.ErrNotCoordinator) {
		t.Fatalf("create on a replica: %v, want ErrNotCoordinator", err)
	}
	if _, err := replica.DeleteACLs(ctx, []acl.Filter{{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}}); !errors.Is(err, diskless.ErrNotCoordinator) {
		t.Fatalf("delete on a replica: %v, want ErrNotCoordinator", err)
	}
	fresh := newClusterOn(t, cl, 3)
	if got := fresh.ACLs(); !reflect.DeepEqual(got, owner.ACLs()) {
		t.Fatalf("a replica opened after snapshots holds %v", got)
	}
}
