package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batchtest"
	"github.com/diskless-sidecar/sidecar/internal/history"
	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
)

// sidecarCluster is sidecars of one cluster (diskless.cluster.enable),
// one next to each broker of the shared Kafka (node.id = the broker's id,
// broker.rack a zone of its own), on one versitygw bucket.
type sidecarCluster struct {
	t    *testing.T
	k    *kafkatest.Cluster
	s3   *S3Store
	meta string
	sets []string
	scs  map[int32]*Sidecar
	// racks overrides a sidecar's broker.rack (default zone-<id>).
	racks map[int32]string
	// hosts holds the network namespace of a sidecar started on a host
	// of its own (startOnHost).
	hosts map[int32]*netHost
	// lan, when set, is the one host every sidecar runs on
	// (startSidecarClusterLAN), reached by the test's clients only from
	// networks of clients (netHost.ClientNet) through lanDial.
	lan     *netHost
	lanDial func(ctx context.Context, network, addr string) (net.Conn, error)
}

const clusterShards = 6

// startSidecarCluster starts a sidecar next to each broker of the shared
// Kafka, with a metadata topic of its own, and waits until every one
// names all of them in Metadata.
func startSidecarCluster(t *testing.T, n int, extra ...string) *sidecarCluster {
	t.Helper()
	return startSidecarClusterRacks(t, n, nil, extra...)
}

// startSidecarClusterRacks is startSidecarCluster with racks by node id.
func startSidecarClusterRacks(t *testing.T, n int, racks map[int32]string, extra ...string) *sidecarCluster {
	t.Helper()
	return newSidecarCluster(t, racks).startAll(n, extra...)
}

// startSidecarClusterLAN is startSidecarClusterRacks with every sidecar on
// one host of the test's own (a network namespace, netHost), listening on
// the host's address: clients reach them from networks of clients
// joined to the host (netHost.ClientNet), with their own addresses.
func startSidecarClusterLAN(t *testing.T, n int, racks map[int32]string, extra ...string) *sidecarCluster {
	t.Helper()
	sc := newSidecarCluster(t, racks)
	sc.lan = newNetHost(t)
	sc.lan.Reach(strings.Split(sc.k.BootstrapServers(), ",")...)
	sc.lan.ReachDirect(strings.TrimPrefix(sc.s3.Proxy.URL, "http://"))
	sc.lanDial, _ = sc.lan.ClientNet(250) // the test's own network: no zone
	return sc.startAll(n, extra...)
}

func newSidecarCluster(t *testing.T, racks map[int32]string) *sidecarCluster {
	t.Helper()
	k := sharedKafka(t)
	return &sidecarCluster{t: t, k: k, s3: StartS3(t), meta: fmt.Sprintf("meta-cluster-%d", metaTopics.Add(1)), scs: map[int32]*Sidecar{}, racks: racks,
		hosts: map[int32]*netHost{}}
}

// startAll starts a sidecar next to each of the first n brokers and waits
// until every one names all of them and the placement settled.
func (sc *sidecarCluster) startAll(n int, extra ...string) *sidecarCluster {
	sc.t.Helper()
	k := sc.k
	sc.sets = append(kafkaLogOn(k, sc.meta),
		"diskless.cluster.enable=true",
		fmt.Sprintf("diskless.metadata.topic.num.partitions=%d", clusterShards),
		"diskless.append.commit.interval.ms=50",
	)
	sc.sets = append(sc.sets, extra...)
	ids := k.Brokers()[:n]
	for _, id := range ids {
		sc.start(id)
	}
	sc.waitBrokers(ids...)
	sc.waitSettled()
	return sc
}

// hostingNow returns the shards s hosts now, from its log (hosting and
// released lines, in order).
func (sc *sidecarCluster) hostingNow(s *Sidecar) map[int]bool {
	now := map[int]bool{}
	shardLines(s.Logs(), func(hosting bool, shard int) {
		if hosting {
			now[shard] = true
		} else {
			delete(now, shard)
		}
	})
	return now
}

