package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/diskless-sidecar/sidecar/internal/batchtest"
	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
)

// TestTransactionAdminMatchesKafka: one scenario — a committed
// transaction (id a), an open one over two partitions (b), an id
// initialised only (cb), an idempotent producer — on Apache Kafka 4.4 and
// on the sidecar binary, then DescribeTransactions, ListTransactions (every
// filter: states known and not, producer ids, durations, id patterns valid
// and not) and DescribeProducers (partitions with and without producers,
// out of range, an unknown topic), the answers compared after producer ids
// are named by their transactional ids and timestamps reduced to their
// sign (SPEC §15); WriteTxnMarkers with a stale producer epoch and the
// current one, and the producer state markers leave (a producer with only
// a marker in a partition, a marker of a newer epoch than the records',
// the marker's time as LastTimestamp, the sequences after the epoch
// bump), and LastTimestamp after a record in a CreateTime and a
// LogAppendTime topic. Then kafka-transactions.sh list, describe,
// describe-producers and find-hanging against the sidecar; abort, on
// both, then compared as above.
func TestTransactionAdminMatchesKafka(t *testing.T) {
	t.Parallel()
	kafkatest.Require(t)
	kc := kafkatest.Start(t, kafkatest.Options{})
	sc := StartSidecar(t, "")
	ctx := testCtx(t, 4*time.Minute)
	var answers [2][]string
	for i, addr := range []string{kc.BootstrapServers(), sc.Addr} {
		answers[i] = txnAdminScenario(t, ctx, addr)
	}
	for i := range max(len(answers[0]), len(answers[1])) {
		var k, s string
		if i < len(answers[0]) {
			k = answers[0][i]
		}
		if i < len(answers[1]) {
			s = answers[1][i]
		}
		if k != s {
			t.Errorf("step %d:\n Kafka   %s\n sidecar %s", i, k, s)
		} else {
			t.Logf("step %d: %s", i, k)
		}
	}

	tool := func(args ...string) string {
		out, errOut, err := kafkatest.Tool(ctx, "kafka-transactions", append([]string{"--bootstrap-server", sc.Addr}, args...)...)
		if err != nil {
			t.Fatalf("kafka-transactions %v: %v\n%s%s", args, err, out, errOut)
		}
		return out
	}
	rows := func(out string) [][]string {
		var rs [][]string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			rs = append(rs, strings.Fields(l))
		}
		return rs
	}
	list := rows(tool("list"))
	var ids []string
	for _, r := range list {
		ids = append(ids, r[0]+":"+r[3])
	}
	if !slices.Equal(ids, []string{"a:CompleteCommit", "b:Ongoing", "cb:Empty", "e:Ongoing"}) {
		t.Errorf("kafka-transactions list: %v, want a CompleteCommit, b Ongoing, cb Empty, e Ongoing", list)
	}
	if d := rows(tool("describe", "--transactional-id", "b")); len(d) != 1 || d[0][4] != "Ongoing" || !slices.Contains([]string{"t-0,t-1", "t-1,t-0"}, d[0][len(d[0])-1]) {
		t.Errorf("kafka-transactions describe b: %v", d)
	}
	producers := rows(tool("describe-producers", "--topic", "t", "--partition", "0"))
	starts := map[string]bool{}
	for _, r := range producers {
		starts[r[len(r)-1]] = true
	}
	if len(producers) != 3 || !starts["2"] || !starts["None"] {
		t.Errorf("kafka-transactions describe-producers t-0: %v, want 3 producers, one with its transaction open at 2", producers)
	}
	// Every open transaction is known to its coordinator: none hangs.
	if h := rows(tool("find-hanging", "--broker-id", fmt.Sprint(sidecarNodeID(t, ctx, sc)), "--max-transaction-timeout", "0")); len(h) != 0 {
		t.Errorf("kafka-transactions find-hanging: %v, want none", h)
	}
}

