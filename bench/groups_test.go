package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/group"
)

// The consumer-group benchmarks (issue 10): an in-process sidecar (inproc)
// under steady produce, with group traffic turned on and off in
// alternating phases of one run, so that produce latency with and without
// it is measured side by side under the same machine load.

var (
	stormGroups  = flag.Int("storm-groups", 100, "BenchmarkJoinGroupStorm: groups in the storm")
	stormMembers = flag.Int("storm-members", 5, "BenchmarkJoinGroupStorm: members per group")
	stormPhase   = flag.Duration("storm-phase", 3*time.Second, "BenchmarkJoinGroupStorm: length of each quiet and storm phase")
	stormCycles  = flag.Int("storm-cycles", 3, "BenchmarkJoinGroupStorm: quiet+storm phase pairs per run")
	stormPause   = flag.Duration("storm-pause", time.Second, "BenchmarkJoinGroupStorm: how long a member waits after leaving before it joins again (jittered ±50%); 0: at once")
	produceRate  = flag.Int("produce-rate", 1000, "group benchmarks: records/s of steady produce (1 KiB each)")
)

// consumerMeta is a consumer protocol subscription to topics (the
// JoinGroup metadata of the "range" protocol).
func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version, m.Topics = 0, topics
	return m.AppendTo(nil)
}

// stormMember is one member of a storm group: over its own connection it
// joins (JoinGroup v9, MEMBER_ID_REQUIRED then the join), syncs (the
// leader with an assignment for every member), heartbeats once and
// leaves, again and again while the storm is on.
type stormMember struct {
	rc    *rawConn
	group string
	id    string
	meta  []byte
	reqs  *atomic.Int64
	joins *atomic.Int64
}

func (m *stormMember) send(req kmsg.Request) (kmsg.Response, error) {
	m.reqs.Add(1)
	return m.rc.do(req)
}

// cycle is one join, sync, heartbeat and leave; a refused step ends it
// (the next cycle joins again).
func (m *stormMember) cycle() error {
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.MemberID = 9, m.group, m.id
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 10_000, 1_000
	join.ProtocolType = "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: m.meta}}
	r, err := m.send(join)
	if err != nil {
		return err
	}
	jr := r.(*kmsg.JoinGroupResponse)
	if jr.ErrorCode == kerr.MemberIDRequired.Code {
		m.id = jr.MemberID
		join.MemberID = m.id
		if r, err = m.send(join); err != nil {
			return err
		}
		jr = r.(*kmsg.JoinGroupResponse)
	}
	m.joins.Add(1)
	if jr.ErrorCode != 0 {
		if jr.ErrorCode == kerr.UnknownMemberID.Code {
			m.id = ""
		}
		return nil
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version, sync.Group, sync.MemberID, sync.Generation = 5, m.group, m.id, jr.Generation
	sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), jr.Protocol
	if jr.LeaderID == m.id {
		for _, mem := range jr.Members {
			sync.GroupAssignment = append(sync.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: mem.MemberID, MemberAssignment: []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}})
		}
	}
	if r, err = m.send(sync); err != nil {
		return err
	}
	if r.(*kmsg.SyncGroupResponse).ErrorCode != 0 {
		return nil
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.Generation = 4, m.group, m.id, jr.Generation
	if _, err = m.send(hb); err != nil {
		return err
	}
	return m.leave()
}

func (m *stormMember) leave() error {
	if m.id == "" {
		return nil
	}
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group = 5, m.group
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: m.id}}
	_, err := m.send(leave)
	m.id = ""
	return err
}

