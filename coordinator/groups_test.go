package coordinator

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/group"
)

// simpleCommit is an OffsetCommit of a group without members (generation
// −1), one partition per topic.
func simpleCommit(groupID string, topic string, partition int32, offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group = groupID
	req.Generation = -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = partition, offset, 3
	meta := "m-" + groupID
	rp.Metadata = &meta
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func (e *env) commitOffsets(req *kmsg.OffsetCommitRequest) {
	e.t.Helper()
	resp, err := e.c.CommitOffsets(context.Background(), req)
	if err != nil {
		e.t.Errorf("CommitOffsets(%s): %v", req.Group, err)
		return
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				e.t.Errorf("CommitOffsets(%s) %s/%d: %v", req.Group, t.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
		}
	}
}

// TestGroupOffsetsSurviveRestart commits the offsets of 10,000 groups over
// four shards with snapshots every 3,000 records, deletes some, and
// checks that the table after a restart (snapshot then replay) equals the
// one before, and the one a replay of the whole log gives (no snapshots).
func TestGroupOffsetsSurviveRestart(t *testing.T) {
	const groups = 10_000
	e := newEnv(t, 4, func(c *Config) { c.SnapshotIntervalRecords = 3000 })
	full := newEnv(t, 4, func(c *Config) { c.SnapshotIntervalRecords = -1 })
	e.createTopic("t", 8, nil)
	full.createTopic("t", 8, nil)
	for _, env := range []*env{e, full} {
		// 64 committers at once, so commits share fsyncs (group commit).
		var wg sync.WaitGroup
		for w := range 64 {
			wg.Go(func() {
				for i := w; i < groups; i += 64 {
					g := fmt.Sprintf("g-%05d", i)
					env.commitOffsets(simpleCommit(g, "t", int32(i%8), int64(i)))
					if i%3 == 0 { // a second commit of the same partition replaces the first
						env.commitOffsets(simpleCommit(g, "t", int32(i%8), int64(i)+100))
					}
				}
			})
		}
		wg.Wait()
		del := make([]string, 0, groups/10)
		for i := 0; i < groups; i += 10 {
			del = append(del, fmt.Sprintf("g-%05d", i))
		}
		res := env.c.DeleteGroups(context.Background(), del, func(error) int16 { return -1 })
		for _, r := range res {
			if r.ErrorCode != 0 {
				t.Fatalf("DeleteGroups(%s): %v", r.Group, kerr.ErrorForCode(r.ErrorCode))
			}
		}
	}
	before := e.c.GroupOffsets()
	if len(before) != groups-groups/10 {
		t.Fatalf("%d groups hold offsets, want %d", len(before), groups-groups/10)
	}
	if v := before["g-00003"]["t"][3]; v.Offset != 103 || v.LeaderEpoch != 3 || v.Metadata != "m-g-00003" {
		t.Fatalf("g-00003 t/3 = %+v, want offset 103 epoch 3", v)
	}
	snapshots := 0
	e.reopen()
	full.reopen()
	for _, s := range e.c.shards {
		idx, data, err := s.log.ReadSnapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if data != nil && idx > 0 {
			snapshots++
		}
	}
	if snapshots == 0 {
		t.Fatal("no shard took a snapshot: the test does not exercise snapshot-then-replay")
	}
	after := e.c.GroupOffsets()
	if !maps.EqualFunc(before, after, func(a, b map[string]map[int32]group.OffsetAndMetadata) bool { return reflect.DeepEqual(a, b) }) {
		t.Fatalf("offsets after restart differ: %d groups before, %d after", len(before), len(after))
	}
	replayed := full.c.GroupOffsets()
	// Commit timestamps come from each env's clock, which is the same
	// fixed time in both.
	if !reflect.DeepEqual(after, replayed) {
		t.Fatalf("snapshot-then-replay (%d groups) != replay (%d groups)", len(after), len(replayed))
	}
	// The snapshot bytes of the tables are equal too.
	for i := range e.c.shards {
		a := e.c.shards[i].mu.st.groups.AppendSnapshot(nil)
		b := full.c.shards[i].mu.st.groups.AppendSnapshot(nil)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("shard %d: the offsets tables encode differently", i)
		}
	}
	// Fetch through the group coordinator after the restart.
	got, err := e.c.FetchOffsets(context.Background(), group.FetchRequest{Group: "g-00003", MemberEpoch: -1,
		Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{3}}}}, false)
	if err != nil || got.Topics[0].Partitions[0].Offset != 103 {
		t.Fatalf("FetchOffsets after restart = %+v, %v; want offset 103", got, err)
	}
	if !e.c.HasGroups() {
		t.Fatal("HasGroups = false with 9000 groups")
	}
}

// TestHasGroupsNotFromTheGuard: a transaction ended on a group's shard
// with no offsets of it there leaves only the offsets' guard (record 110
// with its token and time), which is not offsets: HasGroups stays false.
func TestHasGroupsNotFromTheGuard(t *testing.T) {
	e := newEnv(t, 2)
	ctx := context.Background()
	if err := e.c.EndTxnOffsets(ctx, e.c.GroupShard("g"), "g", 7, 0, 3, false); err != nil {
		t.Fatal(err)
	}
	st := e.c.shards[e.c.GroupShard("g")].mu.st.groups
	if st.Empty() {
		t.Fatal("the guard of producer 7 not kept: the test shows nothing")
	}
	if e.c.HasGroups() {
		t.Fatal("HasGroups = true with only the offsets' guard on the shard")
	}
}

// TestGroupDeleteRefusesMembers checks DeleteGroups' NON_EMPTY_GROUP and
// GROUP_ID_NOT_FOUND through the shard, and that a classic member's
// JoinGroup is answered (delayed first rebalance).
func TestGroupDeleteRefusesMembers(t *testing.T) {
	e := newEnv(t, 2, func(c *Config) {
		c.Now = time.Now
		c.Groups.InitialRebalanceDelay = time.Millisecond
	})
	e.createTopic("t", 2, nil)
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 9
	join.Group, join.MemberID = "g", ""
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 10_000, 10_000
	join.ProtocolType = "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := e.c.JoinGroup(ctx, join, "client", "/127.0.0.1")
	if err != nil || resp.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("JoinGroup = %+v, %v; want MEMBER_ID_REQUIRED", resp, err)
	}
	join.MemberID = resp.MemberID
	resp, err = e.c.JoinGroup(ctx, join, "client", "/127.0.0.1")
	if err != nil || resp.ErrorCode != 0 || resp.Generation != 1 || resp.LeaderID != join.MemberID {
		t.Fatalf("JoinGroup = %+v, %v; want generation 1 led by the member", resp, err)
	}
	res := e.c.DeleteGroups(ctx, []string{"g", "nope"}, func(error) int16 { return -1 })
	if res[0].ErrorCode != kerr.NonEmptyGroup.Code || res[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("DeleteGroups = %+v; want NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND", res)
	}
}