// sidecarNodeID returns the sidecar's broker id from Metadata.
func sidecarNodeID(t *testing.T, ctx context.Context, sc *Sidecar) int32 {
	t.Helper()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, sc.Client())
	mustNoErr(t, "Metadata", err)
	return resp.Brokers[0].NodeID
}

// txnAdminScenario runs the scenario against the cluster at addr and
// returns one line per answer, producer ids named (pid:a, pid:idem) and
// timestamps reduced to -1 / >0.
func txnAdminScenario(t *testing.T, ctx context.Context, addr string) []string {
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
	mustNoErr(t, "client", err)
	defer admin.Close()
	ct := kmsg.NewPtrCreateTopicsRequest()
	tt := kmsg.NewCreateTopicsRequestTopic()
	tt.Topic, tt.NumPartitions, tt.ReplicationFactor = "t", 3, 1
	ct.Topics = append(ct.Topics, tt)
	if r, err := ct.RequestWith(ctx, admin); err != nil || r.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics: %v %+v", err, r)
	}
	manual := kgo.RecordPartitioner(kgo.ManualPartitioner())
	client := func(opts ...kgo.Opt) *kgo.Client {
		// Transactions v1 on both: the sidecar announces no v2.
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), manual, kgo.MaxVersions(kversion.V3_9_0())}, opts...)...)
		mustNoErr(t, "client", err)
		t.Cleanup(cl.Close)
		return cl
	}
	names := map[int64]string{}
	pidOf := func(cl *kgo.Client, name string) int64 {
		pid, _, err := cl.ProducerID(ctx)
		mustNoErr(t, "ProducerID", err)
		names[pid] = name
		return pid
	}
	a := client(kgo.TransactionalID("a"), kgo.TransactionTimeout(time.Minute))
	mustNoErr(t, "begin a", a.BeginTransaction())
	mustNoErr(t, "produce a", a.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: 0, Value: []byte("a")}).FirstErr())
	mustNoErr(t, "commit a", a.EndTransaction(ctx, kgo.TryCommit))
	// Kafka answers EndTxn before its markers are written (SPEC §15): b's
	// records come after a's marker only once t-0's LSO is past it.
	txnWaitLSO(t, ctx, a, "t", 0, 2)
	b := client(kgo.TransactionalID("b"), kgo.TransactionTimeout(10*time.Minute))
	mustNoErr(t, "begin b", b.BeginTransaction())
	mustNoErr(t, "produce b", b.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: 0, Value: []byte("b")}, &kgo.Record{Topic: "t", Partition: 1, Value: []byte("b")}).FirstErr())
	idem := client()
	mustNoErr(t, "produce idempotent", idem.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: 0, Value: []byte("i")}).FirstErr())
	c := client(kgo.TransactionalID("cb"), kgo.TransactionTimeout(30*time.Second))
	pa, pb := pidOf(a, "a"), pidOf(b, "b")
	pidOf(c, "cb")
	pidOf(idem, "idem")
	name := func(pid int64) string {
		if n, ok := names[pid]; ok {
			return "pid:" + n
		}
		return fmt.Sprint(pid)
	}
	sign := func(ts int64) string {
		if ts > 0 {
			return ">0"
		}
		return fmt.Sprint(ts)
	}

	var out []string
	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{"a", "b", "cb", "nope", ""}
	dresp, err := dt.RequestWith(ctx, admin)
	mustNoErr(t, "DescribeTransactions", err)
	for _, st := range dresp.TransactionStates {
		var topics []string
		for _, tp := range st.Topics {
			ps := slices.Clone(tp.Partitions)
			slices.Sort(ps)
			topics = append(topics, fmt.Sprintf("%s%v", tp.Topic, ps))
		}
		line := fmt.Sprintf("describe %q: error %d", st.TransactionalID, st.ErrorCode)
		if st.ErrorCode == 0 {
			line += fmt.Sprintf(" %s %s epoch %d timeout %d start %s topics %v", st.State, name(st.ProducerID), st.ProducerEpoch,
				st.TimeoutMillis, sign(st.StartTimestamp), topics)
		}
		out = append(out, line)
	}
	bad := "[("
	anchored := "a|b"
	partial := "b"
	for _, lt := range []struct {
		version int16
		states  []string
		pids    []int64
		dur     int64
		pattern *string
	}{
		{version: 0},
		{version: 1, states: []string{"Ongoing", "Bogus", "ongoing", "PrepareEpochFence"}, dur: -1},
		{version: 1, pids: []int64{pa, pb, 1 << 40}, dur: -1},
		{version: 1, dur: 0},
		{version: 1, dur: time.Hour.Milliseconds()},
		{version: 2, dur: -1, pattern: &anchored},
		{version: 2, dur: -1, pattern: &partial},
		{version: 2, dur: -1, pattern: &bad},
	} {
		req := kmsg.NewPtrListTransactionsRequest()
		req.Version, req.StateFilters, req.ProducerIDFilters, req.DurationFilterMillis, req.TransactionalIDPattern = lt.version, lt.states, lt.pids, lt.dur, lt.pattern
		var got []string
		var codes []int16
		var unknown []string
		for _, sh := range admin.RequestSharded(ctx, req) {
			mustNoErr(t, "ListTransactions", sh.Err)
			r := sh.Resp.(*kmsg.ListTransactionsResponse)
			codes = append(codes, r.ErrorCode)
			unknown = append(unknown, r.UnknownStateFilters...)
			for _, st := range r.TransactionStates {
				got = append(got, fmt.Sprintf("%s:%s:%s", st.TransactionalID, st.TransactionState, name(st.ProducerID)))
			}
		}
		slices.Sort(got)
		p := "<nil>"
		if lt.pattern != nil {
			p = *lt.pattern
		}
		out = append(out, fmt.Sprintf("list v%d states %v pids %d duration %d pattern %s: codes %v unknown %v %v",
			lt.version, lt.states, len(lt.pids), lt.dur, p, codes, unknown, got))
	}

	// DescribeProducers goes to the partitions' leader (the only broker).
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, admin)
	mustNoErr(t, "Metadata", err)
	dp := kmsg.NewPtrDescribeProducersRequest()
	dp.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "t", Partitions: []int32{0, 1, 2, 7}}, {Topic: "nope", Partitions: []int32{0}}}
	presp, err := admin.Broker(int(meta.Brokers[0].NodeID)).Request(ctx, dp)
	mustNoErr(t, "DescribeProducers", err)
	for _, pt := range presp.(*kmsg.DescribeProducersResponse).Topics {
		for _, pp := range pt.Partitions {
			var ps []string
			for _, ap := range pp.ActiveProducers {
				// CoordinatorEpoch: Kafka's markers carry the epoch of
				// its transaction log partition (0 on a fresh broker),
				// the sidecar's that of its shard's coordinator (0 on a
				// fresh sidecar); −1 before a marker.
				ps = append(ps, fmt.Sprintf("%s epoch %d seq %d ts %s coordinator epoch %d txn %d", name(ap.ProducerID), ap.ProducerEpoch, ap.LastSequence,
					sign(ap.LastTimestamp), ap.CoordinatorEpoch, ap.CurrentTxnStartOffset))
			}
			slices.Sort(ps)
			out = append(out, fmt.Sprintf("producers %s-%d: error %d %v", pt.Topic, pp.Partition, pp.ErrorCode, ps))
		}
	}

	// kafka-transactions.sh abort ends b's transaction in t-1 (WriteTxnMarkers
	// to the partition's leader), whatever its coordinator holds: the LSO
	// of t-1 moves to its end, b's transaction stays open in t-0.
	if o, e, err := kafkatest.Tool(ctx, "kafka-transactions", "--bootstrap-server", addr, "abort", "--topic", "t", "--partition", "1", "--start-offset", "0"); err != nil {
		t.Fatalf("kafka-transactions abort: %v\n%s%s", err, o, e)
	}
	dp.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}
	presp, err = admin.Broker(int(meta.Brokers[0].NodeID)).Request(ctx, dp)
	mustNoErr(t, "DescribeProducers", err)
	for _, pp := range presp.(*kmsg.DescribeProducersResponse).Topics[0].Partitions {
		var ps []string
		for _, ap := range pp.ActiveProducers {
			ps = append(ps, fmt.Sprintf("%s coordinator epoch %d txn %d", name(ap.ProducerID), ap.CoordinatorEpoch, ap.CurrentTxnStartOffset))
		}
		slices.Sort(ps)
		out = append(out, fmt.Sprintf("producers after abort t-%d: error %d %v", pp.Partition, pp.ErrorCode, ps))
	}
	for p := range int32(2) {
		hwm, lso := txnEnds(t, ctx, admin, "t", p)
		out = append(out, fmt.Sprintf("after abort t-%d: high watermark %d, LSO %d", p, hwm, lso))
	}

	// WriteTxnMarkers' epochs: e, initialised twice (epoch 1), holds a
	// transaction open in t-2. A marker of epoch 0 is refused there
	// (INVALID_PRODUCER_EPOCH, nothing written) and written to t-1, where
	// e has no state; one of epoch 1 ends the transaction in t-2.
	e0 := client(kgo.TransactionalID("e"), kgo.TransactionTimeout(time.Minute))
	pidOf(e0, "e")
	e := client(kgo.TransactionalID("e"), kgo.TransactionTimeout(10*time.Minute))
	mustNoErr(t, "begin e", e.BeginTransaction())
	mustNoErr(t, "produce e", e.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: 2, Value: []byte("e")}).FirstErr())
	pe, ee, err := e.ProducerID(ctx)
	mustNoErr(t, "ProducerID e", err)
	for _, epoch := range []int16{ee - 1, ee} {
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		req.Version = 1
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed = pe, epoch, false
		m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "t", Partitions: []int32{2, 1}}}
		if epoch == ee {
			m.Topics[0].Partitions = []int32{2}
		}
		req.Markers = append(req.Markers, m)
		r, err := admin.Broker(int(meta.Brokers[0].NodeID)).Request(ctx, req)
		mustNoErr(t, "WriteTxnMarkers", err)
		var codes []string
		for _, tp := range r.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions {
			codes = append(codes, fmt.Sprintf("t-%d %d", tp.Partition, tp.ErrorCode))
		}
		line := fmt.Sprintf("WriteTxnMarkers ABORT %s epoch %d (current %d): %v", name(pe), epoch, ee, codes)
		for p := int32(1); p <= 2; p++ {
			hwm, lso := txnEnds(t, ctx, admin, "t", p)
			line += fmt.Sprintf("; t-%d high watermark %d, LSO %d", p, hwm, lso)
		}
		out = append(out, line)
	}

	// WriteTxnMarkers' coordinator epochs: the marker above recorded
	// coordinator epoch 0 for e in t-2. e's next record opens a
	// transaction there again; a marker of coordinator epoch −1 is refused
	// (TRANSACTION_COORDINATOR_FENCED, nothing written), one of 0 ends it.
	mustNoErr(t, "produce e again", e.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: 2, Value: []byte("e")}).FirstErr())
	for _, ce := range []int32{-1, 0} {
		// Whether LastTimestamp is the marker's: the record's time and
		// its append are before sent.
		time.Sleep(5 * time.Millisecond)
		sent := time.Now().UnixMilli()
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		req.Version = 1
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pe, ee, false, ce
		m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "t", Partitions: []int32{2}}}
		req.Markers = append(req.Markers, m)
		r, err := admin.Broker(int(meta.Brokers[0].NodeID)).Request(ctx, req)
		mustNoErr(t, "WriteTxnMarkers", err)
		code := r.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode
		hwm, lso := txnEnds(t, ctx, admin, "t", 2)
		ps := producerLines(describeProducers(t, ctx, admin.Broker(int(meta.Brokers[0].NodeID)), "t", 2), name, sent)
		out = append(out, fmt.Sprintf("WriteTxnMarkers ABORT %s coordinator epoch %d: error %d; t-2 high watermark %d, LSO %d; producers %v",
			name(pe), ce, code, hwm, lso, ps))
	}
	// Produce up to v11 names its topics (v13 by id).
	out = append(out, txnMarkersProducerState(t, ctx, admin, client(), meta.Brokers[0].NodeID, pe, ee, name)...)
	return append(out, producerLastTimestamps(t, ctx, admin, client(), meta.Brokers[0].NodeID)...)
}

