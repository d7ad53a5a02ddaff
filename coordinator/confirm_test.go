package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/group"
	"github.com/diskless-sidecar/sidecar/metalog"
	"github.com/diskless-sidecar/sidecar/metalog/metalogtest"
)

// TestReadIndexTakenOver: an owner whose shard another coordinator took
// over (and committed to) answers nothing from its stale state: not
// ListOffsets latest or earliest (SPEC §9), not an idempotent producer's
// sequence check — the batch its state calls out of order was committed
// by the new owner — but the retriable NOT_LEADER_OR_FOLLOWER, fenced as
// after a fenced write. Without the read-index rule A answers the high
// watermark of before the takeover and OUT_OF_ORDER_SEQUENCE.
func TestReadIndexTakenOver(t *testing.T) {
	ctx := context.Background()
	for _, read := range []string{"ListOffsetsLatest", "ListOffsetsEarliest", "SequenceCheck", "DescribeFiles"} {
		t.Run(read, func(t *testing.T) {
			cl := newCluster(t, 2)
			a, b := cl.nodes[0], cl.nodes[1]
			cl.host(0, 0, 1, 2, 3)
			topic, err := a.CreateTopic(ctx, "t", 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			s := a.ShardFor(topic.ID, 0)
			tp := diskless.TopicPartition{TopicID: topic.ID, Partition: 0}
			first := nextKey()
			if _, err := a.CommitFile(ctx, s, commitRequest(a, first, idem(topic, 0, 7, 0, 0, 5))); err != nil {
				t.Fatal(err)
			}
			if got := a.ListOffsets(ctx, tp, diskless.ListOffsetsLatest); got.Err != nil || got.Offset != 5 {
				t.Fatalf("ListOffsets latest at the owner: %+v", got)
			}
			// B takes the shard over without A's release (A cut off, say)
			// and commits the producer's next two batches.
			waitFor(t, b, "B's replica", func() bool { return b.Serving(s) != nil && hwm(b, topic, 0) == 5 })
			cl.host(1, s)
			for _, seq := range []int32{5, 10} {
				if rs, err := b.CommitFile(ctx, s, commitRequest(b, nextKey(), idem(topic, 0, 7, 0, seq, 5))); err != nil || rs[0].Err != nil {
					t.Fatalf("commit of sequence %d at the new owner: %+v %v", seq, rs, err)
				}
			}
			switch read {
			case "ListOffsetsLatest", "ListOffsetsEarliest":
				ts := diskless.ListOffsetsLatest
				if read == "ListOffsetsEarliest" {
					ts = diskless.ListOffsetsEarliest
				}
				if got := a.ListOffsets(ctx, tp, ts); got.Err != kerr.NotLeaderForPartition {
					t.Fatalf("%s at the owner taken over: %+v, want NOT_LEADER_OR_FOLLOWER (the new owner's high watermark is 15)", read, got)
				}
			case "SequenceCheck":
				// The retry of the batch of sequence 10, through A: A's
				// state last saw sequence 0–4.
				rs, err := a.CommitFile(ctx, s, commitRequest(a, nextKey(), idem(topic, 0, 7, 0, 10, 5)))
				if !errors.Is(err, diskless.ErrShardFenced) {
					t.Fatalf("a sequence check at the owner taken over: %+v %v, want ErrShardFenced (NOT_LEADER_OR_FOLLOWER)", rs, err)
				}
			case "DescribeFiles":
				if fs, err := a.DescribeFiles(ctx, s, []string{first}); !errors.Is(err, diskless.ErrShardFenced) {
					t.Fatalf("DescribeFiles at the owner taken over: %+v %v, want ErrShardFenced", fs, err)
				}
			}
			if err := a.Serving(s); !errors.Is(err, diskless.ErrShardFenced) {
				t.Fatalf("Serving after a confirmation found the takeover: %v, want ErrShardFenced (the placement releases it)", err)
			}
			// The new owner answers as ever.
			if got := b.ListOffsets(ctx, tp, diskless.ListOffsetsLatest); got.Err != nil || got.Offset != 15 {
				t.Fatalf("ListOffsets latest at the new owner: %+v", got)
			}
		})
	}
}

// TestReadIndexCurrent: an owner whose log is current answers from its
// state as before — a duplicate with its original offset, a gap
// OUT_OF_ORDER_SEQUENCE, ListOffsets the high watermark — after one
// confirmation per answer read without a write, none for a commit that
// writes.
func TestReadIndexCurrent(t *testing.T) {
	logs := map[int32]*testLog{}
	var mu sync.Mutex
	e := newEnv(t, 1, withTestLogs(logs, &mu))
	topic := e.createTopic("t", 1, nil)
	tp := diskless.TopicPartition{TopicID: topic.ID, Partition: 0}
	ctx := context.Background()
	l := logs[0]
	before := l.confirms.Load()
	e.commit(nextKey(), idem(topic, 0, 7, 0, 0, 5))
	if n := l.confirms.Load() - before; n != 0 {
		t.Fatalf("a commit that writes confirmed %d times, want 0 (its Append confirms)", n)
	}
	if rs := e.commit(nextKey(), idem(topic, 0, 7, 0, 0, 5)); rs[0].Err != nil || !rs[0].Duplicate || rs[0].BaseOffset != 0 {
		t.Fatalf("a duplicate: %+v, want a duplicate at offset 0", rs[0])
	}
	if rs := e.commit(nextKey(), idem(topic, 0, 7, 0, 10, 5)); rs[0].Err != kerr.OutOfOrderSequenceNumber {
		t.Fatalf("a gap: %+v, want OUT_OF_ORDER_SEQUENCE_NUMBER", rs[0])
	}
	if got := e.c.ListOffsets(ctx, tp, diskless.ListOffsetsLatest); got.Err != nil || got.Offset != 5 {
		t.Fatalf("ListOffsets latest: %+v", got)
	}
	if n := l.confirms.Load() - before; n != 3 {
		t.Fatalf("%d confirmations for three answers read from the state, want 3", n)
	}
}

// TestReadIndexCutOff: a log that cannot confirm within ConfirmTimeout
// (Kafka unreachable) makes every answer without a write the retriable
// error — NOT_LEADER_OR_FOLLOWER for ListOffsets and a commit's sequence
// check, ErrNotConfirmed (NOT_COORDINATOR) for a group's offsets,
// DeleteRecords' when nothing moves — without fencing the shard; once the
// log answers again (and the failure's confirmFailFast has passed), so
// does the shard.
func TestReadIndexCutOff(t *testing.T) {
	logs := map[int32]*testLog{}
	var mu sync.Mutex
	e := newEnv(t, 1, withTestLogs(logs, &mu), func(c *Config) { c.ConfirmTimeout = 50 * time.Millisecond })
	topic := e.createTopic("t", 1, nil)
	tp := diskless.TopicPartition{TopicID: topic.ID, Partition: 0}
	ctx := context.Background()
	e.commit(nextKey(), idem(topic, 0, 7, 0, 0, 5))
	l := logs[0]
	cut := func(on bool) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.confirmHook = nil
		if on {
			l.confirmHook = func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
		}
	}
	cut(true)
	if got := e.c.ListOffsets(ctx, tp, diskless.ListOffsetsLatest); got.Err != kerr.NotLeaderForPartition {
		t.Fatalf("ListOffsets cut off: %+v, want NOT_LEADER_OR_FOLLOWER", got)
	}
	if rs, err := e.tryCommit(nextKey(), idem(topic, 0, 7, 0, 0, 5)); !errors.Is(err, diskless.ErrNotConfirmed) || !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("a duplicate cut off: %+v %v, want ErrNotConfirmed with NOT_LEADER_OR_FOLLOWER", rs, err)
	}
	// The failure answers at once those that follow within
	// confirmFailFast: a request of many partitions does not wait
	// ConfirmTimeout for each.
	t0 := time.Now()
	if got := e.c.ListOffsets(ctx, tp, diskless.ListOffsetsEarliest); got.Err != kerr.NotLeaderForPartition {
		t.Fatalf("ListOffsets earliest cut off: %+v, want NOT_LEADER_OR_FOLLOWER", got)
	}
	if d := time.Since(t0); d > confirmFailFast {
		t.Logf("a read right after a failed confirmation took %v (a loaded machine?)", d)
	}
	if _, err := e.c.FetchOffsets(ctx, group.FetchRequest{Group: "g", MemberEpoch: -1}, false); !errors.Is(err, diskless.ErrNotConfirmed) {
		t.Fatalf("OffsetFetch cut off: %v, want ErrNotConfirmed", err)
	}
	if _, err := e.c.DeleteRecords(ctx, tp, 0); !errors.Is(err, diskless.ErrNotConfirmed) {
		t.Fatalf("DeleteRecords moving nothing, cut off: %v, want ErrNotConfirmed", err)
	}
	if err := e.c.Serving(0); err != nil {
		t.Fatalf("a shard that could not confirm is not fenced: Serving = %v", err)
	}
	cut(false)
	// A failed confirmation answers for confirmFailFast after it ended;
	// then the next one confirms.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got := e.c.ListOffsets(ctx, tp, diskless.ListOffsetsLatest)
		if got.Err == nil && got.Offset == 5 {
			break
		}
		if got.Err != kerr.NotLeaderForPartition || time.Now().After(deadline) {
			t.Fatalf("ListOffsets healed: %+v", got)
		}
	}
	if rs := e.commit(nextKey(), idem(topic, 0, 7, 0, 0, 5)); !rs[0].Duplicate || rs[0].BaseOffset != 0 {
		t.Fatalf("a duplicate healed: %+v", rs[0])
	}
	if low, err := e.c.DeleteRecords(ctx, tp, 0); err != nil || low != 0 {
		t.Fatalf("DeleteRecords healed: %d %v", low, err)
	}
}

