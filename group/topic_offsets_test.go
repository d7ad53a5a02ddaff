package group

import (
	"bytes"
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// checkIndex holds the table's index by topic equal to the one its
// committed and pending offsets give.
func checkIndex(t *testing.T, o *Offsets) {
	t.Helper()
	want := map[string]map[string]int{}
	add := func(topic, group string, k int) {
		if want[topic] == nil {
			want[topic] = map[string]int{}
		}
		want[topic][group] += k
	}
	for g, topics := range o.groups {
		for tp, parts := range topics {
			add(tp, g, len(parts))
		}
	}
	for g, tps := range o.open {
		for tp, k := range tps {
			add(tp.topic, g, k)
		}
	}
	if !maps.EqualFunc(want, o.byTopic, maps.Equal) {
		t.Fatalf("index by topic %v, want %v", o.byTopic, want)
	}
}

func commitRec(group, topic string, producer int64, partitions ...int32) *OffsetCommitRecord {
	ct := CommitTopic{Name: topic}
	for _, p := range partitions {
		ct.Partitions = append(ct.Partitions, CommitPartition{Partition: p, Offset: int64(p) + 10, LeaderEpoch: -1, ExpireTimestamp: -1})
	}
	return &OffsetCommitRecord{Group: group, ProducerID: producer, ProducerEpoch: 0, Topics: []CommitTopic{ct}}
}

// TestTopicOffsetsDeleted: record 113 removes every group's offsets of
// the topic, committed and pending, and nothing else; a group holding
// only those is gone from the table; the table encodes as one that never
// held them.
func TestTopicOffsetsDeleted(t *testing.T) {
	o := NewOffsets()
	without := NewOffsets() // the same commits, the topic's left out
	for _, rec := range []*OffsetCommitRecord{
		commitRec("a", "t", -1, 0, 1, 2),
		commitRec("a", "u", -1, 0),
		commitRec("b", "t", -1, 5),
		commitRec("c", "u", -1, 3),
		commitRec("d", "t", 7, 1),    // pending only
		commitRec("c", "t", 7, 0),    // pending beside committed offsets of u
		commitRec("e", "tt", -1, 0),  // a topic whose name starts the same
		commitRec("a", "t", 8, 2, 9), // pending over committed
	} {
		o.Apply(rec)
		if rec.Topics[0].Name != "t" {
			without.Apply(rec)
		}
	}
	checkIndex(t, o)
	if !o.HasTopic("t") || !slices.Equal(o.GroupsOfTopic("t"), []string{"a", "b", "c", "d"}) {
		t.Fatalf("groups of t: %v", o.GroupsOfTopic("t"))
	}
	o.Apply(&TopicOffsetsDeletedRecord{TopicName: "t", TopicID: topicID("t")})
	checkIndex(t, o)
	if o.HasTopic("t") || len(o.GroupsOfTopic("t")) != 0 {
		t.Fatalf("offsets of t left in %v", o.GroupsOfTopic("t"))
	}
	for _, g := range []string{"a", "b", "c", "d"} {
		for _, p := range []int32{0, 1, 2, 5, 9} {
			if _, ok := o.Get(g, "t", p); ok || o.HasPending(g, "t", p) {
				t.Fatalf("%s t-%d still held", g, p)
			}
		}
	}
	if !slices.Equal(o.Groups(), []string{"a", "c", "e"}) || !slices.Equal(o.TopicNames(), []string{"tt", "u"}) {
		t.Fatalf("groups %v, topics %v", o.Groups(), o.TopicNames())
	}
	if v, ok := o.Get("a", "u", 0); !ok || v.Offset != 10 {
		t.Fatalf("a u-0 = %+v, %v", v, ok)
	}
	if !bytes.Equal(o.AppendSnapshot(nil), without.AppendSnapshot(nil)) {
		t.Fatal("the table after record 113 encodes unlike one that never held the topic")
	}
	// A topic nothing holds: nothing changes.
	before := o.AppendSnapshot(nil)
	o.Apply(&TopicOffsetsDeletedRecord{TopicName: "nope"})
	if !bytes.Equal(o.AppendSnapshot(nil), before) {
		t.Fatal("record 113 of a topic nothing holds changed the table")
	}
	// Ending the transactions afterwards commits nothing of t.
	o.Apply(&TxnOffsetsEndedRecord{ProducerID: 7, Committed: true})
	o.Apply(&TxnOffsetsEndedRecord{ProducerID: 8, Committed: true})
	if o.HasTopic("t") {
		t.Fatal("a transaction ended after record 113 committed offsets of t")
	}
	checkIndex(t, o)
	// The index survives a snapshot.
	d, _, err := DecodeSnapshot(o.AppendSnapshot(nil))
	if err != nil {
		t.Fatal(err)
	}
	checkIndex(t, d)
}

// TestDeleteTopicOffsetsKeepsGroupListed: a simple group left with no
// offset by record 113 is still listed and described as Empty until the
// next expiry check forgets it, as Kafka 4.4 keeps it until its next
// cleanup (SPEC §6); a group with members keeps them.
func TestDeleteTopicOffsetsKeepsGroupListed(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := stableGroup(t, h, 1)
	wantCode(t, "member commit", h.commit(9, "g", ids[0], gen, 1), nil)
	wantCode(t, "simple commit", h.commit(9, "simple", "", -1, 1), nil)
	if rec := h.c.DeleteTopicOffsets("u", topicID("u")); rec != nil {
		t.Fatalf("record for a topic no group holds: %+v", rec)
	}
	rec := h.c.DeleteTopicOffsets("t", topicID("t"))
	if rec == nil {
		t.Fatal("no record for a topic two groups hold")
	}
	h.apply(rec)
	if h.c.Offsets().HasGroup("g") || h.c.Offsets().HasGroup("simple") {
		t.Fatal("offsets of t left")
	}
	listed := map[string]string{}
	for _, g := range h.c.ListGroups(kmsg.NewPtrListGroupsRequest()) {
		listed[g.Group] = g.GroupState
	}
	if listed["simple"] != "Empty" || listed["g"] != "Stable" {
		t.Fatalf("listed %v; want simple Empty and g Stable", listed)
	}
	d := h.c.DescribeGroups(6, []string{"simple"})
	if d[0].ErrorCode != 0 || d[0].State != "Empty" {
		t.Fatalf("described %+v", d[0])
	}
	wantCode(t, "heartbeat", h.heartbeat("g", ids[0], gen), nil)
	if recs := h.c.ExpireOffsets(h.now); len(recs) != 0 {
		t.Fatalf("expiry wrote %+v", recs)
	}
	listed = map[string]string{}
	for _, g := range h.c.ListGroups(kmsg.NewPtrListGroupsRequest()) {
		listed[g.Group] = g.GroupState
	}
	if _, ok := listed["simple"]; ok || listed["g"] != "Stable" {
		t.Fatalf("after the expiry check: %v; want only g", listed)
	}
}

// TestCommitUnknownTopic: partitions of a topic or partition the catalog
// does not hold get UNKNOWN_TOPIC_OR_PARTITION and no offset, whatever
// the group's answer for the others (Kafka 4.4, SPEC §6).
func TestCommitUnknownTopic(t *testing.T) {
	h := newHarness(t, Config{})
	commit := func(group string, generation int32, topics map[string][]int32, order ...string) (*kmsg.OffsetCommitResponse, *OffsetCommitRecord) {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 9, group, generation
		for _, tp := range order {
			rt := kmsg.OffsetCommitRequestTopic{Topic: tp}
			for _, p := range topics[tp] {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: p, Offset: 5, LeaderEpoch: -1})
			}
			req.Topics = append(req.Topics, rt)
		}
		return h.c.CommitOffsets(h.now, req)
	}
	codes := func(resp *kmsg.OffsetCommitResponse) map[string][]int16 {
		out := map[string][]int16{}
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				out[rt.Topic] = append(out[rt.Topic], p.ErrorCode)
			}
		}
		return out
	}
	unknown := kerr.UnknownTopicOrPartition.Code
	resp, rec := commit("s", -1, map[string][]int32{"nope": {0}, "t": {0, 8, 7}, "u": {3}}, "nope", "t", "u")
	if got := codes(resp); !maps.EqualFunc(got, map[string][]int16{"nope": {unknown}, "t": {0, unknown, 0}, "u": {0}}, slices.Equal) {
		t.Fatalf("codes %v", got)
	}
	if resp.Topics[0].Topic != "nope" || resp.Topics[1].Topic != "t" || resp.Topics[1].Partitions[1].Partition != 8 {
		t.Fatalf("answer not in request order: %+v", resp.Topics)
	}
	h.apply(rec)
	if h.c.Offsets().HasTopic("nope") || !h.c.Offsets().HasTopic("t") {
		t.Fatalf("topics held: %v", h.c.Offsets().TopicNames())
	}
	if _, ok := h.c.Offsets().Get("s", "t", 8); ok {
		t.Fatal("offset of partition 8 of an 8-partition topic held")
	}
	// Only unknown partitions: no record, the group is not created.
	resp, rec = commit("s2", -1, map[string][]int32{"nope": {0, 1}}, "nope")
	if rec != nil || !slices.Equal(codes(resp)["nope"], []int16{unknown, unknown}) || h.c.exists("s2") {
		t.Fatalf("unknown only: %v, record %v", codes(resp), rec)
	}
	// The group refuses the known partitions; the unknown keep theirs.
	resp, rec = commit("nogroup", 3, map[string][]int32{"nope": {0}, "t": {0}}, "t", "nope")
	if rec != nil || !maps.EqualFunc(codes(resp), map[string][]int16{"t": {kerr.GroupIDNotFound.Code}, "nope": {unknown}}, slices.Equal) {
		t.Fatalf("refused group: %v, record %v", codes(resp), rec)
	}
}