// BenchmarkJoinGroupStorm: steady produce (-produce-rate records/s of
// 1 KiB to 1 partition, one idempotent kgo producer, acks=all) into an
// in-process sidecar while -storm-groups groups of -storm-members members
// each join, sync, heartbeat and leave in a loop (raw requests, a
// connection per member), waiting about -storm-pause before joining
// again, in every other phase. Reports produce p50/p99 of
// the records sent in quiet and in storm phases (not those of the
// warm-up before the first phase or of the tail after the last), their
// ratio, the records sent per second in each (the offered load, kept on
// schedule), the pipeline's CommitFile p99 in each, and the storm's
// JoinGroup and request rates.
//
// Sub-benchmarks: the default diskless.append.commit.interval.ms (250 ms)
// and 10 ms, where a commit delayed on the driver weighs more; and where
// the groups live: groups=same-shard puts them on the coordinator shard
// that commits the produced partitions (as with the default single
// shard: every group request and every commit share one driver),
// groups=other-shard on the other of two, so that the difference between
// the two is the cost of sharing the driver, the rest (the machine's CPU
// spent serving the storm) being equal. Run with -benchtime=1x.
func BenchmarkJoinGroupStorm(b *testing.B) {
	for _, ci := range []time.Duration{0, 10 * time.Millisecond} {
		for _, same := range []bool{true, false} {
			name := "commit-interval=default"
			if ci > 0 {
				name = fmt.Sprintf("commit-interval=%v", ci)
			}
			if same {
				name += "/groups=same-shard"
			} else {
				name += "/groups=other-shard"
			}
			b.Run(name, func(b *testing.B) {
				for b.Loop() {
					runStorm(b, ci, same)
				}
			})
		}
	}
}

// placedTopic creates a topic of n partitions all committed by shard
// (trying fresh names: each try's topic id places them anew; a topic's
// partitions go to consecutive shards, so n is at most the shard count's
// share).
func placedTopic(b testing.TB, ctx context.Context, sc *inproc, prefix string, n, shard int32) string {
	for i := 0; ; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		t, err := sc.coord.CreateTopic(ctx, name, n, nil)
		if err != nil {
			b.Fatal(err)
		}
		all := true
		for p := range n {
			all = all && sc.coord.ShardFor(t.ID, p) == shard
		}
		if all {
			return name
		}
	}
}

// groupOn returns the i-th group id with prefix that shard hosts.
func groupOn(sc *inproc, prefix string, i int, shard int32) string {
	for k := 0; ; k++ {
		g := fmt.Sprintf("%s-%d-%d", prefix, i, k)
		if sc.coord.GroupShard(g) == shard {
			return g
		}
	}
}

