package group

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkClassicRebalance: 1,000 classic members join a group (v9:
// MEMBER_ID_REQUIRED, then the join), the initial rebalance completes, the
// leader syncs an assignment for all and every follower syncs: one whole
// rebalance of the large group, per op.
func BenchmarkClassicRebalance(b *testing.B) {
	const members = 1000
	b.ReportAllocs()
	for b.Loop() {
		h := newHarness(b, Config{})
		ids := make([]string, members)
		joins := make([]*joinResult, members)
		for i := range members {
			ids[i], joins[i] = h.joinNew("g")
		}
		h.advance(DefaultInitialRebalanceDelay) // extended once: members came in the first delay
		h.advance(DefaultInitialRebalanceDelay)
		gen := joins[0].resp.Generation
		leader := joins[0].resp.LeaderID
		assign := make(map[string]string, members)
		for _, id := range ids {
			assign[id] = "assignment"
		}
		for _, id := range ids {
			if id != leader {
				h.sync("g", id, gen, nil)
			}
		}
		if s := h.sync("g", leader, gen, assign); s.resp == nil || s.resp.ErrorCode != 0 {
			b.Fatalf("leader sync: %+v", s.resp)
		}
	}
}

// BenchmarkConsumerGroupJoin: 1,000 KIP-848 members join a group
// subscribed to 10 topics of 1,000 partitions (10,000 partitions) at one
// moment, then every member heartbeats until the group is Stable — per
// op. interval=default: assignor runs batched by
// group.consumer.assignment.interval.ms (the first join's at once, the
// other 999 in one run a second later); interval=none (-1): a run per
// join, as before batching (O(members² + members × partitions)).
func BenchmarkConsumerGroupJoin(b *testing.B) {
	const members = 1000
	for _, iv := range []struct {
		name     string
		interval time.Duration
	}{{"interval=default", 0}, {"interval=none", -1}} {
		b.Run(iv.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h := newHarness(b, Config{AssignmentInterval: iv.interval})
				var names []string
				for i := range 10 {
					n := fmt.Sprintf("t%d", i)
					h.topics.set(n, 1000)
					names = append(names, n)
				}
				ms := make([]*member, members)
				for i := range members {
					id := fmt.Sprintf("m%04d", i)
					r := h.cgh(cghReq("g", id, 0, nil, names, nil))
					ms[i] = &member{id: id, epoch: r.MemberEpoch, owns: owned(r, nil)}
				}
				h.advance(DefaultAssignmentInterval)
				for round := 0; h.c.consumer["g"].state() != cStateStable; round++ {
					if round > 5 {
						b.Fatalf("not stable after %d rounds", round)
					}
					for _, m := range ms {
						h.beat("g", m)
					}
				}
			}
		})
	}
}

// BenchmarkOffsetCommit: one OffsetCommit of a member of a Stable group
// for 10 partitions — validation, the record built, encoded, decoded and
// applied — the coordinator's CPU per commit, without the log write.
func BenchmarkOffsetCommit(b *testing.B) {
	h := newHarness(b, Config{})
	id, j := h.joinNew("g")
	h.advance(DefaultInitialRebalanceDelay)
	h.sync("g", id, j.resp.Generation, map[string]string{id: "x"})
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 9, "g", id, j.resp.Generation
	t := kmsg.OffsetCommitRequestTopic{Topic: "t"}
	for p := range int32(10) {
		t.Partitions = append(t.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: p, LeaderEpoch: -1})
	}
	req.Topics = []kmsg.OffsetCommitRequestTopic{t}
	var buf []byte
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for p := range req.Topics[0].Partitions {
			req.Topics[0].Partitions[p].Offset = int64(i)
		}
		resp, rec := h.c.CommitOffsets(h.now, req)
		if rec == nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			b.Fatal("commit refused")
		}
		buf = AppendRecord(buf[:0], rec)
		dec, err := DecodeRecord(buf)
		if err != nil {
			b.Fatal(err)
		}
		h.c.ApplyRecord(dec)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkClassicHeartbeat: one Heartbeat of a member of a 1,000-member
// Stable group (the session deadline moved in the timer heap).
func BenchmarkClassicHeartbeat(b *testing.B) {
	h := newHarness(b, Config{})
	const members = 1000
	ids := make([]string, members)
	joins := make([]*joinResult, members)
	for i := range members {
		ids[i], joins[i] = h.joinNew("g")
	}
	h.advance(DefaultInitialRebalanceDelay)
	h.advance(DefaultInitialRebalanceDelay)
	gen, leader := joins[0].resp.Generation, joins[0].resp.LeaderID
	for _, id := range ids {
		if id != leader {
			h.sync("g", id, gen, nil)
		}
	}
	h.sync("g", leader, gen, nil)
	b.ReportAllocs()
	// The clock stands still: sessions never expire during the loop.
	for i := 0; b.Loop(); i++ {
		if code := h.heartbeat("g", ids[i%members], gen); code != 0 {
			b.Fatalf("heartbeat: %s", errName(code))
		}
	}
}

// BenchmarkDeleteTopicOffsets: record 113 applied to a table where 1,000
// groups hold offsets of the deleted topic (10 partitions each) beside
// others that hold only other topics' — the cost follows the groups
// holding the topic, not the table (others=1000 vs others=100000).
func BenchmarkDeleteTopicOffsets(b *testing.B) {
	const holding, partitions = 1000, 10
	for _, others := range []int{1000, 100_000} {
		b.Run(fmt.Sprintf("others=%d", others), func(b *testing.B) {
			base := NewOffsets()
			for i := range others {
				base.Apply(commitRec(fmt.Sprintf("o%06d", i), "other", -1, 0, 1))
			}
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				for i := range holding {
					ps := make([]int32, partitions)
					for p := range ps {
						ps[p] = int32(p)
					}
					base.Apply(commitRec(fmt.Sprintf("h%04d", i), "gone", -1, ps...))
				}
				b.StartTimer()
				base.Apply(&TopicOffsetsDeletedRecord{TopicName: "gone"})
			}
			if base.HasTopic("gone") {
				b.Fatal("offsets of the deleted topic left")
			}
		})
	}
}

// BenchmarkConsumerAssignorRun: one run of the uniform assignor for a
// KIP-848 group of 1,000 members subscribed to 10 topics of 1,000
// partitions — the longest single piece of work a large group puts on its
// shard's driver, at most once per group.consumer.assignment.interval.ms.
func BenchmarkConsumerAssignorRun(b *testing.B) {
	h := newHarness(b, Config{})
	var names []string
	for i := range 10 {
		n := fmt.Sprintf("t%d", i)
		h.topics.set(n, 1000)
		names = append(names, n)
	}
	for i := range 1000 {
		h.cgh(cghReq("g", fmt.Sprintf("m%04d", i), 0, nil, names, nil))
	}
	g := h.c.consumer["g"]
	b.ReportAllocs()
	for b.Loop() {
		g.epoch++
		h.c.computeTarget(g)
	}
}
