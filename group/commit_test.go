package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestOffsetCommitRules(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := stableGroup(t, h, 1)
	for _, tc := range []struct {
		name       string
		version    int16
		group      string
		member     string
		generation int32
		want       *kerr.Error
	}{
		{"simple consumer, no group", 8, "simple", "", -1, nil},
		{"simple consumer again (Empty group)", 9, "simple", "", -1, nil},
		{"member of a group that only has offsets", 9, "simple", "m", 3, kerr.UnknownMemberID},
		{"unknown group v9", 9, "nope", "m", 1, kerr.GroupIDNotFound},
		{"unknown group v8", 8, "nope", "m", 1, kerr.IllegalGeneration},
		{"member", 9, "g", ids[0], gen, nil},
		{"stale generation", 9, "g", ids[0], gen - 1, kerr.IllegalGeneration},
		{"unknown member", 9, "g", "x", gen, kerr.UnknownMemberID},
		{"simple commit to a group with members", 9, "g", "", -1, kerr.UnknownMemberID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantCode(t, tc.name, h.commit(tc.version, tc.group, tc.member, tc.generation, 42), tc.want)
		})
	}
	// Fenced static instance.
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation, req.InstanceID = 9, "g", ids[0], gen, strp("i")
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0}}}}
	resp, rec := h.c.CommitOffsets(h.now, req)
	wantCode(t, "unknown instance", resp.Topics[0].Partitions[0].ErrorCode, kerr.UnknownMemberID)
	if rec != nil {
		t.Fatal("record for a refused commit")
	}
	// Metadata too large: that partition only.
	req.InstanceID = nil
	big := string(make([]byte, DefaultOffsetMetadataMaxBytes+1))
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: 1, Metadata: &big})
	resp, rec = h.c.CommitOffsets(h.now, req)
	wantCode(t, "partition 0", resp.Topics[0].Partitions[0].ErrorCode, nil)
	wantCode(t, "partition 1", resp.Topics[0].Partitions[1].ErrorCode, kerr.OffsetMetadataTooLarge)
	if len(rec.Topics[0].Partitions) != 1 {
		t.Fatalf("record holds %d partitions", len(rec.Topics[0].Partitions))
	}
	FailCommit(resp, kerr.NotCoordinator.Code)
	wantCode(t, "failed write", resp.Topics[0].Partitions[0].ErrorCode, kerr.NotCoordinator)
	wantCode(t, "failed write keeps other errors", resp.Topics[0].Partitions[1].ErrorCode, kerr.OffsetMetadataTooLarge)
}

func TestOffsetFetch(t *testing.T) {
	h := newHarness(t, Config{})
	h.commit(9, "g", "", -1, 7)
	h.apply(&OffsetCommitRecord{Group: "g", ProducerID: 5, Topics: []CommitTopic{{Name: "t", Partitions: []CommitPartition{{Partition: 1, Offset: 9}}}}})
	ask := FetchRequest{Group: "g", MemberEpoch: -1, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0, 1, 2}}}}
	got := h.c.FetchOffsets(ask, true)
	ps := got.Topics[0].Partitions
	if ps[0].Offset != 7 || ps[1].ErrorCode != kerr.UnstableOffsetCommit.Code || ps[2].Offset != -1 {
		t.Fatalf("fetch: %+v", ps)
	}
	got = h.c.FetchOffsets(ask, false)
	if got.Topics[0].Partitions[1].ErrorCode != 0 || got.Topics[0].Partitions[1].Offset != -1 {
		t.Fatalf("without require_stable: %+v", got.Topics[0].Partitions[1])
	}
	all := h.c.FetchOffsets(FetchRequest{Group: "g", MemberEpoch: -1}, false)
	if len(all.Topics) != 1 || len(all.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch all: %+v", all)
	}
	if none := h.c.FetchOffsets(FetchRequest{Group: "none", MemberEpoch: -1}, false); len(none.Topics) != 0 || none.ErrorCode != 0 {
		t.Fatalf("unknown group: %+v", none)
	}
}