func runStorm(b *testing.B, commitInterval time.Duration, sameShard bool) {
	sc := startInproc(b, inprocConfig{shards: 2, commitInterval: commitInterval,
		groups: group.Config{InitialRebalanceDelay: time.Millisecond, MinSessionTimeout: time.Second}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	topic := placedTopic(b, ctx, sc, "storm-produce", 1, 0)
	if _, err := sc.coord.CreateTopic(ctx, "storm-consume", 8, nil); err != nil {
		b.Fatal(err)
	}
	groupShard := int32(1)
	if sameShard {
		groupShard = 0
	}
	var (
		storm       atomic.Bool
		reqs, joins atomic.Int64
		wg          sync.WaitGroup
		failed      atomic.Pointer[error]
		cur         atomic.Pointer[string]
	)
	// The phase records are timed under: "warmup" and "tail" (before the
	// first and after the last phase) count in neither.
	setPhase := func(p string) { cur.Store(&p); sc.setPhase(p) }
	phase := func() string { return *cur.Load() }
	setPhase("warmup")
	meta := consumerMeta("storm-consume")
	for g := range *stormGroups {
		for range *stormMembers {
			rc, err := dialRaw(sc.addr)
			if err != nil {
				b.Fatal(err)
			}
			m := &stormMember{rc: rc, group: groupOn(sc, "storm", g, groupShard), meta: meta, reqs: &reqs, joins: &joins}
			wg.Go(func() {
				defer rc.close()
				for ctx.Err() == nil {
					if !storm.Load() {
						if err := m.leave(); err != nil && ctx.Err() == nil {
							failed.CompareAndSwap(nil, &err)
							return
						}
						time.Sleep(20 * time.Millisecond)
						continue
					}
					if err := m.cycle(); err != nil {
						if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
							failed.CompareAndSwap(nil, &err)
						}
						return
					}
					// Jittered, so that members of a group come and go
					// at different times: every leave and join is a
					// rebalance of the others.
					if *stormPause > 0 {
						time.Sleep(*stormPause/2 + rand.N(*stormPause))
					}
				}
			})
		}
	}
	prod := startProducer(b, ctx, sc.addr, topic, *produceRate, 1024, phase)
	time.Sleep(*stormPhase) // warm-up: the client connects, the first files commit
	stormTime := time.Duration(0)
	var stormJoins, stormReqs int64
	for range *stormCycles {
		storm.Store(false)
		setPhase("quiet")
		time.Sleep(*stormPhase)
		j0, r0, t0 := joins.Load(), reqs.Load(), time.Now()
		storm.Store(true)
		setPhase("storm")
		time.Sleep(*stormPhase)
		stormJoins += joins.Load() - j0
		stormReqs += reqs.Load() - r0
		stormTime += time.Since(t0)
	}
	storm.Store(false)
	setPhase("tail")
	time.Sleep(*stormPhase / 2)
	cancel()
	prod.wait()
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatalf("a storm member failed: %v", *err)
	}
	prod.errs.Range(func(k, _ any) bool { b.Errorf("produce error: %v", k); return true })
	qp50, qn := prod.lat.quantileMs("quiet", 50)
	qp99, _ := prod.lat.quantileMs("quiet", 99)
	sp50, sn := prod.lat.quantileMs("storm", 50)
	sp99, _ := prod.lat.quantileMs("storm", 99)
	b.ReportMetric(qp50, "quiet-p50-ms")
	b.ReportMetric(qp99, "quiet-p99-ms")
	b.ReportMetric(sp50, "storm-p50-ms")
	b.ReportMetric(sp99, "storm-p99-ms")
	b.ReportMetric(sp99/qp99, "p99-storm/quiet")
	cq99, _ := sc.commits.quantileMs("quiet", 99)
	cs99, _ := sc.commits.quantileMs("storm", 99)
	b.ReportMetric(cq99, "commit-quiet-p99-ms")
	b.ReportMetric(cs99, "commit-storm-p99-ms")
	b.ReportMetric(float64(stormJoins)/stormTime.Seconds(), "joins/s")
	b.ReportMetric(float64(stormReqs)/stormTime.Seconds(), "group-reqs/s")
	b.ReportMetric(float64(qn)/(float64(*stormCycles)*stormPhase.Seconds()), "quiet-records/s")
	b.ReportMetric(float64(sn)/stormTime.Seconds(), "storm-records/s")
	b.Logf("records: %d quiet, %d storm", qn, sn)
}

var (
	bigMembers    = flag.Int("big-members", 1000, "BenchmarkLargeGroupRebalance: members of the large group")
	bigPartitions = flag.Int("big-partitions", 10_000, "BenchmarkLargeGroupRebalance: partitions the large group consumes (one topic)")
	bigInterval   = flag.Duration("assignment-interval", 0, "BenchmarkLargeGroupRebalance: group.consumer.assignment.interval.ms; 0: its default (1 s), negative: an assignor run per epoch")
)

// smallGroup is a one-member classic group that heartbeats and commits
// an offset every 100 ms over its own connection, timing both by phase:
// the other group whose service a large rebalance must not stall.
type smallGroup struct {
	hb, commit *phased
	wg         sync.WaitGroup
}

