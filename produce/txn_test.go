package produce

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/batchtest"
)

// fakeTxns answers CheckTxnProduce: every partition all's error when
// set (a fenced producer), else each partition refuse's (partition →
// error; absent: allowed), with token 1; it records each call.
type fakeTxns struct {
	mu     sync.Mutex
	refuse map[int32]*kerr.Error
	all    *kerr.Error
	calls  []txnCall
}

// txnCall is one CheckTxnProduce call's producer and partitions.
type txnCall struct {
	pid   int64
	epoch int16
	tps   []diskless.TopicPartition
}

func (f *fakeTxns) CheckTxnProduce(_ context.Context, _ string, pid int64, epoch int16, tps []diskless.TopicPartition) (int64, []*kerr.Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, txnCall{pid, epoch, slices.Clone(tps)})
	var errs []*kerr.Error
	for i, tp := range tps {
		e := f.all
		if e == nil {
			e = f.refuse[tp.Partition]
		}
		if e != nil {
			if errs == nil {
				errs = make([]*kerr.Error, len(tps))
			}
			errs[i] = e
		}
	}
	return 1, errs
}

// checks returns the calls made so far.
func (f *fakeTxns) checks() []txnCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// txnBatch is a transactional batch of producer 5, epoch 0, n records
// from sequence seq.
func txnBatch(seq int32, n int) []byte { return txnBatchOf(5, seq, n) }

// txnBatchOf is txnBatch for producer pid.
func txnBatchOf(pid int64, seq int32, n int) []byte {
	return batchtest.Make(batchtest.Options{BaseTimestamp: time.Now().UnixMilli(), ProducerID: pid, BaseSequence: seq,
		ExtraAttributes: batch.AttrTransactional}, batchtest.Values("t", n)...)
}

// committed returns every batch r's committer got, in commit order.
func (r *rig) committed() []diskless.CommitBatch {
	r.cm.mu.Lock()
	defer r.cm.mu.Unlock()
	var out []diskless.CommitBatch
	for _, key := range r.cm.order {
		out = append(out, r.cm.got[key]...)
	}
	return out
}

// inFlight returns the number of producers with transactional batches
// counted in flight.
func (r *rig) inFlight() int {
	r.h.txnMu.Lock()
	defer r.h.txnMu.Unlock()
	return len(r.h.txnMu.gates)
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
	if c := txns.checks(); len(c) != 1 || len(c[0].tps) != 2 {
		t.Fatalf("checks %+v, want one of the 2 transactional batches' partitions", c)
	}
	var kinds []int8
	for _, b := range r.committed() {
		kinds = append(kinds, b.Txn)
	}
	if len(kinds) != 2 || kinds[0] != diskless.TxnData || kinds[1] != diskless.TxnNone {
		t.Fatalf("committed kinds %v, want [TxnData TxnNone]", kinds)
	}
	noID := request(9, -1, "ct", part{0, txnBatch(2, 1)})
	wantAll(t, r.h.Produce(context.Background(), noID)(), 1, kerr.TransactionalIDAuthorizationFailed.Code, "no transactional id")
	if left := r.inFlight(); left != 0 {
		t.Fatalf("%d producers left with batches in flight", left)
	}
}

// TestTxnStateErrorByVersion: INVALID_TXN_STATE for a transactional batch
// whose transaction is not open — from the check (ct/1) or from the
// partition's shard, its marker there first (ct/2) — is answered
// INVALID_TXN_STATE up to Produce v10 and TRANSACTION_ABORTABLE from v11
// (KIP-890, SPEC §15), both paths alike.
func TestTxnStateErrorByVersion(t *testing.T) {
	for _, tc := range []struct {
		version int16
		want    int16
	}{{9, kerr.InvalidTxnState.Code}, {10, kerr.InvalidTxnState.Code}, {11, kerr.TransactionAbortable.Code}, {12, kerr.TransactionAbortable.Code}} {
		txns := &fakeTxns{refuse: map[int32]*kerr.Error{1: kerr.InvalidTxnState}}
		r := newRig(t, Config{CommitInterval: time.Millisecond, Transactions: txns})
		r.cm.refuse = map[diskless.TopicPartition]*kerr.Error{{TopicID: diskless.TopicID{1}, Partition: 2}: kerr.InvalidTxnState}
		req := request(tc.version, -1, "ct", part{0, txnBatch(0, 1)}, part{1, txnBatch(0, 1)}, part{2, txnBatch(0, 1)})
		id := "tx"
		req.TransactionID = &id
		got := codes(r.h.Produce(context.Background(), req)())
		if want := []int16{0, tc.want, tc.want}; !slices.Equal(got, want) {
			t.Fatalf("v%d: codes %v, want %v", tc.version, got, want)
		}
	}
}