// describeProducers asks broker DescribeProducers of topic's partition p
// and returns that partition's answer.
func describeProducers(t *testing.T, ctx context.Context, broker *kgo.Broker, topic string, p int32) kmsg.DescribeProducersResponseTopicPartition {
	t.Helper()
	dp := kmsg.NewPtrDescribeProducersRequest()
	dp.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: topic, Partitions: []int32{p}}}
	r, err := broker.Request(ctx, dp)
	mustNoErr(t, "DescribeProducers", err)
	return r.(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0]
}

// producerLines lists pp's producers, sorted, as txnAdminScenario compares
// them with Kafka's: each named by name, with its epoch, last sequence,
// whether its LastTimestamp is the marker's (at or after sent; never when
// sent is 0), its coordinator epoch and open transaction's first offset.
func producerLines(pp kmsg.DescribeProducersResponseTopicPartition, name func(int64) string, sent int64) []string {
	var ps []string
	for _, ap := range pp.ActiveProducers {
		ps = append(ps, fmt.Sprintf("%s epoch %d seq %d ts of the marker %v coordinator epoch %d txn %d", name(ap.ProducerID), ap.ProducerEpoch,
			ap.LastSequence, sent > 0 && ap.LastTimestamp >= sent, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset))
	}
	slices.Sort(ps)
	return ps
}