func startSmallGroup(b testing.TB, ctx context.Context, sc *inproc, topic string, phase func() string) *smallGroup {
	b.Helper()
	rc, err := dialRaw(sc.addr)
	if err != nil {
		b.Fatal(err)
	}
	m := &stormMember{rc: rc, group: "small", meta: consumerMeta(topic), reqs: new(atomic.Int64), joins: new(atomic.Int64)}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group = 9, m.group
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 30_000, 30_000
	join.ProtocolType = "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: m.meta}}
	var jr *kmsg.JoinGroupResponse
	for range 2 { // MEMBER_ID_REQUIRED, then the join
		r, err := rc.do(join)
		if err != nil {
			b.Fatal(err)
		}
		jr = r.(*kmsg.JoinGroupResponse)
		join.MemberID = jr.MemberID
	}
	if jr.ErrorCode != 0 {
		b.Fatalf("small group join: %v", kerr.ErrorForCode(jr.ErrorCode))
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version, sync.Group, sync.MemberID, sync.Generation = 5, m.group, jr.MemberID, jr.Generation
	sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), jr.Protocol
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}}
	if r, err := rc.do(sync); err != nil || r.(*kmsg.SyncGroupResponse).ErrorCode != 0 {
		b.Fatalf("small group sync: %v %v", err, r)
	}
	s := &smallGroup{hb: newPhased(), commit: newPhased()}
	s.wg.Go(func() {
		defer rc.close()
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Version, hb.Group, hb.MemberID, hb.Generation = 4, m.group, jr.MemberID, jr.Generation
		oc := kmsg.NewPtrOffsetCommitRequest()
		oc.Version, oc.Group, oc.MemberID, oc.Generation = 9, m.group, jr.MemberID, jr.Generation
		oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, LeaderEpoch: -1}}}}
		for i := int64(0); ctx.Err() == nil; i++ {
			ph, start := phase(), time.Now()
			r, err := rc.do(hb)
			if err != nil || r.(*kmsg.HeartbeatResponse).ErrorCode != 0 {
				b.Errorf("small group heartbeat: %v %v", err, r)
				return
			}
			s.hb.record(ph, time.Since(start))
			oc.Topics[0].Partitions[0].Offset = i
			ph, start = phase(), time.Now()
			r, err = rc.do(oc)
			if err != nil || r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode != 0 {
				b.Errorf("small group commit: %v %v", err, r)
				return
			}
			s.commit.record(ph, time.Since(start))
			time.Sleep(100 * time.Millisecond)
		}
	})
	return s
}

// BenchmarkLargeGroupRebalance: a group of -big-members members
// consuming one topic of -big-partitions partitions rebalances in an
// in-process sidecar of one coordinator shard (the default: the large
// group, a small group and every produce commit share one driver), while
// a one-member group heartbeats and commits every 100 ms and a kgo
// producer produces -produce-rate records/s. Each member has its own
// connection (raw requests).
//
//   - protocol=classic: every member joins at once (JoinGroup v9); the
//     join phase ends group.initial.rebalance.delay.ms (3 s, Kafka's
//     default) after the last join; the leader computes a round-robin
//     assignment of every partition (the client's work, timed apart) and
//     syncs it; every member's SyncGroup gets its share.
//   - protocol=consumer: every member sends its first
//     ConsumerGroupHeartbeat (KIP-848, the uniform server-side assignor)
//     at once, then heartbeats as the answers ask until the group is
//     Stable with every partition assigned.
//
// Reported: the rebalance's time (first request to the last member
// holding its assignment), and p50/p99 of the small group's heartbeats
// and commits, of produce and of the pipeline's CommitFile calls before
// (5 s) and during the rebalance. Run with -benchtime=1x.
func BenchmarkLargeGroupRebalance(b *testing.B) {
	for _, proto := range []string{"classic", "consumer"} {
		b.Run("protocol="+proto, func(b *testing.B) {
			for b.Loop() {
				runLargeRebalance(b, proto)
			}
		})
	}
}

