package e2e

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
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
	const (
		topic  = "bench-txn"
		window = 10 * time.Second
		batch  = 100
	)
	createTopic(t, ctx, sc, topic, 1, nil)
	value := make([]byte, 1024)
	recs := func() []*kgo.Record {
		out := make([]*kgo.Record, batch)
		for i := range out {
			out[i] = &kgo.Record{Topic: topic, Partition: 0, Value: value}
		}
		return out
	}
	manual := kgo.RecordPartitioner(kgo.ManualPartitioner())
	idem := sc.Client(manual)
	txn := sc.Client(manual, kgo.TransactionalID("bench"))
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
