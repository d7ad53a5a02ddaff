package produce

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/batchtest"
)

// fakeTxns answers CheckTxnProduce from refuse (partition → error; absent:
// accepted) and counts the checks.
type fakeTxns struct {
	mu     sync.Mutex
	refuse map[int32]*kerr.Error
	checks int
}

func (f *fakeTxns) CheckTxnProduce(_ context.Context, _ string, _ int64, _ int16, tp diskless.TopicPartition, _ int16) (int64, *kerr.Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checks++
	if e := f.refuse[tp.Partition]; e != nil {
		return 0, e
	}
	return 1, nil
}

// txnBatch is a transactional batch of producer 5, epoch 0, n records
// from sequence seq.
func txnBatch(seq int32, n int) []byte {
	return batchtest.Make(batchtest.Options{BaseTimestamp: time.Now().UnixMilli(), ProducerID: 5, BaseSequence: seq,
		ExtraAttributes: batch.AttrTransactional}, batchtest.Values("t", n)...)
}

// TestTransactionalProduce: with a transaction coordinator, a
// transactional batch is accepted where the coordinator's check passes and
// committed as TxnData, gets the check's error elsewhere, and
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED in a request without a
// transactional id (SPEC §15); no batch is left counted in flight.
func TestTransactionalProduce(t *testing.T) {
	txns := &fakeTxns{refuse: map[int32]*kerr.Error{1: kerr.InvalidTxnState}}
	r := newRig(t, Config{CommitInterval: time.Millisecond, Transactions: txns})
	req := request(9, -1, "ct", part{0, txnBatch(0, 2)}, part{1, txnBatch(0, 1)}, part{2, good(1)})
	id := "tx"
	req.TransactionID = &id
	if got := codes(r.h.Produce(context.Background(), req)()); got[0] != 0 || got[1] != kerr.InvalidTxnState.Code || got[2] != 0 {
		t.Fatalf("codes %v, want [0 %d 0]", got, kerr.InvalidTxnState.Code)
	}
	if txns.checks != 2 {
		t.Fatalf("%d checks, want 2 (the transactional batches)", txns.checks)
	}
	var kinds []int8
	for _, key := range r.cm.order {
		for _, b := range r.cm.got[key] {
			kinds = append(kinds, b.Txn)
		}
	}
	if len(kinds) != 2 || kinds[0] != diskless.TxnData || kinds[1] != diskless.TxnNone {
		t.Fatalf("committed kinds %v, want [TxnData TxnNone]", kinds)
	}
	noID := request(9, -1, "ct", part{0, txnBatch(2, 1)})
	wantAll(t, r.h.Produce(context.Background(), noID)(), 1, kerr.TransactionalIDAuthorizationFailed.Code, "no transactional id")
	r.h.txnMu.Lock()
	left := len(r.h.txnMu.gates)
	r.h.txnMu.Unlock()
	if left != 0 {
		t.Fatalf("%d producers left with batches in flight", left)
	}
}

// TestMarkersWaitForTransactionalBatches: the hazard of DESIGN
// §Transactions. While a transactional batch of the producer is in flight
// (its upload held), WriteMarkers appends nothing: given up by its
// context, it has put no marker into any file. Once the batch's file is
// answered the marker is written, in a later file, committed after the
// data.
func TestMarkersWaitForTransactionalBatches(t *testing.T) {
	txns := &fakeTxns{}
	release := make(chan struct{})
	r := newRig(t, Config{CommitInterval: time.Millisecond, Transactions: txns})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open) // before the rig's Close, which waits for the upload
	r.up.mu.Lock()
	r.up.block = func(n int) {
		if n == 1 {
			<-release
		}
	}
	r.up.mu.Unlock()
	req := request(9, -1, "ct", part{0, txnBatch(0, 3)})
	id := "tx"
	req.TransactionID = &id
	wait := r.h.Produce(context.Background(), req)
	parts := []diskless.TopicPartition{{TopicID: diskless.TopicID{1}, Partition: 0}}
	// The data's file is sealed and its upload held.
	for {
		r.up.mu.Lock()
		n := r.up.n
		r.up.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	err := r.h.WriteMarkers(ctx, 5, 0, 1, true, parts)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WriteMarkers with a batch in flight: %v, want the context's deadline", err)
	}
	r.h.mu.Lock()
	active, seq := r.h.mu.active, r.h.mu.seq
	r.h.mu.Unlock()
	if active != nil || seq != 1 {
		t.Fatalf("a marker was appended while the batch was in flight (files %d, active %v)", seq, active != nil)
	}

	open()
	if got := codes(wait()); got[0] != 0 {
		t.Fatalf("data batch: code %d", got[0])
	}
	if err := r.h.WriteMarkers(context.Background(), 5, 0, 1, true, parts); err != nil {
		t.Fatalf("WriteMarkers: %v", err)
	}
	r.cm.mu.Lock()
	defer r.cm.mu.Unlock()
	if len(r.cm.order) != 2 {
		t.Fatalf("%d files committed, want 2", len(r.cm.order))
	}
	data, marker := r.cm.got[r.cm.order[0]], r.cm.got[r.cm.order[1]]
	if len(data) != 1 || data[0].Txn != diskless.TxnData || len(marker) != 1 || marker[0].Txn != diskless.TxnCommit ||
		marker[0].ProducerID != 5 || marker[0].LastOffsetDelta != 0 {
		t.Fatalf("committed %+v then %+v", data, marker)
	}
	if base := r.cm.hwm[parts[0]]; base != 4 {
		t.Fatalf("partition end %d, want 4 (3 records, then the marker)", base)
	}
}

// TestMarkersSkipPartitionsTakingNoProduce: a marker for a partition whose
// topic is gone or DISABLED is skipped, not retried forever; one whose
// topic is DISABLING is written (SPEC §10: its shard takes the marker of a
// transaction open there).
func TestMarkersSkipPartitionsTakingNoProduce(t *testing.T) {
	r := newRig(t, Config{CommitInterval: time.Millisecond, Transactions: &fakeTxns{}})
	cat := r.h.catalog.(*fakeCatalog)
	dis, off := cat.topics["ct"], cat.topics["ct"]
	dis.ID, dis.Name = diskless.TopicID{3}, "dis"
	dis.Disablement.State = diskless.TopicDisabling
	cat.topics["dis"] = dis
	off.ID, off.Name = diskless.TopicID{4}, "off"
	off.Disablement.State = diskless.TopicDisabled
	cat.topics["off"] = off
	parts := []diskless.TopicPartition{{TopicID: diskless.TopicID{1}, Partition: 1}, {TopicID: dis.ID, Partition: 0}, {TopicID: off.ID, Partition: 0}, {TopicID: diskless.TopicID{9}, Partition: 0}}
	if err := r.h.WriteMarkers(context.Background(), 5, 0, 1, false, parts); err != nil {
		t.Fatalf("WriteMarkers: %v", err)
	}
	r.cm.mu.Lock()
	defer r.cm.mu.Unlock()
	if len(r.cm.order) != 1 {
		t.Fatalf("committed %v", r.cm.got)
	}
	got := r.cm.got[r.cm.order[0]]
	if len(got) != 2 || got[0].TopicID != parts[0].TopicID || got[1].TopicID != dis.ID || got[0].Txn != diskless.TxnAbort || got[1].Txn != diskless.TxnAbort {
		t.Fatalf("committed %v, want the markers of %v and %v", r.cm.got, parts[0], parts[1])
	}
}