func runLargeRebalance(b *testing.B, proto string) {
	sc := startInproc(b, inprocConfig{shards: 1, groups: group.Config{AssignmentInterval: *bigInterval}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := sc.coord.CreateTopic(ctx, "big", int32(*bigPartitions), nil); err != nil {
		b.Fatal(err)
	}
	if _, err := sc.coord.CreateTopic(ctx, "rb-produce", 1, nil); err != nil {
		b.Fatal(err)
	}
	var cur atomic.Pointer[string]
	setPhase := func(p string) { cur.Store(&p); sc.setPhase(p) }
	phase := func() string { return *cur.Load() }
	setPhase("warmup")
	prod := startProducer(b, ctx, sc.addr, "rb-produce", *produceRate, 1024, phase)
	small := startSmallGroup(b, ctx, sc, "rb-produce", phase)
	conns := make([]*rawConn, *bigMembers)
	for i := range conns {
		rc, err := dialRaw(sc.addr)
		if err != nil {
			b.Fatal(err)
		}
		defer rc.close()
		conns[i] = rc
	}
	time.Sleep(2 * time.Second)
	setPhase("before")
	time.Sleep(5 * time.Second)
	setPhase("rebalance")
	var took, work time.Duration
	switch proto {
	case "classic":
		took, work = classicRebalance(b, conns)
	case "consumer":
		took = consumerRebalance(b, conns)
	}
	setPhase("after")
	time.Sleep(2 * time.Second)
	cancel()
	prod.wait()
	small.wg.Wait()
	b.ReportMetric(took.Seconds(), "rebalance-s")
	if work > 0 {
		b.ReportMetric(work.Seconds(), "leader-assign-s")
	}
	b.Logf("rebalance of %d members over %d partitions: %v", *bigMembers, *bigPartitions, took)
	for _, m := range []struct {
		name string
		p    *phased
	}{{"small-heartbeat", small.hb}, {"small-commit", small.commit}, {"produce", prod.lat}, {"commitfile", sc.commits}} {
		for _, ph := range []string{"before", "rebalance"} {
			p99, n := m.p.quantileMs(ph, 99)
			p50, _ := m.p.quantileMs(ph, 50)
			mx, _ := m.p.quantileMs(ph, 100)
			b.ReportMetric(p99, m.name+"-"+ph+"-p99-ms")
			b.Logf("%-16s %-9s n=%6d p50 %8.2f ms  p99 %8.2f ms  max %8.2f ms", m.name, ph, n, p50, p99, mx)
		}
	}
}

// classicRebalance runs the classic rebalance of len(conns) members and
// returns its time and the leader's assignment time (client work).
func classicRebalance(b *testing.B, conns []*rawConn) (took, leaderWork time.Duration) {
	meta := consumerMeta("big")
	start := time.Now()
	var (
		wg       sync.WaitGroup
		assigned atomic.Int64
		work     atomic.Int64
	)
	for _, rc := range conns {
		wg.Go(func() {
			join := kmsg.NewPtrJoinGroupRequest()
			join.Version, join.Group = 9, "big"
			join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 60_000, 60_000
			join.ProtocolType = "consumer"
			join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta}}
			var jr *kmsg.JoinGroupResponse
			for range 2 {
				r, err := rc.do(join)
				if err != nil {
					b.Error(err)
					return
				}
				jr = r.(*kmsg.JoinGroupResponse)
				join.MemberID = jr.MemberID
			}
			if jr.ErrorCode != 0 {
				b.Errorf("join: %v", kerr.ErrorForCode(jr.ErrorCode))
				return
			}
			sync := kmsg.NewPtrSyncGroupRequest()
			sync.Version, sync.Group, sync.MemberID, sync.Generation = 5, "big", jr.MemberID, jr.Generation
			sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), jr.Protocol
			if jr.LeaderID == jr.MemberID {
				t0 := time.Now()
				sync.GroupAssignment = roundRobin(jr.Members, "big", int32(*bigPartitions))
				work.Store(int64(time.Since(t0)))
			}
			r, err := rc.do(sync)
			if err != nil {
				b.Error(err)
				return
			}
			sr := r.(*kmsg.SyncGroupResponse)
			if sr.ErrorCode != 0 {
				b.Errorf("sync: %v", kerr.ErrorForCode(sr.ErrorCode))
				return
			}
			var a kmsg.ConsumerMemberAssignment
			if err := a.ReadFrom(sr.MemberAssignment); err != nil {
				b.Error(err)
				return
			}
			for _, t := range a.Topics {
				assigned.Add(int64(len(t.Partitions)))
			}
		})
	}
	wg.Wait()
	took = time.Since(start)
	if n := assigned.Load(); n != int64(*bigPartitions) {
		b.Fatalf("%d partitions assigned, want %d", n, *bigPartitions)
	}
	return took, time.Duration(work.Load())
}

