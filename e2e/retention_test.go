package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRetention: with retention.ms on a topic, the coordinator moves the
// log start offset past expired batches; fetching below it is then
// OFFSET_OUT_OF_RANGE, and the change survives a restart.
func TestRetention(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sc := StartSidecar(t, dir, "diskless.retention.check.interval.ms=200")
	ctx := testCtx(t, 2*time.Minute)
	const topic = "retained"
	ms := "1000"
	createTopic(t, ctx, sc, topic, 1, map[string]*string{"retention.ms": &ms})
	prod := sc.Client(kgo.DefaultProduceTopic(topic))
	for i := range 5 {
		mustNoErr(t, "produce", prod.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "old-%d", i)}).FirstErr())
	}
	adm := kadm.NewClient(sc.Client())
	deadline := time.Now().Add(30 * time.Second)
	for {
		starts, err := adm.ListStartOffsets(ctx, topic)
		mustNoErr(t, "ListStartOffsets", err)
		if o, _ := starts.Lookup(topic, 0); o.Offset == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("log start offset did not move past expired batches: %+v", starts)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if p := fetchRaw(t, sc.DialRaw(), topic, 0, 0, 1<<20, 0); p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LogStartOffset != 5 {
		t.Fatalf("fetch below the log start: error %d, log start %d", p.ErrorCode, p.LogStartOffset)
	}
	sc.Stop()
	sc2 := StartSidecar(t, dir)
	if p := fetchRaw(t, sc2.DialRaw(), topic, 0, 0, 1<<20, 0); p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LogStartOffset != 5 || p.HighWatermark != 5 {
		t.Fatalf("after restart: error %d, log start %d, hwm %d", p.ErrorCode, p.LogStartOffset, p.HighWatermark)
	}
}