// TestReadIndexCoalesced: reads that arrive while a confirmation is in
// flight share the next one — never the one in flight, which started
// before they arrived — so a wave of reads costs one confirmation.
func TestReadIndexCoalesced(t *testing.T) {
	logs := map[int32]*testLog{}
	var mu sync.Mutex
	e := newEnv(t, 1, withTestLogs(logs, &mu))
	topic := e.createTopic("t", 1, nil)
	tp := diskless.TopicPartition{TopicID: topic.ID, Partition: 0}
	ctx := context.Background()
	e.commit(nextKey(), plain(topic, 0, 5))
	l := logs[0]
	entered, gate := make(chan struct{}), make(chan struct{})
	var calls int
	l.mu.Lock()
	l.confirmHook = func(context.Context) error {
		l.mu.Lock()
		calls++
		n := calls
		l.mu.Unlock()
		if n == 1 {
			close(entered)
			<-gate
			return errors.New("test: the first confirmation fails")
		}
		return nil
	}
	l.mu.Unlock()
	before := l.confirms.Load()
	first := make(chan diskless.ListOffsetsResult, 1)
	go func() { first <- e.c.ListOffsets(ctx, tp, diskless.ListOffsetsLatest) }()
	select {
	case <-entered:
	case got := <-first:
		t.Fatalf("ListOffsets answered without a confirmation: %+v", got)
	}
	const n = 20
	results := make(chan diskless.ListOffsetsResult, n)
	for range n {
		go func() { results <- e.c.ListOffsets(ctx, tp, diskless.ListOffsetsLatest) }()
	}
	// Wait until all of them joined the wave after the one in flight.
	s := e.c.shards[0]
	for deadline := time.Now().Add(10 * time.Second); ; {
		s.confirms.mu.Lock()
		joined := s.confirms.newest.callers
		s.confirms.mu.Unlock()
		if joined == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d reads joined the next confirmation", joined, n)
		}
		time.Sleep(time.Millisecond)
	}
	close(gate)
	if got := <-first; got.Err != kerr.NotLeaderForPartition {
		t.Fatalf("the read of the failed confirmation: %+v", got)
	}
	for range n {
		if got := <-results; got.Err != nil || got.Offset != 5 {
			t.Fatalf("a read that arrived during the failed confirmation: %+v, want the answer of the next one", got)
		}
	}
	if got := l.confirms.Load() - before; got != 2 {
		t.Fatalf("%d reads in two waves: %d confirmations, want 2", n+1, got)
	}
}