// TestTransactionalProduceChecksOnce: a request's transactional batches
// are checked with one call for all their partitions — a request carries
// one transactional id, producer id and epoch —, each partition's answer
// landing on that partition: refused partitions get their error and are
// not stored, the others are committed as TxnData with the check's token;
// a producer's error (fenced) lands on every transactional partition and
// none on the request's other batches. A request mixing producers (no
// client sends one) is checked once per producer. No batch is left
// counted in flight.
func TestTransactionalProduceChecksOnce(t *testing.T) {
	id := "tx"
	// ct/0–2 transactional, lat/0 not.
	req := func(pid2 int64) *kmsg.ProduceRequest {
		q := request(11, -1, "ct", part{0, txnBatch(0, 2)}, part{1, txnBatch(0, 1)}, part{2, txnBatchOf(pid2, 0, 3)})
		lat := request(11, -1, "lat", part{0, good(1)})
		q.Topics = append(q.Topics, lat.Topics...)
		q.TransactionID = &id
		return q
	}
	ct := diskless.TopicID{1}
	tps := []diskless.TopicPartition{{TopicID: ct, Partition: 0}, {TopicID: ct, Partition: 1}, {TopicID: ct, Partition: 2}}
	for _, tc := range []struct {
		name      string
		txns      *fakeTxns
		pid2      int64 // ct/2's producer
		want      []int16
		wantCalls []txnCall
		// wantStored are the partitions of ct stored as TxnData.
		wantStored []int32
	}{
		{"one partition not in the transaction", &fakeTxns{refuse: map[int32]*kerr.Error{1: kerr.InvalidTxnState}}, 5,
			[]int16{0, kerr.TransactionAbortable.Code, 0, 0}, []txnCall{{5, 0, tps}}, []int32{0, 2}},
		{"fenced", &fakeTxns{all: kerr.InvalidProducerEpoch}, 5,
			[]int16{kerr.InvalidProducerEpoch.Code, kerr.InvalidProducerEpoch.Code, kerr.InvalidProducerEpoch.Code, 0}, []txnCall{{5, 0, tps}}, nil},
		{"all allowed", &fakeTxns{}, 5, []int16{0, 0, 0, 0}, []txnCall{{5, 0, tps}}, []int32{0, 1, 2}},
		{"two producers", &fakeTxns{refuse: map[int32]*kerr.Error{2: kerr.InvalidProducerIDMapping}}, 6,
			[]int16{0, 0, kerr.InvalidProducerIDMapping.Code, 0}, []txnCall{{5, 0, tps[:2]}, {6, 0, tps[2:]}}, []int32{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Config{CommitInterval: time.Millisecond, Transactions: tc.txns})
			if got := codes(r.h.Produce(context.Background(), req(tc.pid2))()); !slices.Equal(got, tc.want) {
				t.Fatalf("codes %v, want %v", got, tc.want)
			}
			if got := tc.txns.checks(); !reflect.DeepEqual(got, tc.wantCalls) {
				t.Fatalf("checks %+v, want %+v", got, tc.wantCalls)
			}
			var stored []int32
			plain := 0
			for _, b := range r.committed() {
				switch {
				case b.TopicID == ct && b.Txn == diskless.TxnData && b.TxnSeq == 1:
					stored = append(stored, b.Partition)
				case b.TopicID != ct && b.Txn == diskless.TxnNone:
					plain++
				default:
					t.Fatalf("committed %+v", b)
				}
			}
			if !slices.Equal(stored, tc.wantStored) || plain != 1 {
				t.Fatalf("stored transactional %v and %d other, want %v and 1", stored, plain, tc.wantStored)
			}
			if left := r.inFlight(); left != 0 {
				t.Fatalf("%d producers left with batches in flight", left)
			}
		})
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
	err := r.h.WriteMarkers(ctx, 5, 0, 1, 0, true, parts)
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
	if err := r.h.WriteMarkers(context.Background(), 5, 0, 1, 0, true, parts); err != nil {
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
	if err := r.h.WriteMarkers(context.Background(), 5, 0, 1, 0, false, parts); err != nil {
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

// TestMarkersRefusedPerPartition: a marker its partition's commit refuses
// (INVALID_PRODUCER_EPOCH here, a newer epoch committed there since the
// caller's check) is named with its error in the diskless.MarkerErrors
// returned, alone; the other partitions' markers are committed — so
// WriteTxnMarkers answers each partition its own error (SPEC §15).
func TestMarkersRefusedPerPartition(t *testing.T) {
	r := newRig(t, Config{CommitInterval: time.Millisecond, Transactions: &fakeTxns{}})
	parts := []diskless.TopicPartition{{TopicID: diskless.TopicID{1}, Partition: 0}, {TopicID: diskless.TopicID{1}, Partition: 1}, {TopicID: diskless.TopicID{1}, Partition: 2}}
	r.cm.refuse = map[diskless.TopicPartition]*kerr.Error{parts[1]: kerr.InvalidProducerEpoch}
	err := r.h.WriteMarkers(context.Background(), 5, 0, 1, 0, false, parts)
	var refused diskless.MarkerErrors
	if !errors.As(err, &refused) || !reflect.DeepEqual(refused, diskless.MarkerErrors{parts[1]: kerr.InvalidProducerEpoch}) {
		t.Fatalf("WriteMarkers: %v, want the marker of %v alone refused, INVALID_PRODUCER_EPOCH", err, parts[1])
	}
	r.cm.mu.Lock()
	defer r.cm.mu.Unlock()
	for _, tp := range []diskless.TopicPartition{parts[0], parts[2]} {
		if r.cm.hwm[tp] != 1 {
			t.Errorf("partition %v: end %d, want 1 (its marker committed)", tp, r.cm.hwm[tp])
		}
	}
}
