package e2e

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTransactionOpenWhileDisabling: diskless is disabled on a topic while
// a kgo transactional producer holds a transaction open in one of its
// partitions (SPEC §10, §15). The topic stays DISABLING, taking no produce
// but that transaction's marker; the transaction ends — by the producer's
// commit, or by the coordinator's abort once its timeout has passed — and
// its marker is written there, so the last stable offset reaches the high
// watermark and a read_committed reader gets the committed records (none
// of the aborted ones); the topic then becomes DISABLED.
func TestTransactionOpenWhileDisabling(t *testing.T) {
	t.Parallel()
	for _, end := range []string{"commit", "timeout"} {
		t.Run(end, func(t *testing.T) {
			sc := StartSidecar(t, "", "transaction.abort.timed.out.transaction.cleanup.interval.ms=1000")
			ctx := testCtx(t, 2*time.Minute)
			topic := "txdis-" + end
			createTopic(t, ctx, sc, topic, 1, nil)
			timeout := time.Minute
			if end == "timeout" {
				timeout = 10 * time.Second // past the checks below
			}
			p := sc.Client(kgo.TransactionalID("txdis"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(timeout))
			mustNoErr(t, "produce before", produceAll(ctx, sc.Client(kgo.RecordPartitioner(kgo.ManualPartitioner())), topic, "plain-a", "plain-b"))
			mustNoErr(t, "BeginTransaction", p.BeginTransaction())
			mustNoErr(t, "produce open", produceAll(ctx, p, topic, vals("open-", 3)...))
			if hwm, lso := txnEnds(t, ctx, p, topic, 0); hwm != 5 || lso != 2 {
				t.Fatalf("open transaction: high watermark %d, LSO %d; want 5, 2", hwm, lso)
			}

			adm := kadm.NewClient(sc.Client())
			resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "diskless.enable", Value: kadm.StringPtr("false")}}, topic)
			mustNoErr(t, "AlterTopicConfigs", err)
			mustNoErr(t, "AlterTopicConfigs "+topic, resps[0].Err)
			// Several lifecycle passes (one a second): still DISABLING.
			time.Sleep(3 * time.Second)
			if st, _ := httpTopic(t, sc, topic); st.State != "DISABLING" {
				t.Fatalf("with a transaction open: %+v, want DISABLING", st)
			}
			if end == "commit" {
				mustNoErr(t, "EndTransaction", p.EndTransaction(ctx, kgo.TryCommit))
			}
			hwm, lso := txnWaitLSO(t, ctx, p, topic, 0, 6)
			if hwm != 6 || lso != 6 {
				t.Fatalf("after the transaction's %s: high watermark %d, LSO %d; want 6, 6 (its marker)", end, hwm, lso)
			}
			cons := sc.Client(kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			want := 2
			if end == "commit" {
				want = 5
			}
			got := txnPoll(t, ctx, cons, nil, func(v []string) bool { return len(v) >= want })
			got = txnPollMore(t, ctx, cons, got, 2) // and nothing more
			if len(got) != want || countPrefix(got, "plain-") != 2 {
				t.Fatalf("read_committed after the %s: %v", end, got)
			}
			waitState(t, sc, topic, "DISABLED", 30*time.Second)
		})
	}
}