func TestDeleteOffsetsAndGroups(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := stableGroup(t, h, 1)
	h.commit(9, "g", ids[0], gen, 3)
	h.commit(9, "simple", "", -1, 3)
	// The group consumes t: deleting its offsets is refused per partition.
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = "g"
	req.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	resp, rec := h.c.DeleteOffsets(req)
	wantCode(t, "subscribed topic", resp.Topics[0].Partitions[0].ErrorCode, kerr.GroupSubscribedToTopic)
	if rec != nil {
		t.Fatal("record for a refused delete")
	}
	req.Group = "nope"
	resp, _ = h.c.DeleteOffsets(req)
	wantCode(t, "unknown group", resp.ErrorCode, kerr.GroupIDNotFound)
	req.Group = "simple"
	resp, rec = h.c.DeleteOffsets(req)
	wantCode(t, "simple group", resp.Topics[0].Partitions[0].ErrorCode, nil)
	h.apply(rec)
	if h.c.Offsets().HasGroup("simple") {
		t.Fatal("offsets left")
	}
	h.commit(9, "simple", "", -1, 3)
	out, recs := h.c.DeleteGroups([]string{"g", "simple", "nope"})
	wantCode(t, "non-empty", out[0].ErrorCode, kerr.NonEmptyGroup)
	wantCode(t, "simple", out[1].ErrorCode, nil)
	wantCode(t, "unknown", out[2].ErrorCode, kerr.GroupIDNotFound)
	for _, r := range recs {
		h.apply(r)
	}
	if h.c.exists("simple") {
		t.Fatal("deleted group still exists")
	}
}

func TestListAndDescribeGroups(t *testing.T) {
	h := newHarness(t, Config{})
	ids, _ := stableGroup(t, h, 1)
	h.commit(9, "simple", "", -1, 1)
	h.consumerJoin("cg", "", nil, []string{"t"})
	list := func(states, types []string) []string {
		req := kmsg.NewPtrListGroupsRequest()
		req.StatesFilter, req.TypesFilter = states, types
		var out []string
		for _, g := range h.c.ListGroups(req) {
			out = append(out, g.Group+"/"+g.GroupState+"/"+g.GroupType)
		}
		return out
	}
	for _, tc := range []struct {
		states, types []string
		want          string
	}{
		{nil, nil, "[cg/Stable/consumer g/Stable/classic simple/Empty/classic]"},
		{[]string{"stable"}, nil, "[cg/Stable/consumer g/Stable/classic]"},
		{[]string{"reconciling", "dead"}, nil, "[]"},
		{[]string{"EMPTY"}, nil, "[simple/Empty/classic]"},
		{nil, []string{"consumer"}, "[cg/Stable/consumer]"},
		{nil, []string{"Classic"}, "[g/Stable/classic simple/Empty/classic]"},
		{nil, []string{"share"}, "[]"},
	} {
		if got := fmtList(list(tc.states, tc.types)); got != tc.want {
			t.Errorf("states %v types %v: %s, want %s", tc.states, tc.types, got, tc.want)
		}
	}
	d := h.c.DescribeGroups(6, []string{"g", "simple", "nope", "cg"})
	if d[0].State != "Stable" || d[0].Protocol != "range" || len(d[0].Members) != 1 || d[0].Members[0].MemberID != ids[0] || string(d[0].Members[0].MemberAssignment) != "a-"+ids[0] {
		t.Fatalf("describe g: %+v", d[0])
	}
	if d[1].State != "Empty" || d[1].ErrorCode != 0 {
		t.Fatalf("describe simple: %+v", d[1])
	}
	wantCode(t, "describe unknown", d[2].ErrorCode, kerr.GroupIDNotFound)
	wantCode(t, "describe consumer group", d[3].ErrorCode, kerr.GroupIDNotFound)
	if d := h.c.DescribeGroups(5, []string{"nope"}); d[0].ErrorCode != 0 || d[0].State != "Dead" {
		t.Fatalf("v5 unknown: %+v", d[0])
	}
}

func fmtList(s []string) string {
	out := "["
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out + "]"
}

