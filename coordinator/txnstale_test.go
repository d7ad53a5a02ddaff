package coordinator

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestTxnOffsetsEndedStale: the transactional id's shard on coordinator
// A, the group's on B. A's completion of transaction 1 is in flight (its
// markers being written) when A loses the id's shard; B takes it over,
// completes transaction 1 (its record 110 commits offset 5) and the
// producer's transaction 2 writes offset 9. A's completion then goes on:
// its record 110 of transaction 1 (DisklessEndTxnOffsets, token 1)
// reaches the group's shard and must not touch transaction 2's pending
// offset (token 2): transaction 2 aborts and the group's offset stays 5;
// transaction 3's commit then commits its own.
func TestTxnOffsetsEndedStale(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 2, func(c *Config) { c.TxnAbortCheckInterval = -1 })
	cl.split("t", 1)
	a, b := cl.nodes[0], cl.nodes[1]
	id, g := splitIDs(a)
	m := &blockingMarkers{entered: make(chan struct{}), release: make(chan struct{})}
	a.SetMarkerWriter(m)
	r := initTxnAt(t, a, id, 60_000, -1, -1)
	pid, ep := r.ProducerID, r.ProducerEpoch
	if codes := addPartitionsAt(t, a, id, pid, ep, false, "t", 0); codes[0] != 0 {
		t.Fatalf("AddPartitionsToTxn: %v", kerr.ErrorForCode(codes[0]))
	}
	want(t, "add offsets 1", addOffsetsAt(t, a, id, pid, ep, g), nil)
	want(t, "txn offset commit 1", txnCommitAt(t, b, id, pid, ep, g, "t", 0, 5), nil)
	ended := make(chan int16)
	go func() { ended <- endTxnAt(t, a, id, pid, ep, true) }()
	<-m.entered // A's completion of transaction 1 is writing its markers

	// A loses the id's shard; B takes it over and completes transaction 1.
	if err := a.Release(a.TxnShard(id)); err != nil {
		t.Fatal(err)
	}
	cl.host(1, a.TxnShard(id))
	if err := b.runTxnCheck(ctx); err != nil {
		t.Fatal(err)
	}
	if got := committedAt(b, g, "t", 0); got != 5 {
		t.Fatalf("after B completed transaction 1: %d, want 5", got)
	}
	want(t, "add offsets 2", addOffsetsAt(t, b, id, pid, ep, g), nil)
	want(t, "txn offset commit 2", txnCommitAt(t, b, id, pid, ep, g, "t", 0, 9), nil)

	// A's completion goes on: its record 110 of transaction 1 reaches B.
	close(m.release)
	want(t, "A's EndTxn of transaction 1", <-ended, nil)
	if got := committedAt(b, g, "t", 0); got != 5 {
		t.Fatalf("transaction 2's offset committed by transaction 1's late record 110: %d, want 5", got)
	}
	want(t, "abort 2", endTxnAt(t, b, id, pid, ep, false), nil)
	if got := committedAt(b, g, "t", 0); got != 5 {
		t.Fatalf("after transaction 2's abort: %d, want 5", got)
	}
	want(t, "add offsets 3", addOffsetsAt(t, b, id, pid, ep, g), nil)
	want(t, "txn offset commit 3", txnCommitAt(t, b, id, pid, ep, g, "t", 0, 11), nil)
	want(t, "commit 3", endTxnAt(t, b, id, pid, ep, true), nil)
	if got := committedAt(b, g, "t", 0); got != 11 {
		t.Fatalf("after transaction 3's commit: %d, want 11", got)
	}
}
