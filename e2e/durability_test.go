package e2e

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type ackedAt struct {
	partition int32
	offset    int64
}

// produceUntilStopped produces uniquely valued records with acks=all
// (kgo's idempotent default) until stop is closed, and returns every record
// the sidecar acknowledged with the offset it was given.
func produceUntilStopped(ctx context.Context, sc *Sidecar, topic string, acked *atomic.Int64, stop <-chan struct{}) map[string]ackedAt {
	got, _ := produceUntilStoppedErrs(ctx, sc, topic, acked, stop,
		kgo.RecordDeliveryTimeout(5*time.Second), kgo.RequestRetries(2))
	return got
}

// produceUntilStoppedErrs is produceUntilStopped with the client options
// given, also returning the errors of records that were not acknowledged,
// counted by message.
func produceUntilStoppedErrs(ctx context.Context, sc *Sidecar, topic string, acked *atomic.Int64, stop <-chan struct{}, opts ...kgo.Opt) (map[string]ackedAt, map[string]int) {
	prod := sc.Client(append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(2 * time.Millisecond)}, opts...)...)
	var (
		mu   sync.Mutex
		got  = make(map[string]ackedAt)
		errs = make(map[string]int)
		wg   sync.WaitGroup
	)
	// Produce blocks while kgo's buffer is full (the sidecar is down):
	// stopping cancels that wait.
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { <-stop; cancel() }()
	for i := 0; pctx.Err() == nil; i++ {
		wg.Add(1)
		prod.Produce(pctx, &kgo.Record{Value: fmt.Appendf(nil, "r-%08d", i)}, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				errs[err.Error()]++
				mu.Unlock()
				return
			}
			mu.Lock()
			got[string(r.Value)] = ackedAt{r.Partition, r.Offset}
			mu.Unlock()
			acked.Add(1)
		})
	}
	prod.Close() // fails whatever is still buffered
	wg.Wait()
	return got, errs
}

// verifyAcked reads every partition up to its high watermark and checks
// that each acknowledged record is there exactly once, at the offset it was
// acknowledged with, and that offsets are dense from 0.
func verifyAcked(t *testing.T, ctx context.Context, sc *Sidecar, topic string, partitions int, acked map[string]ackedAt) {
	t.Helper()
	adm := kadm.NewClient(sc.Client())
	ends, err := adm.ListEndOffsets(ctx, topic)
	mustNoErr(t, "ListEndOffsets", err)
	total := 0
	ends.Each(func(o kadm.ListedOffset) {
		mustNoErr(t, "ListEndOffsets partition", o.Err)
		total += int(o.Offset)
	})
	got := consumeAll(t, ctx, sc, topic, partitions, total)
	where := make(map[string]ackedAt, total)
	for p, recs := range got {
		for i, r := range recs {
			if r.Offset != int64(i) {
				t.Fatalf("partition %d: offset %d at position %d; offsets must be dense", p, r.Offset, i)
			}
			v := string(r.Value)
			if prev, dup := where[v]; dup {
				t.Fatalf("record %s stored twice: %d/%d and %d/%d", v, prev.partition, prev.offset, p, r.Offset)
			}
			where[v] = ackedAt{int32(p), r.Offset}
		}
	}
	for v, at := range acked {
		if w, ok := where[v]; !ok {
			t.Fatalf("acknowledged record %s (%d/%d) is lost", v, at.partition, at.offset)
		} else if w != at {
			t.Fatalf("acknowledged record %s was acked at %d/%d but is at %d/%d", v, at.partition, at.offset, w.partition, w.offset)
		}
	}
	t.Logf("%d acknowledged records all present once; %d records in the log", len(acked), total)
}

// testRestart produces until 20k records are acknowledged, stops the
// sidecar with stopSidecar, starts another on the same data.dir (with
// startSidecar) and checks every acknowledged record.
func testRestart(t *testing.T, startSidecar func(dataDir string) *Sidecar, stopSidecar func(*Sidecar)) {
	const partitions = 4
	ctx := testCtx(t, 5*time.Minute)
	dir := t.TempDir()
	sc := startSidecar(dir)
	topic := "durability"
	resp, err := kadm.NewClient(sc.Client()).CreateTopic(ctx, partitions, 1, nil, topic)
	mustNoErr(t, "CreateTopic", err)
	mustNoErr(t, "CreateTopic result", resp.Err)

	var acked atomic.Int64
	stop := make(chan struct{})
	done := make(chan map[string]ackedAt)
	go func() { done <- produceUntilStopped(ctx, sc, topic, &acked, stop) }()
	// Stop the sidecar mid-load, once a good amount has been acknowledged.
	for acked.Load() < 20_000 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	stopSidecar(sc)
	close(stop)
	ackedRecords := <-done
	if len(ackedRecords) < 20_000 {
		t.Fatalf("only %d records acknowledged before the stop", len(ackedRecords))
	}

	sc2 := startSidecar(dir)
	verifyAcked(t, ctx, sc2, topic, partitions, ackedRecords)
}

// TestDurabilityAfterSIGKILL kills the sidecar mid-load: every record it
// acknowledged must be there after a restart on the same data.dir, exactly
// once, offsets dense (DESIGN invariants 1 and 2); on both metadata logs.
func TestDurabilityAfterSIGKILL(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, sets []string) {
		testRestart(t, func(dir string) *Sidecar { return StartSidecar(t, dir, sets...) }, (*Sidecar).Kill)
	})
}

// TestDurabilityAfterSIGTERM is the same with a graceful stop, which must
// also exit 0.
func TestDurabilityAfterSIGTERM(t *testing.T) {
	t.Parallel()
	testRestart(t, func(dir string) *Sidecar { return StartSidecar(t, dir) }, (*Sidecar).Stop)
}