// shardLines calls fn for each "coordinator: hosting shard" (hosting) and
// "coordinator: released shard" line of logs, in order. It decodes only
// those lines, found by their message: decoding every line (the kafka
// clients' debug lines, megabytes by the end of a failover test) took
// 32 s for one sidecar's 10 MB log under -race on a loaded machine (this
// way: 14 ms), and waitSettled, which reads every sidecar's log each
// turn, reported a placement settled 41–69 s after a heal that the
// sidecars' own logs show settled ≤ 6 s after it.
func shardLines(logs string, fn func(hosting bool, shard int)) {
	const mark = `"msg":"coordinator: `
	for {
		i := strings.Index(logs, mark)
		if i < 0 {
			return
		}
		rest := logs[i+len(mark):]
		end := strings.IndexByte(rest, '\n')
		if end < 0 {
			end = len(rest)
		}
		line := logs[strings.LastIndexByte(logs[:i], '\n')+1 : i+len(mark)+end]
		logs = rest[end:]
		if !strings.HasPrefix(rest, `hosting shard"`) && !strings.HasPrefix(rest, `released shard"`) {
			continue
		}
		var rec struct {
			Msg   string `json:"msg"`
			Shard int    `json:"shard"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil {
			fn(rec.Msg == "coordinator: hosting shard", rec.Shard)
		}
	}
}

// waitSettled waits until the running sidecars host every shard exactly
// once, unchanged for a second: the placement settled after the start
// (a sidecar alone in its first view takes shards the others then take
// back).
func (sc *sidecarCluster) waitSettled() {
	sc.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	stableSince := time.Now()
	for {
		count := make([]int, clusterShards)
		for _, s := range sc.scs {
			if !s.Alive() {
				continue
			}
			for sh := range sc.hostingNow(s) {
				count[sh]++
			}
		}
		cur := fmt.Sprint(count)
		if cur != last {
			last, stableSince = cur, time.Now()
		}
		if !slices.ContainsFunc(count, func(c int) bool { return c != 1 }) && time.Since(stableSince) >= time.Second {
			return
		}
		if time.Now().After(deadline) {
			sc.t.Fatalf("shard placement did not settle: hosts per shard %v", count)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// start starts the sidecar of broker id (again, after a kill: a fresh
// data.dir, as a replacement machine would have).
func (sc *sidecarCluster) start(id int32) *Sidecar {
	sc.t.Helper()
	if sc.lan != nil {
		// On the LAN host, at the host's address (port 19000+id: the
		// namespace is the test's own).
		addr := sc.lan.HostAddr(fmt.Sprint(19000 + id))
		s := startSidecarS3Cmd(sc.t, sc.lan.Command, sc.s3, "", append(slices.Clone(sc.sets),
			fmt.Sprintf("node.id=%d", id), "broker.rack="+sc.rack(id),
			"listeners=PLAINTEXT://"+addr, "advertised.listeners=PLAINTEXT://"+addr)...)
		s.Addr, s.HTTP = addr, "" // its HTTP endpoint is inside the host
		sc.scs[id] = s
		return s
	}
	s := StartSidecarS3(sc.t, sc.s3, "", append(slices.Clone(sc.sets),
		fmt.Sprintf("node.id=%d", id), "broker.rack="+sc.rack(id))...)
	sc.scs[id] = s
	return s
}

// startOnHost starts the sidecar of broker id on a host of its own: a
// network namespace reaching the Kafka brokers and the other running
// sidecars over a veth the test can cut (netHost), and the object store
// directly (not cut). Clients and the other sidecars reach it at a
// loopback address of the test's namespace (its advertised listener),
// over the same veth.
func (sc *sidecarCluster) startOnHost(id int32) *Sidecar {
	sc.t.Helper()
	h := newNetHost(sc.t)
	h.Reach(strings.Split(sc.k.BootstrapServers(), ",")...)
	for other, s := range sc.scs {
		if other != id && s.Alive() {
			h.Reach(s.Addr)
		}
	}
	h.ReachDirect(strings.TrimPrefix(sc.s3.Proxy.URL, "http://"))
	outside, port := h.Expose()
	s := startSidecarS3Cmd(sc.t, h.Command, sc.s3, "", append(slices.Clone(sc.sets),
		fmt.Sprintf("node.id=%d", id), "broker.rack="+sc.rack(id),
		"listeners=PLAINTEXT://"+h.HostAddr(port), "advertised.listeners=PLAINTEXT://"+outside)...)
	s.Addr, s.HTTP = outside, "" // its HTTP endpoint is inside the host
	sc.scs[id], sc.hosts[id] = s, h
	return s
}

// rack is sidecar id's broker.rack.
func (sc *sidecarCluster) rack(id int32) string {
	if r, ok := sc.racks[id]; ok {
		return r
	}
	return fmt.Sprintf("zone-%d", id)
}

// brokers returns the node ids s's Metadata names.
func brokers(ctx context.Context, s *Sidecar, opts ...kgo.Opt) []int32 {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.Addr)}, opts...)...)
	if err != nil {
		return nil
	}
	defer cl.Close()
	m, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		return nil
	}
	var ids []int32
	for _, b := range m.Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	return ids
}

// clientOpts are what the test's clients need to reach the sidecars:
// nothing, or on a LAN host a dialer in the test's network of clients.
func (sc *sidecarCluster) clientOpts() []kgo.Opt {
	if sc.lanDial != nil {
		return []kgo.Opt{kgo.Dialer(sc.lanDial)}
	}
	return nil
}

// waitBrokers waits until every running sidecar names exactly ids.
func (sc *sidecarCluster) waitBrokers(ids ...int32) {
	sc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	want := slices.Sorted(slices.Values(ids))
	for _, id := range ids {
		for !slices.Equal(brokers(ctx, sc.scs[id], sc.clientOpts()...), want) {
			if ctx.Err() != nil {
				sc.t.Fatalf("sidecar %d names brokers %v, want %v", id, brokers(context.Background(), sc.scs[id], sc.clientOpts()...), want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// TestCluster runs three sidecars next to a 3-broker Kafka on one bucket,
// 6 coordinator shards placed on the sidecars of their metadata
// partitions' leaders (one cluster for the subtests):
//
//   - ProduceAnySidecar: kgo producers, each told by its client id to use
//     its own sidecar's zone, write to the same partitions through
//     different sidecars; every acknowledged record is read exactly
//     once, in dense offset order, through another sidecar
//     (internal/history).
//   - Groups: a kgo consumer group with members on two sidecars reads
//     every record once; the group's coordinator is wherever its shard
//     is hosted.
//   - GroupsOnTheWrongCoordinator: a group's requests sent to a sidecar
//     that does not host its shard (not the one FindCoordinator names)
//     get NOT_COORDINATOR, as a Kafka broker that is not the group's
//     coordinator answers; the named one serves them.
//   - KcatAndJava: kcat and the Java client given all three addresses:
//     kcat produces a text file (the topic auto-created through a
//     sidecar that may not be the controller) and reads it back in
//     order; a Java group consumer reads it all once.
//   - RetryThroughAnotherSidecar: an idempotent produce whose answer is
//     lost after the commit, sent again through another sidecar, is
//     stored once, at its original offset.
//   - LongPollAcrossSidecars: a fetch long-polling at the high watermark
//     on a sidecar that does not host the partition's shard is woken by a
//     produce through the third sidecar (committed over the RPC to the
//     owner, seen by the waiting sidecar's replica), with the record.
//   - ProducerIDsAcrossSidecars: InitProducerId through every sidecar at
//     once, past a block of ids on each: no id handed out twice.
//   - DisablementEverySidecar: diskless disabled on a topic through one
//     sidecar: DISABLED on every sidecar's /v1/topics, produce through
//     each refused with POLICY_VIOLATION, the records kept readable
//     through each (policy retain).
//   - DisablementSidecarDown: a sidecar SIGKILLed, then diskless disabled
//     on a topic (KIP-950's failure modes): the disablement stays
//     DISABLING, its DisklessDisableTopic to the dead sidecar retried,
//     until a new process of that node id is started and confirms it;
//     then DISABLED everywhere, and the new process refuses produce to it.
//   - DisablementSidecarDownPastSession: the same, the dead sidecar kept
//     down until the topic is DISABLED without it (out of the view, its
//     session expired); started then, it refuses produce to the topic
//     (POLICY_VIOLATION, from its replica of the catalog) and serves the
//     retained records.
//   - SharedFileDeletion (issue 13's file lifecycle across sidecars; set
//     up before the others, so that the orphan grace period, ≥ 10 min,
//     mostly passes while they run): two WAL objects, each one produce
//     request holding batches of two shards hosted by different sidecars;
//     DeleteRecords releases every batch of the control object and the
//     lower owner's batch of the other. Once the grace period has passed
//     the control object is deleted, the other stays in the bucket and
//     readable while the higher owner's batch lives (the lower owner, the
//     deleter, asks it over DisklessDescribeFiles); DeleteRecords of that
//     batch, and it is gone within seconds (diskless.file.deletion.delay.ms
//     2 s), closed in both shards. Then only shard 0's host runs orphan
//     scans (diskless_orphan_scans_total on every sidecar).
func TestCluster(t *testing.T) {
	t.Parallel()
	// A session timeout of 20 s: DisablementSidecarDown restarts a killed
	// sidecar before the others' views drop it, however loaded the
	// machine (the restart replaces it in the view at once).
	cl := startSidecarCluster(t, 3, append([]string{"diskless.cluster.session.timeout.ms=20000"}, clusterFileSets...)...)
	shared := startSharedFiles(t, cl)
	t.Run("ProduceAnySidecar", func(t *testing.T) { testProduceAnySidecar(t, cl) })
	t.Run("Groups", func(t *testing.T) { testClusterGroups(t, cl) })
	t.Run("GroupsOnTheWrongCoordinator", func(t *testing.T) { testClusterGroupNotCoordinator(t, cl) })
	t.Run("KcatAndJava", func(t *testing.T) { testClusterKcatJava(t, cl) })
	t.Run("RetryThroughAnotherSidecar", func(t *testing.T) { testRetryThroughAnotherSidecar(t, cl) })
	t.Run("LongPollAcrossSidecars", func(t *testing.T) { testLongPollAcrossSidecars(t, cl) })
	t.Run("ProducerIDsAcrossSidecars", func(t *testing.T) { testProducerIDsAcrossSidecars(t, cl) })
	t.Run("DisablementEverySidecar", func(t *testing.T) { testClusterDisablement(t, cl) })
	t.Run("DisablementSidecarDown", func(t *testing.T) { testClusterDisablementDown(t, cl, false) })
	t.Run("DisablementSidecarDownPastSession", func(t *testing.T) { testClusterDisablementDown(t, cl, true) })
	t.Run("SharedFileDeletion", func(t *testing.T) { testSharedFileDeletion(t, cl, shared) })
	for id, s := range cl.scs {
		t.Logf("sidecar %d hosted shards %v", id, cl.hosted(s))
	}
}

func testProduceAnySidecar(t *testing.T, cl *sidecarCluster) {
	const partitions = 8
	ctx := testCtx(t, 5*time.Minute)
	s1, s2, s3 := cl.scs[1], cl.scs[2], cl.scs[3]
	topic := "cluster"
	createTopic(t, ctx, s2, topic, partitions, nil)
	h := history.New()
	var ps []*hproducer
	for id, s := range map[int32]*Sidecar{1: s1, 2: s2, 3: s3} {
		ps = append(ps, startProducer(ctx, s, h, fmt.Sprintf("p%d", id), topic, partitions,
			kgo.ClientID(fmt.Sprintf("producer-%d,diskless_az=zone-%d", id, id)), kgo.RecordDeliveryTimeout(30*time.Second)))
	}
	for _, p := range ps {
		p.waitAcked(t, ctx, 2_000)
	}
	for _, p := range ps {
		p.stopProducing()
	}
	finalRead(t, ctx, s3, topic, partitions, h)
}

// addrs is every sidecar's address, comma-separated.
func (sc *sidecarCluster) addrs() string {
	var out []string
	for _, id := range slices.Sorted(maps.Keys(sc.scs)) {
		out = append(out, sc.scs[id].Addr)
	}
	return strings.Join(out, ",")
}

func testClusterGroups(t *testing.T, cl *sidecarCluster) {
	const partitions, n = 6, 3000
	ctx := testCtx(t, 3*time.Minute)
	topic, group := "cluster-groups", "cluster-group"
	createTopic(t, ctx, cl.scs[1], topic, partitions, nil)
	want := produceValues(t, ctx, cl.scs[3], topic, partitions, 0, n)
	got := make(chan string, n*2)
	for _, id := range []int32{1, 2} {
		m := cl.scs[id].Client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(500*time.Millisecond),
			kgo.ClientID(fmt.Sprintf("member-%d,diskless_az=zone-%d", id, id)),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		go func() {
			for ctx.Err() == nil {
				fs := m.PollFetches(ctx)
				fs.EachRecord(func(r *kgo.Record) { got <- string(r.Value) })
			}
		}()
	}
	seen := map[string]int{}
	for len(seen) < len(want) {
		select {
		case v := <-got:
			seen[v]++
		case <-ctx.Done():
			t.Fatalf("the group read %d of %d records", len(seen), len(want))
		}
	}
	for _, v := range want {
		if seen[v] != 1 {
			t.Fatalf("record %q read %d times", v, seen[v])
		}
	}
}

func testClusterGroupNotCoordinator(t *testing.T, cl *sidecarCluster) {
	ctx := testCtx(t, 2*time.Minute)
	topic, group := "cluster-wrong-coordinator", "wrong-coordinator-group"
	createTopic(t, ctx, cl.scs[1], topic, 2, nil)
	// Every sidecar learns of the topic from the catalog's log; until the
	// coordinator has, a commit of it gets UNKNOWN_TOPIC_OR_PARTITION (as
	// from a Kafka broker whose metadata cache lags).
	for id, s := range cl.scs {
		waitFor(t, time.Minute, fmt.Sprintf("sidecar %d knowing %s", id, topic), func() bool { _, ok := topicOf(ctx, s, topic); return ok })
	}
	coordinatorOf := func() int32 {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.Version, fc.CoordinatorKeys = 4, []string{group}
		r := cl.scs[1].DialRaw().Request(fc).(*kmsg.FindCoordinatorResponse)
		if len(r.Coordinators) != 1 || r.Coordinators[0].ErrorCode != 0 || cl.scs[r.Coordinators[0].NodeID] == nil {
			t.Fatalf("FindCoordinator(%s) = %+v; want one of the sidecars", group, r.Coordinators)
		}
		return r.Coordinators[0].NodeID
	}
	commit := func(s *Sidecar) int16 {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Version, r.Group, r.Generation = 8, group, -1
		r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}}}
		return s.DialRaw().Request(r).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	join := func(s *Sidecar) int16 {
		return s.DialRaw().Request(joinReq(group, "", nil, 3000)).(*kmsg.JoinGroupResponse).ErrorCode
	}
	owner := coordinatorOf()
	for id, s := range cl.scs {
		if id == owner {
			continue
		}
		wantCode(t, fmt.Sprintf("OffsetCommit through sidecar %d (the coordinator is %d)", id, owner), commit(s), kerr.NotCoordinator)
		wantCode(t, fmt.Sprintf("JoinGroup through sidecar %d (the coordinator is %d)", id, owner), join(s), kerr.NotCoordinator)
	}
	wantCode(t, fmt.Sprintf("OffsetCommit through the coordinator, sidecar %d", owner), commit(cl.scs[owner]), nil)
	wantCode(t, fmt.Sprintf("JoinGroup through the coordinator, sidecar %d", owner), join(cl.scs[owner]), kerr.MemberIDRequired)
	if now := coordinatorOf(); now != owner {
		t.Fatalf("the group's shard moved from sidecar %d to %d during the test (nothing should move it)", owner, now)
	}
}

func testClusterKcatJava(t *testing.T, cl *sidecarCluster) {
	requireTool(t, "kcat")
	kafkatest.Require(t)
	ctx := testCtx(t, 4*time.Minute)
	path, want := realTextFile(t, 20_000)
	const topic = "cluster-kcat" // auto-created, num.partitions=1
	// Idempotent, as a producer must be for its order to survive a retry
	// (a shard may move while it produces: the sidecars follow the
	// metadata partitions' leaders).
	kcat(t, ctx, "-b", cl.addrs(), "-P", "-X", "enable.idempotence=true", "-t", topic, "-l", path)
	got := lines(kcat(t, ctx, "-b", cl.addrs(), "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n"))
	if !slices.Equal(got, want) {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Fatalf("kcat read %d lines back, produced %d; they differ from line %d", len(got), len(want), i)
	}
	stdout, stderr, err := kafkatest.Java(ctx, "Consume", "--bootstrap-server", cl.addrs(), "--topic", topic,
		"--group", "cluster-java", "--idle-timeout-ms", "8000")
	if err != nil {
		t.Fatalf("java Consume: %v\n%s", err, stderr)
	}
	recs, err := kafkatest.ParseRecords(stdout)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(want) {
		t.Fatalf("the Java consumer read %d records, want %d\n%s", len(recs), len(want), stderr)
	}
	for i, r := range recs {
		if string(r.Value) != want[i] {
			t.Fatalf("the Java consumer's record %d: %q, want %q", i, r.Value, want[i])
		}
	}
}

func testRetryThroughAnotherSidecar(t *testing.T, cl *sidecarCluster) {
	ctx := testCtx(t, 2*time.Minute)
	const topic = "cluster-retry"
	createTopic(t, ctx, cl.scs[1], topic, 1, nil)
	// A producer id, and a first batch acknowledged through sidecar 2.
	rc2 := cl.scs[2].DialRaw()
	init := kmsg.NewPtrInitProducerIDRequest()
	init.Version = 4
	init.TransactionTimeoutMillis = 60000
	init.ProducerID, init.ProducerEpoch = -1, -1
	ir := rc2.Request(init).(*kmsg.InitProducerIDResponse)
	if ir.ErrorCode != 0 || ir.ProducerID < 0 {
		t.Fatalf("InitProducerId: error %d id %d", ir.ErrorCode, ir.ProducerID)
	}
	now := time.Now().UnixMilli()
	mk := func(seq int32, n int) []byte {
		return batchtest.Make(batchtest.Options{BaseTimestamp: now, ProducerID: ir.ProducerID, ProducerEpoch: ir.ProducerEpoch, BaseSequence: seq},
			batchtest.Values(fmt.Sprint("r", seq), n)...)
	}
	waitProduced(t, ctx, rc2, topic, mk(0, 2), 0)
	// The next batch goes through sidecar 1, whose answer is lost: the
	// connection closes as soon as the request is written.
	second := mk(2, 3)
	lost := cl.scs[1].DialRaw()
	req := produceRequest(topic, second)
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("lost"))
	if err := lost.WriteRaw(f.AppendRequest(nil, req, 1)); err != nil {
		t.Fatal(err)
	}
	lost.conn.Close()
	// Its commit happens anyway: the end offset reaches 5.
	adm := kadm.NewClient(cl.scs[3].Client())
	waitFor(t, time.Minute, "the lost produce's commit", func() bool {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return false
		}
		o, _ := ends.Lookup(topic, 0)
		return o.Offset == 5
	})
	// The producer's retry through sidecar 3: the original offset, 2.
	waitProduced(t, ctx, cl.scs[3].DialRaw(), topic, second, 2)
	f2 := fetchRaw(t, cl.scs[2].DialRaw(), topic, 0, 0, 1<<20, 0)
	bases, counts := batchesIn(t, f2.RecordBatches)
	if f2.HighWatermark != 5 || !slices.Equal(bases, []int64{0, 2}) || !slices.Equal(counts, []int32{2, 3}) {
		t.Fatalf("stored: hwm %d batches %v counts %v; want the retried batch once, at 2", f2.HighWatermark, bases, counts)
	}
}

func testLongPollAcrossSidecars(t *testing.T, cl *sidecarCluster) {
	ctx := testCtx(t, 3*time.Minute)
	const topic, rounds = "cluster-longpoll", 10
	createTopic(t, ctx, cl.scs[1], topic, 1, nil)
	var id diskless.TopicID
	waitFor(t, time.Minute, "the topic in every sidecar's catalog", func() bool {
		for _, s := range cl.scs {
			var ok bool
			if id, ok = topicOf(ctx, s, topic); !ok {
				return false
			}
		}
		return true
	})
	shard := int(diskless.ShardFor(id, 0, clusterShards))
	var owner, waiter, via int32 = -1, -1, -1
	for _, n := range slices.Sorted(maps.Keys(cl.scs)) {
		switch {
		case cl.hostingNow(cl.scs[n])[shard]:
			owner = n
		case waiter < 0:
			waiter = n
		default:
			via = n
		}
	}
	if owner < 0 || waiter < 0 || via < 0 {
		t.Fatalf("shard %d: owner %d, no two other sidecars (waiter %d, via %d)", shard, owner, waiter, via)
	}
	t.Logf("shard %d hosted by sidecar %d; long-polls on sidecar %d, produce through sidecar %d", shard, owner, waiter, via)
	wrc, prc := cl.scs[waiter].DialRaw(), cl.scs[via].DialRaw()
	var worst time.Duration
	for i := range int64(rounds) {
		type result struct {
			p   kmsg.FetchResponseTopicPartition
			err error
			at  time.Time
		}
		done := make(chan result, 1)
		go func() {
			resp, err := wrc.TryRequest(fetchRequest(topic, 0, i, 1<<20, time.Minute))
			if err != nil {
				done <- result{err: err}
				return
			}
			done <- result{p: resp.(*kmsg.FetchResponse).Topics[0].Partitions[0], at: time.Now()}
		}()
		time.Sleep(300 * time.Millisecond) // let the fetch start waiting
		waitProduced(t, ctx, prc, topic, batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Values(fmt.Sprint("lp", i), 1)...), i)
		acked := time.Now()
		select {
		case r := <-done:
			mustNoErr(t, "long-poll fetch", r.err)
			bases, _ := batchesIn(t, r.p.RecordBatches)
			if r.p.ErrorCode != 0 || len(bases) != 1 || bases[0] != i {
				t.Fatalf("round %d: the long-poll answered error %d, batches %v; want the one at %d", i, r.p.ErrorCode, bases, i)
			}
			worst = max(worst, r.at.Sub(acked))
		case <-ctx.Done():
			t.Fatalf("round %d: a fetch waiting on sidecar %d was not woken by a commit through sidecar %d", i, waiter, via)
		}
	}
	// A figure, not a bound (the replica lag is measured by
	// TestBenchClusterProduce): the long-polls ended at most this long
	// after their produce was acknowledged.
	t.Logf("%d long-polls woken; the latest %v after the produce's acknowledgement", rounds, worst.Round(time.Millisecond))
}

func testProducerIDsAcrossSidecars(t *testing.T, cl *sidecarCluster) {
	// Past a block (1,000 ids, record 105) on every sidecar: each asks
	// the owner of shard 0 for a second one.
	const perSidecar = 1_100
	type got struct {
		node int32
		ids  []int64
		err  error
	}
	out := make(chan got, len(cl.scs))
	for n, s := range cl.scs {
		rc := s.DialRaw()
		go func() {
			g := got{node: n}
			for range perSidecar {
				init := kmsg.NewPtrInitProducerIDRequest()
				init.Version = 4
				init.TransactionTimeoutMillis = 60000
				init.ProducerID, init.ProducerEpoch = -1, -1
				resp, err := rc.TryRequest(init)
				if err != nil {
					g.err = err
					break
				}
				ir := resp.(*kmsg.InitProducerIDResponse)
				if ir.ErrorCode != 0 || ir.ProducerID < 0 {
					g.err = fmt.Errorf("InitProducerId: error %d, id %d", ir.ErrorCode, ir.ProducerID)
					break
				}
				g.ids = append(g.ids, ir.ProducerID)
			}
			out <- g
		}()
	}
	seen := map[int64]int32{}
	for range cl.scs {
		g := <-out
		if g.err != nil {
			t.Fatalf("through sidecar %d: %v", g.node, g.err)
		}
		for _, id := range g.ids {
			if other, dup := seen[id]; dup {
				t.Fatalf("producer id %d handed out by sidecar %d and by sidecar %d", id, other, g.node)
			}
			seen[id] = g.node
		}
	}
	t.Logf("%d producer ids through %d sidecars, each once", len(seen), len(cl.scs))
}

func testClusterDisablement(t *testing.T, cl *sidecarCluster) {
	kafkatest.Require(t)
	ctx := testCtx(t, 3*time.Minute)
	const topic = "cluster-disable"
	createTopic(t, ctx, cl.scs[1], topic, 1, nil)
	ids := slices.Sorted(maps.Keys(cl.scs))
	for i, n := range ids {
		waitProduced(t, ctx, cl.scs[n].DialRaw(), topic,
			batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Values(fmt.Sprint("d", n), 1)...), int64(i))
	}
	// Through a sidecar that may not host shard 0: the alter is forwarded
	// to the one that does (the controller), which drives the disablement.
	tool(t, ctx, cl.scs[ids[len(ids)-1]], "kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", topic,
		"--add-config", "diskless.enable=false,diskless.disable.policy=retain")
	for _, n := range ids {
		if st := waitState(t, cl.scs[n], topic, "DISABLED", time.Minute); st.Epoch != 1 || st.Policy != "retain" {
			t.Fatalf("sidecar %d: %+v, want DISABLED at epoch 1, policy retain", n, st)
		}
	}
	for _, n := range ids {
		p := produceRaw(t, cl.scs[n].DialRaw(), topic, batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Values("late", 1)...))[0]
		if p.ErrorCode != kerr.PolicyViolation.Code {
			t.Fatalf("produce through sidecar %d to a DISABLED topic: error %d, want POLICY_VIOLATION", n, p.ErrorCode)
		}
		f := fetchRaw(t, cl.scs[n].DialRaw(), topic, 0, 0, 1<<20, 0)
		if bases, _ := batchesIn(t, f.RecordBatches); f.ErrorCode != 0 || len(bases) != len(ids) {
			t.Fatalf("fetch through sidecar %d after the disablement: error %d, batches %v; want the %d records kept", n, f.ErrorCode, bases, len(ids))
		}
	}
}

// waitProduced sends batch to partition 0 of topic on rc until it is
// answered without a retriable error, and checks its base offset.
func waitProduced(t *testing.T, ctx context.Context, rc *RawConn, topic string, batch []byte, base int64) {
	t.Helper()
	for {
		p := produceRaw(t, rc, topic, batch)[0]
		if p.ErrorCode == 0 {
			if p.BaseOffset != base {
				t.Fatalf("produced at %d, want %d", p.BaseOffset, base)
			}
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("produce: error %d", p.ErrorCode)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// hosted returns the shards s logged it took over.
func (sc *sidecarCluster) hosted(s *Sidecar) []int {
	var out []int
	shardLines(s.Logs(), func(hosting bool, shard int) {
		if hosting {
			out = append(out, shard)
		}
	})
	return out
}

// produceRequest is a Produce request (v9, acks all, 30 s) of batch to
// topic's partition 0.
func produceRequest(topic string, batch []byte) *kmsg.ProduceRequest {
	return produceRequestTo(topic, map[int32][]byte{0: batch})
}

// produceRequestTo is a Produce request (v9, acks all, 30 s) of a batch
// per partition of topic, the partitions in ascending order.
func produceRequestTo(topic string, batches map[int32][]byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for _, p := range slices.Sorted(maps.Keys(batches)) {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, batches[p]
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// TestClusterFailover fails parts of a cluster of three sidecars under
// load, producers and consumers on every sidecar, each checked with
// internal/history (nothing acknowledged lost, moved or duplicated, no
// offset assigned twice) and timed (producers resume by themselves:
// the longest gap between acknowledgements stays under the 30 s,
// the producer through a sidecar cut off by the network included, whose
// client must first give that sidecar up: checkResumed, cutProducerOpts):
//
//   - SidecarKill: a sidecar hosting shards SIGKILLed; its shards move to
//     the others within the session timeout; its producer's client, told
//     of the others by Metadata, goes on through them; a replacement
//     started later rejoins and takes its shards back.
//     The replacement runs on a host of its own (a network namespace,
//     netHost), for NetworkPartition.
//   - NetworkPartition: that sidecar, hosting shards, cut off from Kafka
//     and the other sidecars (and its clients) by its veth going down,
//     then healed: the others take its shards over and go on; its
//     clients go on through the others; healed, it rejoins, its claims
//     on its shards fenced, and takes them back; it never exits.
//   - BrokerKill: the broker leading a metadata partition SIGKILLed: the
//     shard moves to the sidecar next to the new leader.
func TestClusterFailover(t *testing.T) {
	balanceSharedKafkaAfter(t, sharedKafka(t))
	cl := startSidecarCluster(t, 3)
	t.Run("SidecarKill", func(t *testing.T) { testClusterSidecarKill(t, cl) })
	t.Run("NetworkPartition", func(t *testing.T) { testClusterPartition(t, cl) })
	t.Run("BrokerKill", func(t *testing.T) { testClusterBrokerKill(t, cl) })
}

// load is producers and group consumers through every sidecar.
type load struct {
	ps map[int32]*hproducer
	cs map[int32]*hconsumer
}

// loadOnAll starts a producer and a member of one consumer group through
// each sidecar of cl on topic, each told its sidecar's zone.
func loadOnAll(ctx context.Context, t *testing.T, cl *sidecarCluster, h *history.History, topic string, partitions int32) *load {
	return loadOnAllGroup(ctx, t, cl, h, topic, partitions, "group-"+topic)
}

// loadOnAllGroup is loadOnAll with the consumers in group, every producer
// given opts too.
func loadOnAllGroup(ctx context.Context, t *testing.T, cl *sidecarCluster, h *history.History, topic string, partitions int32, group string,
	opts ...kgo.Opt) *load {
	l := &load{ps: map[int32]*hproducer{}, cs: map[int32]*hconsumer{}}
	for id, s := range cl.scs {
		l.ps[id] = startProducer(ctx, s, h, fmt.Sprintf("p%d-%s", id, topic), topic, partitions,
			append([]kgo.Opt{kgo.ClientID(fmt.Sprintf("producer-%d,diskless_az=zone-%d", id, id)), kgo.RecordDeliveryTimeout(2 * time.Minute)},
				opts...)...)
		l.cs[id] = startGroupConsumer(ctx, t, s, h, fmt.Sprintf("c%d", id), group, topic,
			append([]kgo.Opt{kgo.ClientID(fmt.Sprintf("consumer-%d,diskless_az=zone-%d", id, id))}, failoverMemberOpts...)...)
	}
	return l
}

// groupOnShard returns a group id starting with prefix whose coordinator
// is shard (diskless.GroupShardFor).
func groupOnShard(prefix string, shard int32) string {
	for i := 0; ; i++ {
		if g := fmt.Sprintf("%s-%d", prefix, i); diskless.GroupShardFor(g, clusterShards) == shard {
			return g
		}
	}
}

// waitReading waits until every producer has n records acknowledged and
// every member of the group has read records: the load runs in full.
func (l *load) waitReading(t *testing.T, ctx context.Context, n int64) {
	t.Helper()
	for _, p := range l.ps {
		p.waitAcked(t, ctx, n)
	}
	for id, c := range l.cs {
		for c.lastRead.Load() == 0 {
			if ctx.Err() != nil {
				t.Fatalf("the group's member through sidecar %d read nothing", id)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// cutProducerOpts are the settings of NetworkPartition's producers: kgo's
// request timeout overhead (how long past a request's own timeout a
// client waits for an answer before it gives the connection up) at 5 s
// instead of kgo's 10 s. A client of a sidecar cut off by the network
// learns nothing until then, and no server can shorten it (nothing the
// cut sidecar sends crosses the cut; a killed process, by contrast, has
// its connections reset at once): the produce request in flight at the
// cut fails at its 10 s timeout plus the overhead, and the Metadata
// request the client then sends goes round robin over the brokers it
// knows — to the same silent sidecar on a connection still open (or to
// its seed, the same address), another overhead each time — before a
// live sidecar's answer moves it (then its records go through within
// about a second). With kgo's defaults that is 20 s, 30 s or 40 s from
// the cut, past the 30 s in the last two (30.4–30.6 s measured);
// with 5 s, 15 s, 20 s or 25 s (DESIGN §Shard placement). A client that
// still reaches the cut sidecar is told of the others by its Metadata
// once its membership lapsed (checkCutSidecar).
var cutProducerOpts = []kgo.Opt{kgo.RequestTimeoutOverhead(5 * time.Second)}

// failoverMemberOpts are the group members' settings in the failover
// tests: a 10 s session timeout and a 20 s rebalance timeout instead of
// kgo's 45 s and 60 s. Under Kafka's own rules a member that stops
// answering — a pending member (KIP-394) whose JoinGroup came late
// through a half-open connection, or a member its client dropped, taken
// in over a shard move — holds the group's rebalance until its session
// expires, or its sync until the rebalance timeout, and two such holds
// can follow each other; with kgo's defaults one alone is past the
// issue's 30 s, with these two are 20 s plus kgo's 3 s heartbeat
// interval (DESIGN §Consumer groups, a member that stops answering).
var failoverMemberOpts = []kgo.Opt{kgo.SessionTimeout(10 * time.Second), kgo.RebalanceTimeout(20 * time.Second)}

// checkResumed stops the load and checks that each producer and the group
// as a whole resumed within 30 s of since (the longest time without an
// acknowledgement, and without a record read by any member, up to the
// stop), the bound. The group is given up to 30 s to read once
// more before the load stops, so a group stalled at the end fails however
// soon the test got here. Each member's own longest gap is logged.
func (l *load) checkResumed(t *testing.T, since time.Time) {
	t.Helper()
	waitFrom := time.Now()
	for time.Since(waitFrom) < 30*time.Second && !slices.ContainsFunc(slices.Collect(maps.Values(l.cs)), func(c *hconsumer) bool {
		return c.lastRead.Load() > waitFrom.UnixNano()
	}) {
		time.Sleep(50 * time.Millisecond)
	}
	for id, p := range l.ps {
		p.stopProducing()
		gap := p.longestGap(since)
		t.Logf("producer through sidecar %d: longest gap between acknowledgements %v; failures %v", id, gap.Round(time.Millisecond), p.failures())
		const limit = 30 * time.Second
		if gap > limit {
			t.Errorf("producer through sidecar %d waited %v for an acknowledgement (limit %v)", id, gap, limit)
		}
	}
	var reads []time.Time
	stoppedAt := time.Now()
	for id, c := range l.cs {
		own := c.stopConsuming()
		reads = append(reads, own...)
		n, gap, _ := readGap(own, since)
		t.Logf("the group's member through sidecar %d: %d fetches with records since, longest gap before its last %v", id, n, gap.Round(time.Millisecond))
	}
	slices.SortFunc(reads, func(a, b time.Time) int { return a.Compare(b) })
	n, gap, prev := readGap(reads, since)
	// Up to the stop too: a group that read nothing since is a gap.
	gap = max(gap, stoppedAt.Sub(prev))
	t.Logf("the consumer group: %d fetches with records since, longest gap between them %v", n, gap.Round(time.Millisecond))
	if gap > 30*time.Second {
		t.Errorf("the consumer group read nothing for %v", gap)
	}
}

// readGap returns how many of reads (in time order) came after since,
// the longest time without one from since to the last of them, and the
// last (since if none).
func readGap(reads []time.Time, since time.Time) (n int, gap time.Duration, last time.Time) {
	last = since
	for _, at := range reads {
		if at.After(since) {
			gap, last = max(gap, at.Sub(last)), at
			n++
		}
	}
	return n, gap, last
}

// hconsumer is a member of a consumer group recording what it reads in a
// history.History.
type hconsumer struct {
	cl    *kgo.Client
	done  chan struct{}
	reads []time.Time // when each fetch with records came
	// lastRead is when the last fetch with records came (Unix ns; 0:
	// none yet), for waitReading and checkResumed.
	lastRead atomic.Int64
}

// startGroupConsumer starts a member of group reading topic through s,
// each record it reads observed in h as name's. Its client's log of the
// group (memberLog) is printed if t fails.
func startGroupConsumer(ctx context.Context, t *testing.T, s *Sidecar, h *history.History, name, group, topic string, opts ...kgo.Opt) *hconsumer {
	c := &hconsumer{done: make(chan struct{})}
	ml := &memberLog{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the group's member %s (%s), its client's log of the group:\n%s", name, s.Addr, ml.buf.String())
		}
	})
	c.cl = s.Client(append([]kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithLogger(ml), kgo.WithHooks(ml)}, opts...)...)
	go func() {
		defer close(c.done)
		for {
			fs := c.cl.PollFetches(ctx)
			if fs.IsClientClosed() || ctx.Err() != nil {
				return
			}
			n := 0
			fs.EachRecord(func(r *kgo.Record) {
				h.Observe(name, history.Partition{Topic: r.Topic, Partition: r.Partition}, r.Offset, string(r.Value))
				n++
			})
			if n > 0 {
				now := time.Now()
				c.reads = append(c.reads, now)
				c.lastRead.Store(now.UnixNano())
			}
		}
	}()
	return c
}

// memberLog is a group member's client log as far as the group goes, kept
// for a failure (a stalled group cannot be explained without it): kgo's
// info lines and above (joins, syncs, assignments, heartbeat errors),
// its debug lines of coordinator lookups, retried requests and broken
// connections, and every group request written and response read (broker,
// API, error), each line stamped with the wall clock.
type memberLog struct{ buf lockedBuffer }

// memberLogDebug are the kgo debug lines memberLog keeps.
var memberLogDebug = map[string]bool{
	"prepared to issue find coordinator request":   true,
	"retrying request":                             true,
	"read from broker errored, killing connection": true,
	"opening connection to broker":                 true,
}

// groupKeys are the APIs of the group's coordinator whose requests
// memberLog records.
var groupKeys = map[int16]bool{8: true, 9: true, 10: true, 11: true, 12: true, 13: true, 14: true}

func (l *memberLog) Level() kgo.LogLevel { return kgo.LogLevelDebug }

func (l *memberLog) Log(level kgo.LogLevel, msg string, kvs ...any) {
	if level == kgo.LogLevelDebug && !memberLogDebug[msg] {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", time.Now().UTC().Format("15:04:05.000"), level, msg)
	for i := 0; i+1 < len(kvs); i += 2 {
		fmt.Fprintf(&b, " %v=%v", kvs[i], kvs[i+1])
	}
	b.WriteByte('\n')
	l.buf.Write([]byte(b.String()))
}

func (l *memberLog) OnBrokerWrite(meta kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if groupKeys[key] {
		l.Log(kgo.LogLevelInfo, "wrote "+kmsg.NameForKey(key), "broker", meta.NodeID, "err", err)
	}
}

func (l *memberLog) OnBrokerRead(meta kgo.BrokerMetadata, key int16, _ int, readWait, timeToRead time.Duration, err error) {
	if groupKeys[key] {
		l.Log(kgo.LogLevelInfo, "read "+kmsg.NameForKey(key), "broker", meta.NodeID, "after", (readWait + timeToRead).Round(time.Millisecond), "err", err)
	}
}

// stopConsuming closes the member and returns when its fetches came.
func (c *hconsumer) stopConsuming() []time.Time {
	c.cl.Close()
	<-c.done
	return c.reads
}

func testClusterSidecarKill(t *testing.T, cl *sidecarCluster) {
	const partitions = 6
	ctx := testCtx(t, 8*time.Minute)
	topic := "failover-sidecar"
	createTopic(t, ctx, cl.scs[1], topic, partitions, nil)
	h := history.New()
	l := loadOnAll(ctx, t, cl, h, topic, partitions)
	l.waitReading(t, ctx, 2_000)
	victim := int32(3)
	killedAt := time.Now()
	cl.scs[victim].Kill()
	cl.waitBrokers(1, 2)
	t.Logf("sidecar %d SIGKILLed; gone from the others' Metadata after %v", victim, time.Since(killedAt).Round(time.Millisecond))
	for _, p := range l.ps {
		p.waitAcked(t, ctx, p.acked.Load()+2_000)
	}
	// A replacement of the dead sidecar: an empty data.dir, a new port,
	// on a host of its own where the machine allows (NetworkPartition).
	if netHostOK() {
		cl.startOnHost(victim)
	} else {
		cl.start(victim)
	}
	cl.waitBrokers(1, 2, 3)
	for _, p := range l.ps {
		p.waitAcked(t, ctx, p.acked.Load()+1_000)
	}
	l.checkResumed(t, killedAt)
	finalRead(t, ctx, cl.scs[2], topic, partitions, h)
}

func testClusterPartition(t *testing.T, cl *sidecarCluster) {
	requireNetHost(t)
	const partitions = 6
	ctx := testCtx(t, 8*time.Minute)
	victim := int32(3)
	if cl.hosts[victim] == nil || !cl.scs[victim].Alive() {
		// SidecarKill did not leave it on a host of its own: move it.
		if cl.scs[victim].Alive() {
			cl.scs[victim].Stop()
		}
		cl.waitBrokers(1, 2)
		cl.startOnHost(victim)
		cl.waitBrokers(1, 2, 3)
	}
	cl.waitSettled()
	host, s := cl.hosts[victim], cl.scs[victim]
	hosted := slices.Sorted(maps.Keys(cl.hostingNow(s)))
	if len(hosted) == 0 {
		// Its broker leads no metadata partition: a loaded machine's
		// controller fenced brokers meanwhile (heartbeats timed out) and
		// their leaderships moved. The preferred leaders (spread over the
		// brokers when the topic was made) take them back.
		set := kadm.TopicsSet{}
		for p := range int32(clusterShards) {
			set.Add(cl.meta, p)
		}
		_, err := cl.k.Admin(t).ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
		mustNoErr(t, "ElectLeaders", err)
		waitFor(t, time.Minute, fmt.Sprintf("sidecar %d hosting a shard after a preferred leader election", victim), func() bool {
			return len(cl.hostingNow(s)) > 0
		})
		cl.waitSettled()
		hosted = slices.Sorted(maps.Keys(cl.hostingNow(s)))
	}
	if len(hosted) == 0 {
		t.Fatalf("sidecar %d hosts no shard: the cut would show nothing", victim)
	}
	topic := "failover-partition"
	createTopic(t, ctx, cl.scs[1], topic, partitions, nil)
	// The cut sidecar is sent a produce of its own, outside the load's
	// history (checkCutSidecar).
	probe := topic + "-probe"
	createTopic(t, ctx, cl.scs[1], probe, partitions, nil)
	h := history.New()
	// The group's coordinator is on the sidecar cut off: its members
	// have to find it elsewhere and join the group anew there.
	group := groupOnShard("group-"+topic, int32(hosted[0]))
	l := loadOnAllGroup(ctx, t, cl, h, topic, partitions, group, cutProducerOpts...)
	l.waitReading(t, ctx, 2_000)
	// A client that still reaches the sidecar through the cut: a network
	// of clients routed to its host by a veth of its own (not cut).
	dialCut, _ := host.ClientNet(1)
	_, port, err := net.SplitHostPort(s.Addr)
	mustNoErr(t, "the cut sidecar's port", err)
	cutAddr := host.HostAddr(port)
	cutAt := time.Now()
	host.Cut()
	cl.waitBrokers(1, 2)
	t.Logf("sidecar %d (hosting shards %v, %s's coordinator among them) cut off; gone from the others' Metadata after %v",
		victim, hosted, group, time.Since(cutAt).Round(time.Millisecond))
	// Every producer, its own included, goes on through the others.
	for _, p := range l.ps {
		p.waitAcked(t, ctx, p.acked.Load()+2_000)
	}
	t.Logf("every producer acknowledged 2,000 more records %v after the cut", time.Since(cutAt).Round(time.Millisecond))
	if !s.Alive() {
		t.Fatalf("sidecar %d exited while cut off", victim)
	}
	checkCutListOffsets(t, ctx, cl, topic, partitions, hosted, dialCut, cutAddr)
	checkCutSidecar(t, ctx, cl, victim, topic, probe, partitions, hosted, dialCut, cutAddr)
	healAt := time.Now()
	host.Heal()
	cl.waitBrokers(1, 2, 3)
	t.Logf("healed; sidecar %d back in every sidecar's Metadata after %v", victim, time.Since(healAt).Round(time.Millisecond))
	cl.waitSettled()
	t.Logf("placement settled %v after the heal: sidecar %d hosts shards %v", time.Since(healAt).Round(time.Millisecond),
		victim, slices.Sorted(maps.Keys(cl.hostingNow(s))))
	for _, p := range l.ps {
		p.waitAcked(t, ctx, p.acked.Load()+1_000)
	}
	l.checkResumed(t, cutAt)
	finalRead(t, ctx, cl.scs[1], topic, partitions, h)
	for id, s := range cl.scs {
		if !s.Alive() {
			t.Errorf("sidecar %d exited", id)
		}
	}
}

// checkCutListOffsets asks a sidecar cut off from Kafka and the other
// sidecars — through addr, dialed with dial, a client that still reaches
// it — for ListOffsets latest of every partition of topic on a shard it
// hosted at the cut (hosted), which the others took over and committed
// to: its answer must be a retriable error or an offset no lower than
// what the others' owner answers (what they acknowledged), never its
// state as of the cut (DESIGN §Fencing, the read-index rule; before it,
// the cut sidecar answered the high watermark of the cut).
func checkCutListOffsets(t *testing.T, ctx context.Context, cl *sidecarCluster, topic string, partitions int32, hosted []int,
	dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string) {
	t.Helper()
	id, ok := topicOf(ctx, cl.scs[1], topic)
	if !ok {
		t.Fatalf("topic %s unknown to sidecar 1", topic)
	}
	ends, err := kadm.NewClient(cl.scs[1].Client()).ListEndOffsets(ctx, topic)
	mustNoErr(t, "ListEndOffsets through sidecar 1", err)
	c, err := dial(ctx, "tcp", addr)
	mustNoErr(t, "dial the cut sidecar", err)
	defer c.Close()
	rc := &RawConn{t: t, conn: c}
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = 7, -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	acked := map[int32]int64{}
	for p := range partitions {
		if !slices.Contains(hosted, int(diskless.ShardFor(id, p, clusterShards))) {
			continue
		}
		e, ok := ends.Lookup(topic, p)
		if !ok || e.Err != nil {
			t.Fatalf("ListEndOffsets %s/%d through sidecar 1: %+v", topic, p, e)
		}
		acked[p] = e.Offset
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	if len(rt.Partitions) == 0 {
		t.Fatalf("no partition of %s on the shards %v the cut sidecar hosted", topic, hosted)
	}
	req.Topics = append(req.Topics, rt)
	t0 := time.Now()
	resp, err := rc.TryRequest(req)
	mustNoErr(t, "ListOffsets at the cut sidecar", err)
	for _, rt := range resp.(*kmsg.ListOffsetsResponse).Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				if !kerr.IsRetriable(err) {
					t.Errorf("ListOffsets latest of %s/%d at the cut sidecar: %v, not retriable", topic, rp.Partition, err)
				}
				t.Logf("ListOffsets latest of %s/%d at the cut sidecar: %v (the others acknowledged up to %d)", topic, rp.Partition, err, acked[rp.Partition])
				continue
			}
			if rp.Offset < acked[rp.Partition] {
				t.Errorf("ListOffsets latest of %s/%d at the cut sidecar: %d, below the %d the others acknowledged (its state as of the cut)",
					topic, rp.Partition, rp.Offset, acked[rp.Partition])
			}
		}
	}
	t.Logf("the cut sidecar answered ListOffsets of %d partitions in %v", len(rt.Partitions), time.Since(t0).Round(time.Millisecond))
}

// checkCutSidecar asks victim, a sidecar cut off from Kafka and the other
// sidecars long enough for its membership to lapse — through addr,
// dialed with dial, a client that still reaches it — for Metadata, which
// must name neither it as a broker nor it as a leader of topic's
// partitions (it names the others of its last view: server.Cluster's
// Lapsed; before, it named itself leader of a third of them); then sends
// it a Produce (acks=all, 5 s timeout) to a partition of probe on a shard
// it hosted at the cut (hosted), which must be answered with a retriable
// error (the request's timeout bounds the wait: once, unbounded, it went
// unanswered for over 30 s), and a Fetch of it, which must be answered;
// and FindCoordinator of a group and a transactional id on each shard it
// hosted, which must not name it (COORDINATOR_NOT_AVAILABLE or another
// sidecar: server.TestFindCoordinatorLapsed; before, it named itself, and
// its clients' coordinators stayed on it).
// probe is not in the load's history: the produce may yet be stored.
func checkCutSidecar(t *testing.T, ctx context.Context, cl *sidecarCluster, victim int32, topic, probe string, partitions int32, hosted []int,
	dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string) {
	t.Helper()
	c, err := dial(ctx, "tcp", addr)
	mustNoErr(t, "dial the cut sidecar", err)
	defer c.Close()
	rc := &RawConn{t: t, conn: c}
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.Version = 12
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := rc.TryRequest(mreq)
	mustNoErr(t, "Metadata at the cut sidecar", err)
	md := mresp.(*kmsg.MetadataResponse)
	var brokers []int32
	for _, b := range md.Brokers {
		brokers = append(brokers, b.NodeID)
	}
	leaders := map[int32]int32{}
	for _, mt := range md.Topics {
		for _, mp := range mt.Partitions {
			leaders[mp.Partition] = mp.Leader
		}
	}
	t.Logf("the cut sidecar's Metadata: brokers %v, controller %d, leaders of %s by partition %v", brokers, md.ControllerID, topic, leaders)
	if slices.Contains(brokers, victim) || len(brokers) == 0 || md.ControllerID == victim || slices.Contains(slices.Collect(maps.Values(leaders)), victim) ||
		len(leaders) != int(partitions) {
		t.Errorf("the cut sidecar %d, its membership lapsed, names itself (or no one) in its Metadata: brokers %v, controller %d, leaders %v",
			victim, brokers, md.ControllerID, leaders)
	}

	for _, typ := range []int8{0, 1} {
		freq := kmsg.NewPtrFindCoordinatorRequest()
		freq.Version, freq.CoordinatorType = 4, typ
		for _, sh := range hosted {
			freq.CoordinatorKeys = append(freq.CoordinatorKeys, groupOnShard("cut-find", int32(sh)))
		}
		fresp, err := rc.TryRequest(freq)
		mustNoErr(t, "FindCoordinator at the cut sidecar", err)
		for _, c := range fresp.(*kmsg.FindCoordinatorResponse).Coordinators {
			t.Logf("the cut sidecar's FindCoordinator (key type %d) of %s on shard %d: node %d, %v", typ, c.Key,
				diskless.GroupShardFor(c.Key, clusterShards), c.NodeID, kerr.ErrorForCode(c.ErrorCode))
			if c.NodeID == victim || c.ErrorCode != 0 && !kerr.IsRetriable(kerr.ErrorForCode(c.ErrorCode)) {
				t.Errorf("the cut sidecar %d, its membership lapsed, answers FindCoordinator (key type %d) of %s: node %d, %v; want another sidecar or a retriable error",
					victim, typ, c.Key, c.NodeID, kerr.ErrorForCode(c.ErrorCode))
			}
		}
	}

	id, ok := topicOf(ctx, cl.scs[1], probe)
	if !ok {
		t.Fatalf("topic %s unknown to sidecar 1", probe)
	}
	part := int32(-1)
	for p := range partitions {
		if slices.Contains(hosted, int(diskless.ShardFor(id, p, clusterShards))) {
			part = p
			break
		}
	}
	if part < 0 {
		t.Fatalf("no partition of %s on the shards %v the cut sidecar hosted", probe, hosted)
	}
	preq := produceRequest(probe, batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Values("probe", 1)...))
	preq.TimeoutMillis = 5000
	preq.Topics[0].Partitions[0].Partition = part
	t0 := time.Now()
	presp, err := rc.TryRequest(preq)
	mustNoErr(t, "Produce at the cut sidecar (unanswered)", err)
	code := presp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	t.Logf("the cut sidecar answered a Produce to %s/%d (shard %d, 5 s timeout) in %v: %v", probe, part,
		diskless.ShardFor(id, part, clusterShards), time.Since(t0).Round(time.Millisecond), kerr.ErrorForCode(code))
	if err := kerr.ErrorForCode(code); err == nil || !kerr.IsRetriable(err) {
		t.Errorf("Produce at the cut sidecar: %v, want a retriable error (it cannot commit)", err)
	}

	t0 = time.Now()
	fresp, err := rc.TryRequest(fetchRequest(probe, part, 0, 1<<20, 500*time.Millisecond))
	mustNoErr(t, "Fetch at the cut sidecar (unanswered)", err)
	fr := fresp.(*kmsg.FetchResponse)
	if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
		t.Fatalf("Fetch at the cut sidecar: %+v", fr)
	}
	t.Logf("the cut sidecar answered a Fetch of %s/%d (500 ms wait) in %v: %v", probe, part, time.Since(t0).Round(time.Millisecond),
		kerr.ErrorForCode(fr.Topics[0].Partitions[0].ErrorCode))
}

func testClusterBrokerKill(t *testing.T, cl *sidecarCluster) {
	const partitions = 6
	ctx := testCtx(t, 8*time.Minute)
	topic := "failover-broker"
	createTopic(t, ctx, cl.scs[1], topic, partitions, nil)
	h := history.New()
	l := loadOnAll(ctx, t, cl, h, topic, partitions)
	l.waitReading(t, ctx, 2_000)
	adm := cl.k.Admin(t)
	md, err := adm.Metadata(ctx, cl.meta)
	mustNoErr(t, "Metadata", err)
	leader := md.Topics[cl.meta].Partitions[0].Leader
	if leader < 0 {
		t.Fatalf("metadata partition 0 without a leader: %+v", md.Topics[cl.meta])
	}
	killedAt := time.Now()
	if err := cl.k.Kill(leader); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cl.k.Restart(leader); err != nil {
			t.Error(err)
		}
	}()
	for {
		md, err := adm.Metadata(ctx, cl.meta)
		mustNoErr(t, "Metadata", err)
		if l := md.Topics[cl.meta].Partitions[0].Leader; l >= 0 && l != leader {
			t.Logf("broker %d (leader of metadata partition 0) SIGKILLed; new leader %d after %v", leader, l, time.Since(killedAt).Round(time.Millisecond))
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no new leader of metadata partition 0")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, p := range l.ps {
		p.waitAcked(t, ctx, p.acked.Load()+2_000)
	}
	l.checkResumed(t, killedAt)
	finalRead(t, ctx, cl.scs[2], topic, partitions, h)
	for id, s := range cl.scs {
		if !s.Alive() {
			t.Errorf("sidecar %d exited", id)
		}
	}
}

// topicOf returns topic's id as s's Metadata names it.
func topicOf(ctx context.Context, s *Sidecar, topic string, opts ...kgo.Opt) (diskless.TopicID, bool) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.Addr)}, opts...)...)
	if err != nil {
		return diskless.TopicID{}, false
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		return diskless.TopicID{}, false
	}
	td, ok := md.Topics[topic]
	return diskless.TopicID(td.ID), ok && td.Err == nil
}

// TestClusterZones: clients told their zone by their address
// (diskless.client.zone.cidrs), two zones by CIDR of network namespaces:
// the three sidecars run on one host of the test's own (a namespace), and
// each zone's clients in a namespace of their own joined to it by a veth
// (netHost.ClientNet), so a sidecar sees each client's own address — zone
// a 10.214.1.0/24 with sidecars 1 and 2, zone b 10.214.2.0/24 with
// sidecar 3, the test's network 10.214.250.0/24 in none. A zone-a client
// is only ever told of zone-a sidecars as leaders while one is alive,
// spread over both; a zone-b client of sidecar 3 alone; once sidecar 3 is
// dead, of the live ones, never of it; a client of no zone of all.
func TestClusterZones(t *testing.T) {
	t.Parallel()
	requireNetHost(t)
	cl := startSidecarClusterLAN(t, 3, map[int32]string{1: "a", 2: "a", 3: "b"},
		"diskless.client.zone.cidrs=a=10.214.1.0/24,b=10.214.2.0/24")
	ctx := testCtx(t, 3*time.Minute)
	dialA, addrA := cl.lan.ClientNet(1)
	dialB, addrB := cl.lan.ClientNet(2)
	t.Logf("zone a's clients at %s, zone b's at %s, the sidecars at %s, %s, %s", addrA, addrB, cl.scs[1].Addr, cl.scs[2].Addr, cl.scs[3].Addr)
	const topic, partitions = "zones", 12
	createTopic(t, ctx, cl.scs[1], topic, partitions, nil, cl.clientOpts()...)
	for id, s := range cl.scs {
		waitFor(t, time.Minute, fmt.Sprintf("the topic in sidecar %d's catalog", id), func() bool {
			_, ok := topicOf(ctx, s, topic, cl.clientOpts()...)
			return ok
		})
	}
	leaders := func(dial func(context.Context, string, string) (net.Conn, error), via *Sidecar) map[int32]int {
		t.Helper()
		c, err := kgo.NewClient(kgo.SeedBrokers(via.Addr), kgo.Dialer(dial))
		mustNoErr(t, "client", err)
		defer c.Close()
		md, err := kadm.NewClient(c).Metadata(ctx, topic)
		mustNoErr(t, "Metadata", err)
		out := map[int32]int{}
		for _, p := range md.Topics[topic].Partitions {
			out[p.Leader]++
		}
		return out
	}
	for _, via := range []int32{1, 2, 3} {
		if got := leaders(dialA, cl.scs[via]); got[3] != 0 || got[1] == 0 || got[2] == 0 {
			t.Fatalf("a zone-a client asking sidecar %d: leaders %v, want sidecars 1 and 2 only, both", via, got)
		}
		if got := leaders(dialB, cl.scs[via]); got[3] != partitions {
			t.Fatalf("a zone-b client asking sidecar %d: leaders %v, want sidecar 3 only", via, got)
		}
		if got := leaders(cl.lanDial, cl.scs[via]); len(got) != 3 {
			t.Fatalf("a client of no zone asking sidecar %d: leaders %v, want all three", via, got)
		}
	}
	cl.scs[3].Kill()
	cl.waitBrokers(1, 2)
	if got := leaders(dialB, cl.scs[1]); got[3] != 0 || len(got) != 2 {
		t.Fatalf("a zone-b client with its zone's sidecar dead: leaders %v, want sidecars 1 and 2", got)
	}
	cl.scs[1].Kill()
	cl.waitBrokers(2)
	if got := leaders(dialA, cl.scs[2]); got[2] != partitions {
		t.Fatalf("a zone-a client with one zone-a sidecar left: leaders %v, want sidecar 2 only", got)
	}
}

// TestClusterCoordinatorFailover SIGKILLs the broker that is the Kafka
// group coordinator of the sidecars' membership group, under load through
// every sidecar (a producer and a member of one consumer group each,
// checked with internal/history). The sidecars run with a 3 s session
// timeout, shorter than any failover of a group coordinator here (a
// killed broker is fenced after the brokers' 4 s session timeout, then
// the new coordinator loads the group): so no heartbeat is answered for
// more than a session timeout on every sidecar at once — what happened
// once under load with the default 8 s, when every sidecar dropped out of
// the group and released all its shards. A sidecar keeps its view,
// unconfirmed, and its shards through it (DESIGN §Membership): no shard
// whose metadata partition the killed broker did not lead is released by
// anyone, nothing acknowledged is lost or duplicated, and producers and
// the group resume within 30 s.
func TestClusterCoordinatorFailover(t *testing.T) {
	balanceSharedKafkaAfter(t, sharedKafka(t))
	cl := startSidecarCluster(t, 3, "diskless.cluster.session.timeout.ms=3000", "diskless.cluster.heartbeat.interval.ms=500")
	const partitions = 6
	ctx := testCtx(t, 8*time.Minute)
	topic := "failover-coordinator"
	createTopic(t, ctx, cl.scs[1], topic, partitions, nil)
	h := history.New()
	l := loadOnAll(ctx, t, cl, h, topic, partitions)
	l.waitReading(t, ctx, 2_000)
	adm := cl.k.Admin(t)
	group := "diskless-sidecars-" + cl.meta
	coordinator := func() (int32, error) {
		cs := adm.FindGroupCoordinators(ctx, group)
		c, ok := cs[group]
		if !ok {
			return -1, fmt.Errorf("no answer for %s", group)
		}
		return c.NodeID, c.Err
	}
	// Every partition led by its preferred replica first: a broker that an
	// earlier test of the package killed and restarted leads none of its
	// partitions until Kafka's automatic rebalance gives them back, at any
	// moment — the membership group's coordinator (a partition of
	// __consumer_offsets) could move off the broker about to be killed,
	// and the kill test nothing. Partitions already led by their preferred
	// replica answer ELECTION_NOT_NEEDED.
	_, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
	mustNoErr(t, "ElectLeaders", err)
	cl.waitSettled()
	victim, err := coordinator()
	mustNoErr(t, "FindGroupCoordinators", err)
	md, err := adm.Metadata(ctx, cl.meta)
	mustNoErr(t, "Metadata", err)
	var stay []int // shards whose metadata partition the victim does not lead
	for _, p := range md.Topics[cl.meta].Partitions.Sorted() {
		if p.Leader != victim {
			stay = append(stay, int(p.Partition))
		}
	}
	logsAt := map[int32]int{}
	for id, s := range cl.scs {
		logsAt[id] = len(lines(s.Logs()))
	}
	killedAt := time.Now()
	if err := cl.k.Kill(victim); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cl.k.Restart(victim); err != nil {
			t.Error(err)
		}
	}()
	for {
		if c, err := coordinator(); err == nil && c >= 0 && c != victim {
			t.Logf("broker %d (the membership group's coordinator; the sidecars' session timeout 3 s) SIGKILLed; broker %d coordinates the group after %v",
				victim, c, time.Since(killedAt).Round(time.Millisecond))
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no new coordinator of the membership group")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, p := range l.ps {
		p.waitAcked(t, ctx, p.acked.Load()+2_000)
	}
	l.checkResumed(t, killedAt)
	finalRead(t, ctx, cl.scs[2], topic, partitions, h)
	unanswered := 0 // sidecars whose heartbeats went unanswered for a session timeout
	for id, s := range cl.scs {
		if !s.Alive() {
			t.Errorf("sidecar %d exited", id)
		}
		var released []int
		var views []string
		for _, ln := range lines(s.Logs())[logsAt[id]:] {
			var rec struct {
				Msg        string `json:"msg"`
				Shard      int    `json:"shard"`
				Generation int    `json:"generation"`
				Current    bool   `json:"current"`
			}
			if json.Unmarshal([]byte(ln), &rec) != nil {
				continue
			}
			switch {
			case rec.Msg == "coordinator: released shard":
				released = append(released, rec.Shard)
			case rec.Msg == "membership: view changed":
				views = append(views, fmt.Sprintf("%d/%v", rec.Generation, rec.Current))
			case strings.HasPrefix(rec.Msg, "membership: no heartbeat answered for a session timeout"):
				unanswered++
			}
		}
		t.Logf("sidecar %d released shards %v after the kill (shards %v stay led by live brokers); its views (generation/current) %v",
			id, released, stay, views)
		for _, sh := range released {
			if slices.Contains(stay, sh) {
				t.Errorf("sidecar %d released shard %d, whose metadata partition broker %d did not lead", id, sh, victim)
			}
		}
	}
	if unanswered == 0 {
		t.Errorf("no sidecar went a session timeout without an answered heartbeat: the coordinator's failover was too quick to test anything")
	}
}

// testClusterDisablementDown SIGKILLs a sidecar other than the catalog's
// owner (shard 0's host, which drives disablements) and disables diskless
// on a topic meanwhile: while the dead sidecar is in the membership view
// the topic stays DISABLING and its DisklessDisableTopic is sent again
// (the owner's diskless_disable_send_failures_total counts the refused
// sends — a counter, where a rate-limited log line could be silenced).
// With keepDown false a new process of its node id is started then, and
// confirms once it is in the view; with keepDown true it stays down until
// the topic is DISABLED without it (its session expired: out of the view,
// it needs no send, DESIGN §Decisions "Disablement"), then is started.
// Either way the new process refuses produce to the topic with
// POLICY_VIOLATION — from the first answer that is not retriable (before
// its replica of shard 0's catalog caught up the topic is unknown to it),
// never storing a record — and serves the retained records.
func testClusterDisablementDown(t *testing.T, cl *sidecarCluster, keepDown bool) {
	kafkatest.Require(t)
	ctx := testCtx(t, 3*time.Minute)
	topic := "cluster-disable-down"
	if keepDown {
		topic += "-past-session"
	}
	cl.waitSettled()
	createTopic(t, ctx, cl.scs[1], topic, 1, nil)
	ids := slices.Sorted(maps.Keys(cl.scs))
	for i, n := range ids {
		waitProduced(t, ctx, cl.scs[n].DialRaw(), topic,
			batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Values(fmt.Sprint("d", n), 1)...), int64(i))
	}
	// The catalog's owner (shard 0's host) drives disablements; the victim
	// is another.
	owner, victim := int32(-1), int32(-1)
	for _, n := range ids {
		if cl.hostingNow(cl.scs[n])[0] {
			owner = n
		} else {
			victim = n
		}
	}
	if owner < 0 || victim < 0 {
		t.Fatalf("shard 0's host %d, another %d", owner, victim)
	}
	const failures = "diskless_disable_send_failures_total"
	before := metricValueOf(t, cl.scs[owner], failures)
	cl.scs[victim].Kill()
	killedAt := time.Now()
	adm := kadm.NewClient(cl.scs[owner].Client())
	resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "diskless.enable", Value: kmsg.StringPtr("false")},
		{Op: kadm.SetConfig, Name: "diskless.disable.policy", Value: kmsg.StringPtr("retain")},
	}, topic)
	mustNoErr(t, "AlterTopicConfigs", err)
	for _, r := range resps {
		mustNoErr(t, "AlterTopicConfigs "+r.Name, r.Err)
	}
	// Two refused sends: the dead sidecar is sent the request again.
	waitMetric(t, ctx, cl.scs[owner], failures, before+2)
	if st, _ := httpTopic(t, cl.scs[owner], topic); st.State != "DISABLING" {
		t.Fatalf("with sidecar %d down (%v): state %q, want DISABLING while it is in the view", victim, time.Since(killedAt).Round(time.Millisecond), st.State)
	}
	if keepDown {
		for _, n := range ids {
			if n == victim {
				continue
			}
			if st := waitState(t, cl.scs[n], topic, "DISABLED", 2*time.Minute); st.Epoch != 1 || st.Policy != "retain" {
				t.Fatalf("sidecar %d: %+v, want DISABLED at epoch 1, policy retain", n, st)
			}
		}
		t.Logf("sidecar %d SIGKILLed, diskless disabled meanwhile: DISABLED without it %v after the kill (%v refused sends), once its session expired",
			victim, time.Since(killedAt).Round(time.Millisecond), metricValueOf(t, cl.scs[owner], failures)-before)
	}
	restartAt := time.Now()
	back := cl.start(victim)
	// Produce through the new process at once, before it read the
	// catalog: retriable answers while its replica catches up, then
	// POLICY_VIOLATION; never a record stored.
	batch := batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Values("late", 1)...)
	rc := back.DialRaw()
	var seen []int16
	for {
		p := produceRaw(t, rc, topic, batch)[0]
		if !slices.Contains(seen, p.ErrorCode) {
			seen = append(seen, p.ErrorCode)
		}
		if p.ErrorCode == 0 {
			t.Fatalf("produce through the restarted sidecar %d to a topic disabled while it was down: stored at %d (answers %v)", victim, p.BaseOffset, seen)
		}
		if err := kerr.ErrorForCode(p.ErrorCode); !kerr.IsRetriable(err) {
			if p.ErrorCode != kerr.PolicyViolation.Code {
				t.Fatalf("produce through the restarted sidecar %d: %v, want POLICY_VIOLATION (answers %v)", victim, err, seen)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("produce through the restarted sidecar %d: retriable answers %v until the test's deadline", victim, seen)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the restarted sidecar %d answered produce POLICY_VIOLATION %v after its start (answers %v)", victim, time.Since(restartAt).Round(time.Millisecond), seen)
	for _, n := range ids {
		if st := waitState(t, cl.scs[n], topic, "DISABLED", time.Minute); st.Epoch != 1 || st.Policy != "retain" {
			t.Fatalf("sidecar %d: %+v, want DISABLED at epoch 1, policy retain", n, st)
		}
	}
	if !keepDown {
		// The new process is in the view once the rebalance its join
		// starts ends: when the dead one is dropped (the session timeout).
		t.Logf("sidecar %d SIGKILLed, diskless disabled meanwhile: DISABLING until its new process was in the view and confirmed, DISABLED %v after the restart",
			victim, time.Since(restartAt).Round(time.Millisecond))
	}
	f := fetchRaw(t, back.DialRaw(), topic, 0, 0, 1<<20, 0)
	if bases, _ := batchesIn(t, f.RecordBatches); f.ErrorCode != 0 || len(bases) != len(ids) {
		t.Fatalf("fetch through the restarted sidecar: error %d, batches %v; want the %d records kept", f.ErrorCode, bases, len(ids))
	}
}
