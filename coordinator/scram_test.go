package coordinator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/diskless"
)

func testScram(mech diskless.ScramMechanism, seed byte) diskless.ScramCredential {
	n := mech.KeySize()
	return diskless.ScramCredential{Mechanism: mech, Iterations: 4096 + int32(seed), Salt: []byte{seed, 1, 2},
		StoredKey: bytes.Repeat([]byte{seed}, n), ServerKey: bytes.Repeat([]byte{seed + 1}, n)}
}

// TestScramCredentialsSurviveRestart: credentials set and removed through
// shard 0 are found after a reopen, from a snapshot plus the records
// after it as from a replay of every record, and a removal of a
// credential not held is answered RESOURCE_NOT_FOUND and changes nothing.
func TestScramCredentialsSurviveRestart(t *testing.T) {
	e := newEnv(t, 2, func(c *Config) { c.SnapshotIntervalRecords = 5 })
	full := newEnv(t, 2, func(c *Config) { c.SnapshotIntervalRecords = -1 })
	ctx := context.Background()
	for _, env := range []*env{e, full} {
		for i := range 20 {
			res, err := env.c.AlterScramCredentials(ctx, []diskless.ScramChange{
				{User: fmt.Sprintf("u%02d", i), Credential: testScram(diskless.ScramSHA512, byte(i))},
				{User: fmt.Sprintf("v%02d", i), Credential: testScram(diskless.ScramSHA256, byte(i))},
			})
			if err != nil || res[0] != nil || res[1] != nil {
				t.Fatalf("alter: %v %v", res, err)
			}
		}
		res, err := env.c.AlterScramCredentials(ctx, []diskless.ScramChange{
			{User: "u03", Remove: true, Credential: diskless.ScramCredential{Mechanism: diskless.ScramSHA512}},
			{User: "u04", Remove: true, Credential: diskless.ScramCredential{Mechanism: diskless.ScramSHA256}},
			{User: "u05", Credential: testScram(diskless.ScramSHA512, 99)},
		})
		if err != nil || res[0] != nil || !errors.Is(res[1], kerr.ResourceNotFound) || res[2] != nil {
			t.Fatalf("remove: %v %v", res, err)
		}
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
	if _, ok := e.c.ScramCredential("u03", diskless.ScramSHA512); ok {
		t.Fatal("u03's removed credential still held")
	}
	if c, ok := e.c.ScramCredential("u05", diskless.ScramSHA512); !ok || !reflect.DeepEqual(c, testScram(diskless.ScramSHA512, 99)) {
		t.Fatalf("u05 = %+v %v", c, ok)
	}
	if _, ok := e.c.ScramCredential("u05", diskless.ScramSHA256); ok {
		t.Fatal("u05 has a SCRAM-SHA-256 credential it never got")
	}
	users := e.c.ScramUsers()
	if len(users) != 39 || len(users["v07"]) != 1 || users["v07"][0].Iterations != 4103 || users["v07"][0].StoredKey != nil {
		t.Fatalf("ScramUsers: %d users, v07 %+v", len(users), users["v07"])
	}
}

// TestScramSnapshotRefused: a snapshot's credentials out of order or
// invalid refuse the load.
func TestScramSnapshotRefused(t *testing.T) {
	good := map[scramKey]diskless.ScramCredential{
		{"a", diskless.ScramSHA256}: testScram(diskless.ScramSHA256, 1),
		{"b", diskless.ScramSHA512}: testScram(diskless.ScramSHA512, 2),
	}
	st := newState(0, 0, discardLogger())
	st.scram = good
	body := st.appendSnapshot(nil)
	if err := newState(0, 0, discardLogger()).decodeSnapshot(body); err != nil {
		t.Fatalf("good snapshot: %v", err)
	}
	bad := testScram(diskless.ScramSHA256, 1)
	bad.StoredKey = bad.StoredKey[:31]
	st.scram = map[scramKey]diskless.ScramCredential{{"a", diskless.ScramSHA256}: bad}
	if err := newState(0, 0, discardLogger()).decodeSnapshot(st.appendSnapshot(nil)); err == nil {
		t.Fatal("a 31-byte StoredKey of SCRAM-SHA-256 loaded")
	}
	// Swap the two entries' order in the encoding.
	enc := appendScramSnapshot(good)
	one := appendScramSnapshot(map[scramKey]diskless.ScramCredential{{"a", diskless.ScramSHA256}: good[scramKey{"a", diskless.ScramSHA256}]})
	two := appendScramSnapshot(map[scramKey]diskless.ScramCredential{{"b", diskless.ScramSHA512}: good[scramKey{"b", diskless.ScramSHA512}]})
	swapped := append([]byte{enc[0]}, append(two[1:], one[1:]...)...)
	if err := newState(0, 0, discardLogger()).readScramSnapshot(&kbin.Reader{Src: swapped}); err == nil {
		t.Fatal("credentials out of order loaded")
	}
}

// TestScramCredentialsOnReplicas: a credential set at shard 0's owner is
// found on another sidecar's replica of shard 0 (so logins work on every
// sidecar), also on one opened after snapshots; a sidecar not hosting
// shard 0 refuses to write one (diskless.ErrNotCoordinator: the server
// forwards AlterUserScramCredentials to the controller).
func TestScramCredentialsOnReplicas(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 2, func(c *Config) { c.SnapshotIntervalRecords = 3 })
	cl.host(0, 0, 1, 2, 3)
	owner, replica := cl.nodes[0], cl.nodes[1]
	for i := range 10 {
		res, err := owner.AlterScramCredentials(ctx, []diskless.ScramChange{{User: fmt.Sprintf("u%d", i), Credential: testScram(diskless.ScramSHA512, byte(i))}})
		if err != nil || res[0] != nil {
			t.Fatalf("alter: %v %v", res, err)
		}
	}
	want := testScram(diskless.ScramSHA512, 9)
	waitFor(t, replica, "the replica's credential", func() bool {
		c, ok := replica.ScramCredential("u9", diskless.ScramSHA512)
		return ok && reflect.DeepEqual(c, want)
	})
	if _, err := replica.AlterScramCredentials(ctx, []diskless.ScramChange{{User: "x", Credential: testScram(diskless.ScramSHA256, 1)}}); !errors.Is(err, diskless.ErrNotCoordinator) {
		t.Fatalf("alter on a replica: %v, want ErrNotCoordinator", err)
	}
	fresh := newClusterOn(t, cl, 3)
	if c, ok := fresh.ScramCredential("u0", diskless.ScramSHA512); !ok || !reflect.DeepEqual(c, testScram(diskless.ScramSHA512, 0)) {
		t.Fatalf("a replica opened after snapshots: %+v %v", c, ok)
	}
	if n := len(fresh.ScramUsers()); n != 10 {
		t.Fatalf("the fresh replica lists %d users, want 10", n)
	}
}
