package coordinator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/group"
)

// commitCode commits one offset of a simple group and returns the
// partition's code.
func (e *env) commitCode(groupID, topic string, partition int32, offset int64) int16 {
	e.t.Helper()
	resp, err := e.c.CommitOffsets(context.Background(), simpleCommit(groupID, topic, partition, offset))
	if err != nil {
		e.t.Fatalf("CommitOffsets(%s): %v", groupID, err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// fetchOffset returns a group's committed offset of a partition as
// OffsetFetch answers it (−1: none).
func (e *env) fetchOffset(groupID, topic string, partition int32) int64 {
	e.t.Helper()
	got, err := e.c.FetchOffsets(context.Background(), group.FetchRequest{Group: groupID, MemberEpoch: -1,
		Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: topic, Partitions: []int32{partition}}}}, false)
	if err != nil {
		e.t.Fatalf("FetchOffsets(%s): %v", groupID, err)
	}
	return got.Topics[0].Partitions[0].Offset
}

// recordKey is the key of a record body (frame version, key, … as
// uvarints).
func recordKey(body []byte) uint32 {
	r := kbin.Reader{Src: body}
	r.Uvarint()
	return r.Uvarint()
}

// TestDeleteTopicRemovesGroupOffsets: deleting a topic removes every
// consumer group's offsets of it on every shard, with one record 113 per
// shard holding any, and keeps the other topics' offsets; commits of the
// deleted topic are refused; the state survives a restart (snapshot then
// replay equals replay); a topic re-created under the name holds none of
// the old offsets.
func TestDeleteTopicRemovesGroupOffsets(t *testing.T) {
	const groups = 400
	var (
		mu   sync.Mutex
		logs = map[int32]*testLog{}
	)
	e := newEnv(t, 4, func(c *Config) { c.SnapshotIntervalRecords = 97 })
	full := newEnv(t, 4, func(c *Config) { c.SnapshotIntervalRecords = -1 }, withTestLogs(logs, &mu))
	for _, env := range []*env{e, full} {
		tt := env.createTopic("t", 8, nil)
		env.createTopic("u", 2, nil)
		for i := range groups {
			g := fmt.Sprintf("g-%03d", i)
			if i%4 != 3 {
				env.commitOffsets(simpleCommit(g, "t", int32(i%8), int64(i)))
			}
			if i%2 == 0 {
				env.commitOffsets(simpleCommit(g, "u", int32(i%2), int64(i)))
			}
		}
		if _, err := env.c.DeleteTopic(context.Background(), tt.ID); err != nil {
			t.Fatal(err)
		}
		offsets := env.c.GroupOffsets()
		for g, topics := range offsets {
			if _, ok := topics["t"]; ok {
				t.Fatalf("%s still holds offsets of the deleted topic", g)
			}
		}
		// Groups that held u: i even; those with only t are gone.
		if len(offsets) != groups/2 {
			t.Fatalf("%d groups hold offsets, want %d", len(offsets), groups/2)
		}
		if v := offsets["g-002"]["u"][0]; v.Offset != 2 {
			t.Fatalf("g-002 u-0 = %+v", v)
		}
		if code := env.commitCode("g-001", "t", 1, 5); code != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("commit of the deleted topic: %v", kerr.ErrorForCode(code))
		}
	}
	// One record 113 per shard, on every shard (the 300 groups holding
	// offsets of t hash to all four).
	for shard, l := range logs {
		n := 0
		if _, err := l.inner.Replay(context.Background(), 0, func(_ int64, body []byte) error {
			if recordKey(body) == uint32(group.KeyTopicOffsetsDeleted) {
				n++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Fatalf("shard %d wrote %d records 113, want 1", shard, n)
		}
	}
	before := e.c.GroupOffsets()
	e.reopen()
	full.reopen()
	if after := e.c.GroupOffsets(); !maps.EqualFunc(before, after, func(a, b map[string]map[int32]group.OffsetAndMetadata) bool { return reflect.DeepEqual(a, b) }) {
		t.Fatalf("offsets after restart differ: %d groups before, %d after", len(before), len(after))
	}
	if !reflect.DeepEqual(e.c.GroupOffsets(), full.c.GroupOffsets()) {
		t.Fatal("snapshot-then-replay != replay")
	}
	for i := range e.c.shards {
		if !reflect.DeepEqual(e.c.shards[i].mu.st.groups.AppendSnapshot(nil), full.c.shards[i].mu.st.groups.AppendSnapshot(nil)) {
			t.Fatalf("shard %d: the offsets tables encode differently", i)
		}
	}
	// Re-created: no group holds an offset of it; commits go on.
	e.createTopic("t", 8, nil)
	if o := e.fetchOffset("g-000", "t", 0); o != -1 {
		t.Fatalf("the re-created topic inherited offset %d", o)
	}
	if code := e.commitCode("g-000", "t", 0, 7); code != 0 {
		t.Fatalf("commit of the re-created topic: %v", kerr.ErrorForCode(code))
	}
	if o := e.fetchOffset("g-000", "t", 0); o != 7 {
		t.Fatalf("offset %d after committing 7", o)
	}
}

// TestDeletedTopicOffsetsLeftOver: when a deleted topic's record 113
// cannot be written, the purge pass removes the offsets left; and a
// topic created under the name of one whose offsets are still held
// removes them first.
func TestDeletedTopicOffsetsLeftOver(t *testing.T) {
	var (
		mu   sync.Mutex
		logs = map[int32]*testLog{}
	)
	e := newEnv(t, 2, withTestLogs(logs, &mu))
	refuse113 := func(bodies [][]byte) (bool, error) {
		for _, b := range bodies {
			if recordKey(b) == uint32(group.KeyTopicOffsetsDeleted) {
				return false, errors.New("injected append failure")
			}
		}
		return false, nil
	}
	for _, name := range []string{"a", "b"} {
		tp := e.createTopic(name, 4, nil)
		for i := range 20 {
			e.commitOffsets(simpleCommit(fmt.Sprintf("g-%d", i), name, int32(i%4), int64(i)))
		}
		mu.Lock()
		for _, l := range logs {
			l.setFail(refuse113)
		}
		mu.Unlock()
		if _, err := e.c.DeleteTopic(context.Background(), tp.ID); err != nil {
			t.Fatalf("DeleteTopic(%s): %v", name, err)
		}
		mu.Lock()
		for _, l := range logs {
			l.setFail(nil)
		}
		mu.Unlock()
		if !e.c.shards[0].holdsTopicOffsets(name) && !e.c.shards[1].holdsTopicOffsets(name) {
			t.Fatalf("%s: the injected failure left no offset: the test tests nothing", name)
		}
	}
	// The purge pass removes a's and b's.
	if err := e.c.runPurge(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, s := range e.c.shards {
		if s.holdsTopicOffsets("a") || s.holdsTopicOffsets("b") {
			t.Fatalf("shard %d holds offsets of a deleted topic after the purge pass", s.id)
		}
	}
	// Left over again (as after a crash before any purge pass), then
	// created anew under the name: the new topic holds none of them.
	tp := e.createTopic("c", 4, nil)
	e.commitOffsets(simpleCommit("g-0", "c", 0, 42))
	mu.Lock()
	for _, l := range logs {
		l.setFail(refuse113)
	}
	mu.Unlock()
	if _, err := e.c.DeleteTopic(context.Background(), tp.ID); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	for _, l := range logs {
		l.setFail(nil)
	}
	mu.Unlock()
	e.reopen()
	e.createTopic("c", 4, nil)
	if o := e.fetchOffset("g-0", "c", 0); o != -1 {
		t.Fatalf("the re-created topic inherited offset %d", o)
	}
}