// TestOffsetExpiry: KIP-211 — an empty group's offsets expire a retention
// after it became empty, never while it has members; a simple group's by
// commit time; offsets with a v2–v4 retention at their own time.
func TestOffsetExpiry(t *testing.T) {
	const retention = time.Hour
	h := newHarness(t, Config{OffsetsRetention: retention})
	ids, gen := stableGroup(t, h, 1)
	h.commit(9, "g", ids[0], gen, 1)
	h.commit(9, "simple", "", -1, 1)
	// Keep the member alive for two retentions.
	for range 2 * 720 {
		h.advance(5 * time.Second)
		wantCode(t, "heartbeat", h.heartbeat("g", ids[0], gen), nil)
	}
	recs := h.c.ExpireOffsets(h.now)
	if len(recs) != 1 || recs[0].(*GroupDeletedRecord).Group != "simple" {
		for _, r := range recs {
			t.Logf("%T %+v", r, r)
		}
		t.Fatalf("expired %+v", recs)
	}
	h.apply(recs[0])
	// The member leaves: the group is Empty from now.
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version, req.Group, req.MemberID = 1, "g", ids[0]
	h.c.LeaveGroup(h.now, req)
	h.advance(retention - time.Minute)
	if recs := h.c.ExpireOffsets(h.now); len(recs) != 0 {
		t.Fatalf("expired early: %+v", recs)
	}
	h.advance(time.Minute)
	recs = h.c.ExpireOffsets(h.now)
	if len(recs) != 1 || recs[0].(*GroupDeletedRecord).Group != "g" {
		t.Fatalf("expired %+v", recs)
	}
	h.apply(recs[0])
	// v2 commit with a 1-minute retention.
	creq := kmsg.NewPtrOffsetCommitRequest()
	creq.Version, creq.Group, creq.Generation, creq.RetentionTimeMillis = 2, "v2", -1, 60_000
	creq.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	_, rec := h.c.CommitOffsets(h.now, creq)
	h.apply(rec)
	h.advance(time.Minute)
	if recs := h.c.ExpireOffsets(h.now); len(recs) != 1 {
		t.Fatalf("v2 retention: %+v", recs)
	}
}

// TestOffsetsOfUnknownGroupsAfterRestart: after a restart (a Coordinator
// over a replayed table) a group's retention counts from the opening at
// the earliest, so a restart never expires offsets sooner.
func TestOffsetsOfUnknownGroupsAfterRestart(t *testing.T) {
	o := NewOffsets()
	o.Apply(&OffsetCommitRecord{Group: "g", CommitTimestamp: epoch0.UnixMilli(), ProducerID: -1, Topics: []CommitTopic{{Name: "t", Partitions: []CommitPartition{{Offset: 1, ExpireTimestamp: -1}}}}})
	opened := epoch0.Add(50 * time.Minute)
	c, err := New(Config{OffsetsRetention: time.Hour}, Deps{Topics: newFakeTopics(nil)}, o, opened)
	if err != nil {
		t.Fatal(err)
	}
	if recs := c.ExpireOffsets(epoch0.Add(time.Hour + time.Minute)); len(recs) != 0 {
		t.Fatalf("expired an hour after the commit although opened 50 minutes in: %+v", recs)
	}
	if recs := c.ExpireOffsets(opened.Add(time.Hour)); len(recs) != 1 {
		t.Fatalf("not expired a retention after opening: %+v", recs)
	}
}

func TestTxnOffsetCommitSeam(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := stableGroup(t, h, 1)
	mk := func(member string, generation int32) *kmsg.TxnOffsetCommitRequest {
		r := kmsg.NewPtrTxnOffsetCommitRequest()
		r.Version, r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch = 4, "tx", "g", 9, 1
		r.MemberID, r.Generation = member, generation
		r.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 77, LeaderEpoch: -1}}}}
		return r
	}
	for _, tc := range []struct {
		name       string
		member     string
		generation int32
		want       *kerr.Error
	}{
		{"anonymous (before v3)", "", -1, nil},
		{"member", ids[0], gen, nil},
		{"stale generation", ids[0], gen + 1, kerr.IllegalGeneration},
		{"unknown member", "x", gen, kerr.UnknownMemberID},
	} {
		resp, rec := h.c.CommitTxnOffsets(h.now, mk(tc.member, tc.generation), 0)
		wantCode(t, tc.name, resp.Topics[0].Partitions[0].ErrorCode, tc.want)
		if (rec != nil) != (tc.want == nil) {
			t.Fatalf("%s: record %v", tc.name, rec)
		}
	}
	_, rec := h.c.CommitTxnOffsets(h.now, mk(ids[0], gen), 0)
	h.apply(rec)
	got := h.c.FetchOffsets(FetchRequest{Group: "g", MemberEpoch: -1, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}}, true)
	wantCode(t, "pending offset", got.Topics[0].Partitions[0].ErrorCode, kerr.UnstableOffsetCommit)
	h.apply(&TxnOffsetsEndedRecord{ProducerID: 9, ProducerEpoch: 1, Committed: true})
	got = h.c.FetchOffsets(FetchRequest{Group: "g", MemberEpoch: -1, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}}, true)
	if p := got.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != 77 {
		t.Fatalf("after commit marker: %+v", p)
	}
}