// roundRobin deals the topic's partitions to the members in order.
func roundRobin(members []kmsg.JoinGroupResponseMember, topic string, partitions int32) []kmsg.SyncGroupRequestGroupAssignment {
	parts := make([][]int32, len(members))
	for p := range partitions {
		i := int(p) % len(members)
		parts[i] = append(parts[i], p)
	}
	out := make([]kmsg.SyncGroupRequestGroupAssignment, len(members))
	for i, m := range members {
		a := kmsg.NewConsumerMemberAssignment()
		a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: topic, Partitions: parts[i]}}
		out[i] = kmsg.SyncGroupRequestGroupAssignment{MemberID: m.MemberID, MemberAssignment: a.AppendTo(nil)}
	}
	return out
}

// consumerRebalance runs the KIP-848 join of len(conns) members and
// returns the time until every partition is held and every member holds
// its share (the uniform assignor gives each ⌊P/M⌋ or ⌈P/M⌉).
func consumerRebalance(b *testing.B, conns []*rawConn) time.Duration {
	start := time.Now()
	var (
		wg   sync.WaitGroup
		held atomic.Int64 // partitions the members hold, reconciled
		fair atomic.Int64 // members holding their share (the uniform assignor's)
		done atomic.Bool
	)
	lo := int64(*bigPartitions / len(conns))
	hi := int64((*bigPartitions + len(conns) - 1) / len(conns))
	share := func(n int64) int64 {
		if n >= lo && n <= hi {
			return 1
		}
		return 0
	}
	for i, rc := range conns {
		wg.Go(func() {
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Version, req.Group = 1, "big"
			req.MemberID = fmt.Sprintf("member-%04d-0000-0000-000000000000", i)
			req.MemberEpoch = 0
			req.RebalanceTimeoutMillis = 60_000
			req.SubscribedTopicNames = []string{"big"}
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			mine := int64(0)
			for !done.Load() {
				r, err := rc.do(req)
				if err != nil {
					b.Error(err)
					return
				}
				resp := r.(*kmsg.ConsumerGroupHeartbeatResponse)
				if resp.ErrorCode != 0 {
					b.Errorf("heartbeat: %v", kerr.ErrorForCode(resp.ErrorCode))
					return
				}
				req.MemberEpoch = resp.MemberEpoch
				// After the first, a heartbeat carries only what changed.
				req.RebalanceTimeoutMillis, req.SubscribedTopicNames = -1, nil
				if resp.Assignment != nil {
					// The member owns what it was given (it acknowledges
					// revocations and new partitions at once).
					req.Topics = req.Topics[:0]
					n := int64(0)
					for _, t := range resp.Assignment.Topics {
						req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t.TopicID, Partitions: t.Partitions})
						n += int64(len(t.Partitions))
					}
					held.Add(n - mine)
					fair.Add(share(n) - share(mine))
					mine = n
					continue // acknowledge at once
				}
				req.Topics = nil
				if held.Load() == int64(*bigPartitions) && fair.Load() == int64(len(conns)) {
					done.Store(true)
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}