// producerLastTimestamps continues txnAdminScenario: DescribeProducers'
// LastTimestamp after an idempotent record stamped an hour ago, in a
// CreateTime topic and in a LogAppendTime one — the record's timestamp or
// the append's (SPEC §15).
func producerLastTimestamps(t *testing.T, ctx context.Context, admin, producer *kgo.Client, node int32) []string {
	ct := kmsg.NewPtrCreateTopicsRequest()
	for _, tc := range []struct{ name, tsType string }{{"ts-ct", "CreateTime"}, {"ts-lat", "LogAppendTime"}} {
		tt := kmsg.NewCreateTopicsRequestTopic()
		tt.Topic, tt.NumPartitions, tt.ReplicationFactor = tc.name, 1, 1
		tt.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "message.timestamp.type", Value: kmsg.StringPtr(tc.tsType)}}
		ct.Topics = append(ct.Topics, tt)
	}
	if r, err := ct.RequestWith(ctx, admin); err != nil || r.Topics[0].ErrorCode != 0 || r.Topics[1].ErrorCode != 0 {
		t.Fatalf("CreateTopics: %v %+v", err, r)
	}
	var out []string
	for _, topic := range []string{"ts-ct", "ts-lat"} {
		stamp := time.Now().Add(-time.Hour).UnixMilli()
		sent := time.Now().UnixMilli()
		mustNoErr(t, "produce "+topic, producer.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("x"), Timestamp: time.UnixMilli(stamp)}).FirstErr())
		pp := describeProducers(t, ctx, admin.Broker(int(node)), topic, 0)
		var ps []string
		for _, ap := range pp.ActiveProducers {
			ps = append(ps, fmt.Sprintf("LastTimestamp the record's %v, at or after the send %v", ap.LastTimestamp == stamp, ap.LastTimestamp >= sent))
		}
		out = append(out, fmt.Sprintf("producers %s-0 after a record stamped an hour ago: error %d %v", topic, pp.ErrorCode, ps))
	}
	return out
}

