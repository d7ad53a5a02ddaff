package coordinator

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/group"
)

// TestGroupRequestsWhileLoading: while a shard rebuilds its state from its
// log after a failed append, every consumer-group request to it is refused
// at once with ErrShardLoading (COORDINATOR_LOAD_IN_PROGRESS) instead of
// waiting behind the replay, the other shard's groups are served, and once
// the shard has loaded its groups are served again from the rebuilt state.
func TestGroupRequestsWhileLoading(t *testing.T) {
	var (
		mu   sync.Mutex
		logs = map[int32]*testLog{}
	)
	e := newEnv(t, 2, withTestLogs(logs, &mu))
	e.createTopic("t", 2, nil)
	// g0 and g1 are groups of shard 0 and shard 1.
	var g0, g1 string
	for i := 0; g0 == "" || g1 == ""; i++ {
		g := string(rune('a'+i%26)) + string(rune('a'+i/26))
		if e.c.GroupShard(g) == 0 && g0 == "" {
			g0 = g
		} else if e.c.GroupShard(g) == 1 && g1 == "" {
			g1 = g
		}
	}
	e.commitOffsets(simpleCommit(g0, "t", 0, 5))

	gate := make(chan struct{})
	mu.Lock()
	l := logs[0]
	mu.Unlock()
	l.mu.Lock()
	l.replayGate = gate
	l.mu.Unlock()
	var once sync.Once
	l.setFail(func([][]byte) (bool, error) {
		err := error(nil)
		once.Do(func() { err = errors.New("injected append failure") })
		return false, err
	})
	failed := make(chan error, 1)
	go func() {
		_, err := e.c.CommitOffsets(context.Background(), simpleCommit(g0, "t", 0, 6))
		failed <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !e.c.shards[0].rebuilding.Load() {
		if time.Now().After(deadline) {
			t.Fatal("shard 0 never started loading after its append failed")
		}
		time.Sleep(time.Millisecond)
	}
	// Loading, the shard is live and ready (/healthz, /readyz): its
	// requests wait or are refused retriably meanwhile.
	if h := e.c.ShardHealth()[0]; h.State != ShardLoading || h.Err != nil {
		t.Fatalf("shard 0 rebuilding: %+v, want loading", h)
	}
	if err := e.c.Err(); err != nil {
		t.Fatalf("Err while shard 0 loads: %v, want nil", err)
	}
	if err := e.c.Unserved(); err != nil {
		t.Fatalf("Unserved while shard 0 loads: %v, want nil", err)
	}

	ctx := context.Background()
	loadingErr := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, diskless.ErrShardLoading) || !errors.Is(err, kerr.CoordinatorLoadInProgress) {
			t.Fatalf("%s while shard 0 loads: %v, want ErrShardLoading (COORDINATOR_LOAD_IN_PROGRESS)", what, err)
		}
	}
	_, err := e.c.CommitOffsets(ctx, simpleCommit(g0, "t", 1, 7))
	loadingErr("OffsetCommit", err)
	_, err = e.c.FetchOffsets(ctx, group.FetchRequest{Group: g0, MemberEpoch: -1}, false)
	loadingErr("OffsetFetch", err)
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = g0, "m", 1
	_, err = e.c.Heartbeat(ctx, hb)
	loadingErr("Heartbeat", err)
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 9, g0, 10_000, 10_000
	join.ProtocolType = "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0}}}
	_, err = e.c.JoinGroup(ctx, join, "c", "/h")
	loadingErr("JoinGroup", err)
	cgh := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	cgh.Group, cgh.MemberID, cgh.MemberEpoch = g0, "m", 0
	_, err = e.c.ConsumerGroupHeartbeat(ctx, cgh, "c", "/h")
	loadingErr("ConsumerGroupHeartbeat", err)
	if res := e.c.DeleteGroups(ctx, []string{g0, g1}, func(err error) int16 {
		if errors.Is(err, diskless.ErrShardLoading) {
			return kerr.CoordinatorLoadInProgress.Code
		}
		return -1
	}); res[0].ErrorCode != kerr.CoordinatorLoadInProgress.Code || res[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("DeleteGroups of a loading and a loaded shard's groups: %+v", res)
	}
	// Shard 1 serves meanwhile.
	e.commitOffsets(simpleCommit(g1, "t", 0, 9))

	close(gate)
	if err := <-failed; err == nil || errors.Is(err, diskless.ErrShardLoading) {
		t.Fatalf("the commit whose append failed: %v, want the append's error", err)
	}
	if e.c.shards[0].rebuilding.Load() {
		t.Fatal("shard 0 still loading after its replay returned")
	}
	if o := e.fetchOffset(g0, "t", 0); o != 5 {
		t.Fatalf("%s t-0 = %d after the rebuild, want 5 (the failed commit not written)", g0, o)
	}
	e.commitOffsets(simpleCommit(g0, "t", 1, 7))
	if o := e.fetchOffset(g0, "t", 1); o != 7 {
		t.Fatalf("%s t-1 = %d, want 7", g0, o)
	}
}
