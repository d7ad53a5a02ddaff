package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// TestBenchTransactions is a measurement, not a test: it runs only with
// SIDECAR_BENCH=1 (SIDECAR_BENCH=1 go test -run TestBenchTransactions -v
// ./e2e) and logs its figures for bench/RESULTS.md. One sidecar at its
// defaults; one kgo producer in a closed loop, rounds of 100 records of
// 1 KiB to one partition: idempotent (ProduceSync) against transactional
// (BeginTransaction, ProduceSync, EndTransaction commit), alternated four
// times for 10 s each in the same run. It reports records/s and the round
// latency p50/p99 of both, and for the transactional rounds the commit's
// (EndTransaction: the markers through the WAL, then the completion).
func TestBenchTransactions(t *testing.T) {
	requireBench(t)
	sc := StartSidecar(t, "")
	ctx := testCtx(t, 5*time.Minute)
	const topic = "bench-txn"
	createTopic(t, ctx, sc, topic, 1, nil)
	manual := kgo.RecordPartitioner(kgo.ManualPartitioner())
	benchTxnRounds(t, ctx, sc.Client(manual), sc.Client(manual, kgo.TransactionalID("bench")), topic, 0)
}

// benchTxnRounds runs TestBenchTransactions' rounds — 100 records of
// 1 KiB to partition p of topic, idempotent through idem (ProduceSync)
// against transactional through txn (BeginTransaction, ProduceSync,
// EndTransaction commit), alternated four times for 10 s each — and logs
// records/s, the round latency p50/p99 of both and the commit's
// (EndTransaction) p50/p99.
func benchTxnRounds(t *testing.T, ctx context.Context, idem, txn *kgo.Client, topic string, p int32) {
	t.Helper()
	const (
		window = 10 * time.Second
		batch  = 100
	)
	value := make([]byte, 1024)
	recs := func() []*kgo.Record {
		out := make([]*kgo.Record, batch)
		for i := range out {
			out[i] = &kgo.Record{Topic: topic, Partition: p, Value: value}
		}
		return out
	}
	type stats struct{ rounds, commits []time.Duration }
	var s [2]stats // 0 idempotent, 1 transactional
	for round := range 8 {
		mode := round % 2
		end := time.Now().Add(window)
		for time.Now().Before(end) {
			start := time.Now()
			if mode == 0 {
				mustNoErr(t, "produce", idem.ProduceSync(ctx, recs()...).FirstErr())
			} else {
				mustNoErr(t, "begin", txn.BeginTransaction())
				mustNoErr(t, "produce", txn.ProduceSync(ctx, recs()...).FirstErr())
				c := time.Now()
				mustNoErr(t, "commit", txn.EndTransaction(ctx, kgo.TryCommit))
				s[mode].commits = append(s[mode].commits, time.Since(c))
			}
			s[mode].rounds = append(s[mode].rounds, time.Since(start))
		}
	}
	pct := func(d []time.Duration, q float64) float64 { return float64(quantile(d, q).Microseconds()) / 1000 }
	for mode, name := range []string{"idempotent", "transactional"} {
		st := s[mode]
		var total time.Duration
		for _, d := range st.rounds {
			total += d
		}
		t.Logf("%s: %d rounds, %.0f records/s, round p50 %.1f ms p99 %.1f ms", name, len(st.rounds),
			float64(len(st.rounds)*batch)/total.Seconds(), pct(st.rounds, 0.5), pct(st.rounds, 0.99))
		if mode == 1 {
			t.Logf("%s: commit (EndTransaction) p50 %.1f ms p99 %.1f ms", name, pct(st.commits, 0.5), pct(st.commits, 0.99))
		}
	}
}

// TestBenchClusterTransactions is a measurement, not a test: it runs only
// with SIDECAR_BENCH=1 (SIDECAR_BENCH=1 go test -run
// TestBenchClusterTransactions -v ./e2e) and logs its figures for
// bench/RESULTS.md. Three sidecars of one cluster next to the shared
// 3-broker Kafka (startSidecarCluster), the clients given every sidecar's
// address: the transactional id's shard hosted by one sidecar (its
// transaction coordinator), the partition's shard by another, so that
// every transaction's check, markers and completion cross sidecars
// (DESIGN §Transactions); then TestBenchTransactions' rounds
// (benchTxnRounds), idempotent against transactional in the same run.
func TestBenchClusterTransactions(t *testing.T) {
	requireBench(t)
	cl := startSidecarCluster(t, 3)
	ctx := testCtx(t, 5*time.Minute)
	owner := map[int32]int32{} // sidecar by shard
	for id, s := range cl.scs {
		for sh := range cl.hostingNow(s) {
			owner[int32(sh)] = id
		}
	}
	const topic = "bench-ctxn"
	first := cl.scs[cl.k.Brokers()[0]]
	createTopic(t, ctx, first, topic, 6, nil)
	var id diskless.TopicID
	waitFor(t, 30*time.Second, "topic "+topic+" in Metadata", func() bool {
		var ok bool
		id, ok = topicOf(ctx, first, topic)
		return ok
	})
	txnShard := diskless.GroupShardFor("bench", clusterShards)
	coord := owner[txnShard]
	part := int32(-1)
	for p := range int32(6) {
		if sh := diskless.ShardFor(id, p, clusterShards); owner[sh] != coord {
			part = p
			break
		}
	}
	if part < 0 {
		t.Fatalf("every partition of %s on sidecar %d's shards (%v)", topic, coord, owner)
	}
	partShard := diskless.ShardFor(id, part, clusterShards)
	t.Logf("transactional id bench on shard %d of sidecar %d; %s-%d on shard %d of sidecar %d", txnShard, coord, topic, part, partShard, owner[partShard])
	client := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(strings.Split(cl.addrs(), ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
		mustNoErr(t, "client", err)
		t.Cleanup(cl.Close)
		return cl
	}
	benchTxnRounds(t, ctx, client(), client(kgo.TransactionalID("bench")), topic, part)
}