// BenchmarkListOffsetsConfirmed: ListOffsets latest at a shard's owner,
// from 1 and from 64 goroutines per CPU, over a log whose Confirm takes
// rtt (0: the in-memory log, which answers at once — the rule's own CPU
// cost; 1ms: about a ListOffsets round trip to a loaded Kafka,
// bench/RESULTS.md entry 25), and beside them the lookup alone, as
// ListOffsets was before the rule (unconfirmed). It reports the
// confirmations per ListOffsets: with 64 readers, waves share one.
func BenchmarkListOffsetsConfirmed(b *testing.B) {
	for _, rtt := range []time.Duration{-1, 0, time.Millisecond} {
		for _, readers := range []int{1, 64} {
			name := fmt.Sprintf("rtt=%v/readers=%d", rtt, readers)
			if rtt < 0 {
				name = fmt.Sprintf("unconfirmed/readers=%d", readers)
			}
			b.Run(name, func(b *testing.B) {
				mem := &metalogtest.Memory{}
				var l0 *testLog
				c, err := Open(Config{NumShards: 1, Logger: discardLogger(), LifecycleInterval: -1,
					OpenLog: func(shard int32) (metalog.Log, error) {
						inner, err := mem.Open(shard)
						if err != nil {
							return nil, err
						}
						l0 = &testLog{inner: inner}
						if rtt > 0 {
							l0.confirmHook = func(ctx context.Context) error {
								time.Sleep(rtt)
								return inner.Confirm(ctx)
							}
						}
						return l0, nil
					}})
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				ctx := context.Background()
				topic, err := c.CreateTopic(ctx, "t", 1, nil)
				if err != nil {
					b.Fatal(err)
				}
				tp := diskless.TopicPartition{TopicID: topic.ID, Partition: 0}
				if _, err := c.CommitFile(ctx, 0, commitRequest(c, nextKey(), plain(topic, 0, 5))); err != nil {
					b.Fatal(err)
				}
				before := l0.confirms.Load()
				b.SetParallelism(readers) // × GOMAXPROCS goroutines
				b.ResetTimer()
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if rtt < 0 {
							// What ListOffsets did before the rule.
							s, p, err := c.lookup(c.catalog.Load(), tp.TopicID, tp.Partition)
							if err != nil {
								b.Error(err)
								return
							}
							s.mu.st.listOffsets(p, diskless.ListOffsetsLatest)
							s.unlock()
							continue
						}
						if got := c.ListOffsets(ctx, tp, diskless.ListOffsetsLatest); got.Err != nil {
							b.Error(got.Err)
							return
						}
					}
				})
				b.ReportMetric(float64(l0.confirms.Load()-before)/float64(b.N), "confirms/op")
			})
		}
	}
}