// txnMarkersProducerState continues txnAdminScenario: how markers change
// a partition's producer state (SPEC §15). t-1 lists e, which only had a
// marker there (epoch ee−1, above). A marker of epoch ee+1 to t-2, where
// e's records are of epoch ee, takes that epoch and the marker's time and
// forgets e's sequences: a batch of e's at epoch ee+1 must then start at
// sequence 0 (3 refused, 0 taken), one of epoch ee is refused.
// Batches go through producer, a client whose Produce names topics.
func txnMarkersProducerState(t *testing.T, ctx context.Context, admin, producer *kgo.Client, node int32, pe int64, ee int16, name func(int64) string) []string {
	broker := admin.Broker(int(node))
	describe := func(what string, p int32, sent int64) string {
		pp := describeProducers(t, ctx, broker, "t", p)
		return fmt.Sprintf("producers t-%d %s: error %d %v", p, what, pp.ErrorCode, producerLines(pp, name, sent))
	}
	out := []string{describe("after the markers", 1, 0)}

	time.Sleep(5 * time.Millisecond)
	sent := time.Now().UnixMilli()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = pe, ee+1, true
	m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "t", Partitions: []int32{2}}}
	req.Markers = append(req.Markers, m)
	r, err := broker.Request(ctx, req)
	mustNoErr(t, "WriteTxnMarkers", err)
	out = append(out, fmt.Sprintf("WriteTxnMarkers COMMIT %s epoch %d (records' %d): error %d", name(pe), ee+1, ee,
		r.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode))
	out = append(out, describe("after a marker of a newer epoch", 2, sent))

	for _, b := range []struct {
		epoch int16
		seq   int32
	}{{ee + 1, 3}, {ee, 2}, {ee + 1, 0}} {
		preq := produceRequestTo("t", map[int32][]byte{2: batchtest.Make(
			batchtest.Options{BaseTimestamp: time.Now().UnixMilli(), ProducerID: pe, ProducerEpoch: b.epoch, BaseSequence: b.seq},
			batchtest.Values("x", 1)...)})
		resp, err := producer.Broker(int(node)).Request(ctx, preq)
		mustNoErr(t, "Produce", err)
		out = append(out, fmt.Sprintf("produce %s epoch %d sequence %d to t-2: error %d", name(pe), b.epoch, b.seq,
			resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode))
	}
	return append(out, describe("after the batches", 2, 0))
}

// TestTransactionMaxTimeoutKey: transaction.max.timeout.ms reaches the
// transaction coordinator — InitProducerId asking for more gets
// INVALID_TRANSACTION_TIMEOUT, asking for it gets a producer id (SPEC §15).
func TestTransactionMaxTimeoutKey(t *testing.T) {
	t.Parallel()
	sc := StartSidecar(t, "", "transaction.max.timeout.ms=5000")
	ctx := testCtx(t, time.Minute)
	cl := sc.Client()
	for _, tc := range []struct {
		timeout int32
		want    int16
	}{{5001, kerr.InvalidTransactionTimeout.Code}, {5000, 0}} {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = kmsg.StringPtr("max"), tc.timeout, -1, -1
		var resp *kmsg.InitProducerIDResponse
		for {
			r, err := req.RequestWith(ctx, cl)
			mustNoErr(t, "InitProducerId", err)
			if resp = r; r.ErrorCode != kerr.CoordinatorLoadInProgress.Code || ctx.Err() != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if resp.ErrorCode != tc.want {
			t.Errorf("transaction.timeout.ms %d: %v, want %v", tc.timeout, kerr.ErrorForCode(resp.ErrorCode), kerr.ErrorForCode(tc.want))
		}
	}
}
