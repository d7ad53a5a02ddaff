package e2e

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// eosMember runs a kgo GroupTransactSession consume-transform-produce loop
// (each input record's value copied to the same partition of out, with
// the consumed offsets, in one transaction per poll of at most 100
// records) until ctx ends, or —
// when abandon is set — until it has committed once and then holds a
// transaction open: it closes its client without ending it, as a member
// that dies mid-transaction leaves it. It returns when done.
func eosMember(t *testing.T, ctx context.Context, addr, name, in, out string, abandon bool) (commits, aborts int, abandoned bool) {
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(addr),
		kgo.TransactionalID(name),
		kgo.TransactionTimeout(8*time.Second),
		kgo.ConsumerGroup("eos"),
		kgo.ConsumeTopics(in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.SessionTimeout(3*time.Second),
		kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	defer sess.Close()
	for ctx.Err() == nil {
		fs := sess.PollRecords(ctx, 100)
		if fs.IsClientClosed() {
			return
		}
		if fs.Empty() {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Logf("%s: Begin: %v", name, err)
			continue
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Topic: out, Partition: r.Partition, Value: r.Value}, nil)
		})
		if abandon && commits > 0 {
			// Whatever was produced is in flight or written; no End.
			sess.Client().Flush(ctx)
			return commits, aborts, true
		}
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Logf("%s: End: %v", name, err)
		}
		if committed {
			commits++
		} else {
			aborts++
		}
	}
	return commits, aborts, false
}

// TestTransactionsExactlyOnce: kgo's GroupTransactSession copies a topic
// to another between two diskless topics, consume-transform-produce with
// the consumed offsets in each transaction, by two members, one of which
// dies mid-transaction (its client closed with a transaction open, left to
// time out), while the sidecar is SIGKILLed once and restarted on its
// data.dir: the output read with read_committed holds every input record
// exactly once (SPEC §15).
func TestTransactionsExactlyOnce(t *testing.T) {
	const (
		partitions = 4
		n          = 3000
		in, out    = "eos-in", "eos-out"
	)
	ctx := testCtx(t, 5*time.Minute)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	mustNoErr(t, "free port", err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	sets := append(append([]string(nil), groupSidecarSets...), fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d", port))
	sc := StartSidecar(t, dir, sets...)
	addr := sc.Addr
	createTopic(t, ctx, sc, in, partitions, nil)
	createTopic(t, ctx, sc, out, partitions, nil)
	want := produceValues(t, ctx, sc, in, partitions, 0, n)

	// The output as a read_committed consumer sees it, as it comes.
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		read atomic.Int64
	)
	reader, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(out), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	mustNoErr(t, "reader", err)
	defer reader.Close()
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		for rctx.Err() == nil {
			reader.PollFetches(rctx).EachRecord(func(r *kgo.Record) {
				mu.Lock()
				seen[string(r.Value)]++
				mu.Unlock()
				read.Add(1)
			})
		}
	})

	mctx, mcancel := context.WithCancel(ctx)
	defer mcancel()
	var members sync.WaitGroup
	var bAbandoned atomic.Bool
	members.Go(func() {
		c, a, _ := eosMember(t, mctx, addr, "eos-a", in, out, false)
		t.Logf("eos-a: %d transactions committed, %d aborted", c, a)
	})
	members.Go(func() {
		c, a, ab := eosMember(t, mctx, addr, "eos-b", in, out, true)
		bAbandoned.Store(ab)
		t.Logf("eos-b: %d transactions committed, %d aborted, one abandoned: %v", c, a, ab)
	})

	waitFor(t, 2*time.Minute, "a third of the output", func() bool { return read.Load() >= n/3 })
	t.Logf("SIGKILL with %d output records read", read.Load())
	sc.Kill()
	sc = StartSidecar(t, dir, sets...)
	if sc.Addr != addr {
		t.Fatalf("restarted on %s, not %s", sc.Addr, addr)
	}
	waitFor(t, 3*time.Minute, "every input record in the output", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= n
	})
	mcancel()
	members.Wait()
	// A last look for late duplicates: a plain record after everything
	// in each output partition; once the reader has them all (past any
	// transaction the stopped members left open, aborted at its
	// timeout), it has read everything committed.
	sentinels := make([]string, partitions)
	for p := range sentinels {
		sentinels[p] = fmt.Sprintf("end-%d", p)
	}
	plain := sc.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p, v := range sentinels {
		mustNoErr(t, "sentinel", plain.ProduceSync(ctx, &kgo.Record{Topic: out, Partition: int32(p), Value: []byte(v)}).FirstErr())
	}
	waitFor(t, 2*time.Minute, "the sentinels", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, v := range sentinels {
			if seen[v] == 0 {
				return false
			}
		}
		return true
	})
	rcancel()
	wg.Wait()
	for _, v := range sentinels {
		delete(seen, v)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, v := range want {
		if seen[v] != 1 {
			t.Errorf("input %q is in the read_committed output %d times", v, seen[v])
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct values in the output, want %d", len(seen), n)
	}
	if !bAbandoned.Load() {
		t.Error("eos-b never left a transaction open")
	}
}
