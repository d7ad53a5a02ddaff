package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
)

// TestClusterTransactions: transactions served by three sidecars (DESIGN
// §Transactions), the clients given all three addresses. Two kgo
// GroupTransactSession members copy a topic to another,
// consume-transform-produce, with their transactional ids on shards of one
// sidecar (the victim) and their group and both topics' partitions on
// shards of the others — so every produce check, every marker and every
// group's record 110 crosses sidecars. Once a third of the output is read
// with read_committed, the victim is SIGKILLed mid-transaction: the others
// take its shards over, complete or abort what it left, and the members
// go on with the new coordinator; the output holds every input record
// exactly once. Then the Java client's transactional producer commits and
// aborts through the two that are left, its id on a shard neither hosted
// before the kill, and its read_committed consumer sees the committed
// records only.
func TestClusterTransactions(t *testing.T) {
	t.Parallel()
	kafkatest.Require(t)
	const (
		// Two: a topic's partitions are on consecutive shards
		// (diskless.ShardFor), and two of the six avoid the victim's.
		partitions = 2
		n          = 1500
	)
	cl := startSidecarCluster(t, 3, "diskless.cluster.session.timeout.ms=3000", "diskless.cluster.heartbeat.interval.ms=500",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms=1000",
		"group.initial.rebalance.delay.ms=100", "group.min.session.timeout.ms=1000")
	ctx := testCtx(t, 4*time.Minute)
	hosts := map[int32][]int32{} // shards by sidecar
	owner := map[int32]int32{}   // sidecar by shard
	for id, s := range cl.scs {
		for sh := range cl.hostingNow(s) {
			hosts[id] = append(hosts[id], int32(sh))
			owner[int32(sh)] = id
		}
	}
	var victim int32 = -1 // the sidecar but 1 hosting the fewest shards, one at least
	for _, id := range slices.Sorted(maps.Keys(hosts)) {
		if len(hosts[id]) > 0 && id != 1 && (victim < 0 || len(hosts[id]) < len(hosts[victim])) {
			victim = id
		}
	}
	if victim < 0 {
		t.Fatalf("no sidecar but 1 hosts a shard: %v", hosts)
	}
	var others []int32
	for id := range cl.scs {
		if id != victim {
			others = append(others, id)
		}
	}
	txnShard := hosts[victim][0]
	idA, idB := groupOnShard("ctx-a", txnShard), groupOnShard("ctx-b", txnShard)
	group := ""
	for sh, id := range owner {
		if id != victim {
			group = groupOnShard("ctx-g", sh)
			break
		}
	}
	// Topics whose partitions are all on the other sidecars' shards.
	offVictim := func(prefix string) string {
		for i := 0; ; i++ {
			name := fmt.Sprintf("%s-%d", prefix, i)
			createTopic(t, ctx, cl.scs[1], name, partitions, nil)
			var id diskless.TopicID
			waitFor(t, 30*time.Second, "topic "+name+" in Metadata", func() bool {
				var ok bool
				id, ok = topicOf(ctx, cl.scs[1], name)
				return ok
			})
			if !slices.ContainsFunc([]int32{0, 1}, func(p int32) bool {
				return owner[diskless.ShardFor(id, p, clusterShards)] == victim
			}) {
				return name
			}
			if i == 40 {
				t.Fatalf("40 topics with a partition on sidecar %d's shards %v", victim, hosts[victim])
			}
		}
	}
	in, out := offVictim("ctx-in"), offVictim("ctx-out")
	t.Logf("transactional ids %s, %s on shard %d of sidecar %d (the victim); group %s on shard %d of sidecar %d; topics %s, %s on shards of sidecars %v",
		idA, idB, txnShard, victim, group, diskless.GroupShardFor(group, clusterShards), owner[diskless.GroupShardFor(group, clusterShards)], in, out, others)
	want := produceValues(t, ctx, cl.scs[others[0]], in, partitions, 0, n)
	addrs := cl.addrs()

	output := startEOSReader(t, ctx, out, cl.scs[others[0]].Addr, cl.scs[others[1]].Addr)
	mctx, mcancel := context.WithCancel(ctx)
	defer mcancel()
	var members sync.WaitGroup
	for _, id := range []string{idA, idB} {
		members.Go(func() {
			open := func() (*kgo.GroupTransactSession, error) { return newEOSSession(addrs, group, id, in) }
			c, a, _ := eosRun(mctx, open, id, out, false, t.Logf)
			t.Logf("%s: %d transactions committed, %d aborted", id, c, a)
		})
	}
	waitFor(t, 2*time.Minute, "a third of the output", func() bool { return output.read.Load() >= n/3 })
	killedAt := time.Now()
	cl.scs[victim].Kill()
	atKill := output.distinct()
	t.Logf("sidecar %d (the transactions' coordinator) SIGKILLed with %d output records read, %d distinct", victim, output.read.Load(), atKill)
	if atKill >= n {
		// The copy was done before the kill: nothing below would test
		// the takeover of the members' transactions.
		t.Fatalf("every input record was in the output before the kill (%d distinct)", atKill)
	}
	waitFor(t, 2*time.Minute, "every input record in the output", func() bool { return output.distinct() >= n })
	t.Logf("every input record in the output %v after the kill", time.Since(killedAt).Round(time.Millisecond))
	mcancel()
	members.Wait()
	output.check(t, ctx, cl.scs[others[0]], partitions, want)

	// The Java producer through the two left, its id on a shard the
	// victim hosted (taken over since).
	const jtopic = "ctx-java"
	createTopic(t, ctx, cl.scs[others[0]], jtopic, 1, nil)
	two := &Sidecar{t: t, Addr: cl.scs[others[0]].Addr + "," + cl.scs[others[1]].Addr}
	jid := groupOnShard("ctx-java", txnShard)
	p := startJavaTxn(t, ctx, two, jtopic, jid)
	p.must("begin", "send c1", "send c2", "commit", "begin", "send a1", "abort", "begin", "send c3", "commit")
	if got := javaReadCommitted(t, ctx, two, jtopic); !slices.Equal(got, []string{"c1", "c2", "c3"}) {
		t.Fatalf("Java read_committed: %v, want [c1 c2 c3]", got)
	}

	// The operators' view through the two left (DESIGN §Transactions):
	// ListTransactions, asked of each, lists the three ids at the
	// sidecar now hosting their shard, and DescribeTransactions, sent to
	// the coordinator FindCoordinator names, the Java producer's last
	// transaction committed there.
	acl, err := kgo.NewClient(kgo.SeedBrokers(cl.scs[others[0]].Addr, cl.scs[others[1]].Addr))
	mustNoErr(t, "admin client", err)
	defer acl.Close()
	adm := kadm.NewClient(acl)
	listed, err := adm.ListTransactions(ctx, nil, nil)
	mustNoErr(t, "ListTransactions", err)
	described, err := adm.DescribeTransactions(ctx, idA, idB, jid)
	mustNoErr(t, "DescribeTransactions", err)
	for _, id := range []string{idA, idB, jid} {
		l, ok := listed[id]
		d := described[id]
		if !ok || d.Err != nil || l.Coordinator == victim || d.Coordinator != l.Coordinator || d.ProducerID != l.ProducerID {
			t.Errorf("transactional id %s: listed %+v (%v), described %+v", id, l, ok, d)
		}
	}
	if d := described[jid]; d.State != "CompleteCommit" {
		t.Errorf("DescribeTransactions %s: %+v, want CompleteCommit", jid, d)
	}
	// DescribeProducers, sent to the partition's leader: the Java
	// producer in the state of the partition it wrote.
	var set kadm.TopicsSet
	set.Add(jtopic, 0)
	producers, err := adm.DescribeProducers(ctx, set)
	mustNoErr(t, "DescribeProducers", err)
	jp := producers[jtopic].Partitions[0]
	if _, ok := jp.ActiveProducers[described[jid].ProducerID]; jp.Err != nil || !ok {
		t.Errorf("DescribeProducers %s-0: %+v, want producer %d", jtopic, jp, described[jid].ProducerID)
	}
}
