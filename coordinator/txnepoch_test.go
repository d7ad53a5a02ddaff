package coordinator

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/txn"
)

// withEpoch returns marker b carrying coordinator epoch epoch.
func withEpoch(b diskless.CommitBatch, epoch int32) diskless.CommitBatch {
	b.CoordinatorEpoch = epoch
	return b
}

// producerCoordEpoch returns DescribeProducers' CoordinatorEpoch of
// producer pid in partition tp, failing the test when it is not listed.
func producerCoordEpoch(t *testing.T, c *Coordinator, tp diskless.TopicPartition, pid int64) int32 {
	t.Helper()
	ps, kErr := c.DescribeProducers(tp)
	if kErr != nil {
		t.Fatalf("DescribeProducers: %v", kErr)
	}
	for _, p := range ps {
		if p.ProducerID == pid {
			return p.CoordinatorEpoch
		}
	}
	t.Fatalf("DescribeProducers: producer %d not listed in %+v", pid, ps)
	return 0
}

// TestTxnCoordinatorEpochFenced: a partition records the coordinator
// epoch of each producer's last marker (DescribeProducers answers it, −1
// before any) and refuses a marker of a lower epoch with
// TRANSACTION_COORDINATOR_FENCED, writing nothing of it — the open
// transaction stays open, the high watermark where it was —, as Kafka's
// partition leader does; one of the same or a higher epoch is taken. The
// same after replaying the log and after loading a snapshot.
func TestTxnCoordinatorEpochFenced(t *testing.T) {
	replayAndSnapshot(t, func(t *testing.T, e *env) {
		top := e.createTopic("t", 1, nil)
		tp := diskless.TopicPartition{TopicID: top.ID, Partition: 0}
		ends := func(what string, hwm, lso int64, epoch int32) {
			t.Helper()
			r := e.findCommitted(top, 0, 0)
			if r.Err != nil || r.HighWatermark != hwm || r.LastStableOffset != lso {
				t.Fatalf("%s: high watermark %d, LSO %d (err %v), want %d, %d", what, r.HighWatermark, r.LastStableOffset, r.Err, hwm, lso)
			}
			if got := producerCoordEpoch(t, e.c, tp, 7); got != epoch {
				t.Fatalf("%s: coordinator epoch %d, want %d", what, got, epoch)
			}
		}
		commitOK(t, e, "0: transaction 1's batch", withSeq(txnData(top, 0, 7, 0, 1), 1))
		ends("no marker yet", 1, 0, -1)
		commitOK(t, e, "1: transaction 1's COMMIT, epoch 3", withEpoch(withSeq(marker(top, 0, 7, true), 1), 3))
		ends("after epoch 3's marker", 2, 2, 3)
		commitOK(t, e, "2: transaction 2's batch", withSeq(txnData(top, 0, 7, 1, 1), 2))
		stale := withEpoch(withSeq(marker(top, 0, 7, false), 2), 2)
		if r := e.commit(nextKey(), stale)[0]; r.Err != kerr.TransactionCoordinatorFenced {
			t.Fatalf("a marker of epoch 2 after one of 3: %v, want TRANSACTION_COORDINATOR_FENCED", r.Err)
		}
		ends("after the fenced marker", 3, 2, 3)
		e.reopenSame()
		ends("reopened", 3, 2, 3)
		if r := e.commit(nextKey(), stale)[0]; r.Err != kerr.TransactionCoordinatorFenced {
			t.Fatalf("reopened, a marker of epoch 2: %v, want TRANSACTION_COORDINATOR_FENCED", r.Err)
		}
		commitOK(t, e, "3: transaction 2's COMMIT, epoch 3 again", withEpoch(withSeq(marker(top, 0, 7, true), 2), 3))
		ends("after the same epoch's marker", 4, 4, 3)
		commitOK(t, e, "4: transaction 3's batch", withSeq(txnData(top, 0, 7, 2, 1), 3))
		commitOK(t, e, "5: transaction 3's ABORT, epoch 4", withEpoch(withSeq(marker(top, 0, 7, false), 3), 4))
		ends("after epoch 4's marker", 6, 6, 4)
		e.reopenSame()
		ends("reopened again", 6, 6, 4)
		// Another producer has its own epoch: none yet.
		commitOK(t, e, "6: producer 8's batch", withSeq(txnData(top, 0, 8, 0, 1), 1))
		if got := producerCoordEpoch(t, e.c, tp, 8); got != -1 {
			t.Fatalf("producer 8's coordinator epoch %d, want -1", got)
		}
		commitOK(t, e, "7: producer 8's COMMIT, epoch 0", withEpoch(withSeq(marker(top, 0, 8, true), 1), 0))
		if got := producerCoordEpoch(t, e.c, tp, 8); got != 0 {
			t.Fatalf("producer 8's coordinator epoch %d, want 0", got)
		}
	})
}

// epochMarkers is a marker writer committing each marker to e's
// coordinator as the produce pipeline does — the refused ones answered
// per partition (diskless.MarkerErrors), the others written —, recording
// each call's coordinator epoch.
type epochMarkers struct {
	e      *env
	topic  diskless.Topic
	mu     sync.Mutex
	epochs []int32
}

func (m *epochMarkers) WriteMarkers(_ context.Context, pid int64, epoch int16, seq int64, coordEpoch int32, commit bool, parts []diskless.TopicPartition) error {
	m.mu.Lock()
	m.epochs = append(m.epochs, coordEpoch)
	m.mu.Unlock()
	refused := diskless.MarkerErrors{}
	for _, tp := range parts {
		b := withEpoch(withSeq(marker(m.topic, tp.Partition, pid, commit), seq), coordEpoch)
		b.ProducerEpoch = epoch
		rs, err := m.e.tryCommit(nextKey(), b)
		if err != nil {
			return err
		}
		if rs[0].Err != nil {
			refused[tp] = rs[0].Err
		}
	}
	if len(refused) > 0 {
		return refused
	}
	return nil
}

func (m *epochMarkers) calls() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int32(nil), m.epochs...)
}

// TestTxnMarkersCarryCoordinatorEpoch: the transaction coordinator of a
// shard takes the epoch after the largest of the shard's records 118 (0
// on a fresh shard), each time it opens; its records and markers carry
// it. A transaction an earlier owner prepared is written again under the
// new epoch before its markers go out with it (a record of it carrying
// the epoch durable first); the partition then holds the new epoch, and
// the earlier owner's marker — a deposed coordinator's, its completion in
// flight — is refused with TRANSACTION_COORDINATOR_FENCED.
func TestTxnMarkersCarryCoordinatorEpoch(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 2, func(c *Config) { c.TxnAbortCheckInterval = -1 })
	top := e.createTopic("t", 1, nil)
	tp := diskless.TopicPartition{TopicID: top.ID, Partition: 0}
	m := &epochMarkers{e: e, topic: top}
	e.c.SetMarkerWriter(m)
	shard := e.c.TxnShard("tx")
	ownEpoch := func() int32 { return e.c.shards[shard].txnEpoch.Load() }
	if ownEpoch() != 0 {
		t.Fatalf("a fresh shard's coordinator epoch %d, want 0", ownEpoch())
	}
	r := e.initTxn("tx", 60_000, -1, -1)
	pid, ep := r.ProducerID, r.ProducerEpoch
	seqBatch := int32(0)
	produce := func() {
		t.Helper()
		want(t, "add partitions", e.addPartitions("tx", pid, ep, false, "t", 0)[0], nil)
		seq, errs := e.c.CheckTxnProduce(ctx, "tx", pid, ep, []diskless.TopicPartition{tp})
		if errs != nil {
			t.Fatalf("CheckTxnProduce: %v", errs)
		}
		b := withSeq(txnData(top, 0, pid, seqBatch, 1), seq)
		b.ProducerEpoch = ep
		seqBatch++
		if r := e.commit(nextKey(), b)[0]; r.Err != nil {
			t.Fatalf("transactional batch: %v", r.Err)
		}
	}
	// completed checks the markers' calls so far — the last of epoch
	// epoch —, the id's state and the partition's recorded epoch.
	completed := func(what string, calls int, epoch int32, state txn.State) {
		t.Helper()
		if got := m.calls(); len(got) != calls || got[calls-1] != epoch {
			t.Fatalf("%s: markers' coordinator epochs %v, want %d calls, the last of %d", what, got, calls, epoch)
		}
		if st := e.txnState("tx"); st.CoordinatorEpoch != epoch || st.State != state {
			t.Fatalf("%s: state %v of coordinator epoch %d, want %v of %d", what, st.State, st.CoordinatorEpoch, state, epoch)
		}
		if got := producerCoordEpoch(t, e.c, tp, pid); got != epoch {
			t.Fatalf("%s: the partition's coordinator epoch %d, want %d", what, got, epoch)
		}
	}
	produce()
	want(t, "EndTxn", e.endTxn("tx", pid, ep, true), nil)
	completed("EndTxn", 1, 0, txn.CompleteCommit)

	// The next transaction's outcome alone (its markers not written: the
	// coordinator crashed), then a restart: the new coordinator's epoch is
	// 1, and it completes the transaction with it.
	produce()
	err := e.c.txnDo(ctx, shard, func(tc *txn.Coordinator, now int64) ([]*txn.StateRecord, func(error)) {
		_, rec := tc.EndTxn(now, "tx", pid, ep, false)
		return one(rec), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.reopen()
	e.c.SetMarkerWriter(m)
	if ownEpoch() != 1 {
		t.Fatalf("reopened: coordinator epoch %d, want 1", ownEpoch())
	}
	if st := e.txnState("tx"); st.CoordinatorEpoch != 0 || st.State != txn.PrepareAbort {
		t.Fatalf("reopened: state %v of coordinator epoch %d, want PrepareAbort of 0", st.State, st.CoordinatorEpoch)
	}
	if err := e.c.runTxnCheck(ctx); err != nil {
		t.Fatal(err)
	}
	completed("the check after the restart", 2, 1, txn.CompleteAbort)
	hwm := e.findCommitted(top, 0, 0).HighWatermark

	// The deposed coordinator's ABORT of the same transaction, late.
	err = m.WriteMarkers(ctx, pid, ep, 2, 0, false, []diskless.TopicPartition{tp})
	if !errors.Is(err, kerr.TransactionCoordinatorFenced) {
		t.Fatalf("a marker of coordinator epoch 0 after one of 1: %v, want TRANSACTION_COORDINATOR_FENCED", err)
	}
	if r := e.findCommitted(top, 0, 0); r.HighWatermark != hwm {
		t.Fatalf("the fenced marker moved the high watermark to %d from %d", r.HighWatermark, hwm)
	}
	// A restart takes the next epoch.
	e.reopen()
	if ownEpoch() != 2 {
		t.Fatalf("reopened again: coordinator epoch %d, want 2", ownEpoch())
	}
}

// TestEndedTagRoundTrip: the snapshot's transaction guards keep each
// producer's coordinator epoch (tag 0 of the entry, absent for −1), also
// for a guard of no token; the loader refuses a guard of neither token nor
// epoch, a negative token and an epoch not of 4 bytes
// (docs/format/metadata-records.md §Transactions in snapshots).
func TestEndedTagRoundTrip(t *testing.T) {
	ended := map[int64]endedTxn{
		3: {seq: 0, at: 10, coordEpoch: 2},
		5: {seq: 4, at: 11, coordEpoch: -1},
		9: {seq: 6, at: 12, coordEpoch: 0},
	}
	b := appendEndedTag(nil, ended)
	var got partTxns
	r := kbin.Reader{Src: b}
	if err := readEndedTag(&r, &got); err != nil || len(r.Src) != 0 || !reflect.DeepEqual(got.ended, ended) {
		t.Fatalf("round trip: %+v, %v, %d bytes left; want %+v", got.ended, err, len(r.Src), ended)
	}
	// One guard: producer 1, token seq, time 0, then its tags.
	guard := func(seq int64, tags ...byte) []byte {
		var f []byte
		f = kbin.AppendCompactArrayLen(f, 1)
		f = kbin.AppendInt64(f, 1)
		f = kbin.AppendInt64(f, seq)
		f = kbin.AppendInt64(f, 0)
		f = append(f, tags...)
		out := kbin.AppendUvarint(nil, 1)
		out = kbin.AppendUvarint(out, 0)
		out = kbin.AppendUvarint(out, uint32(len(f)))
		return append(out, f...)
	}
	for name, b := range map[string][]byte{
		"neither token nor epoch": guard(0, 0),
		"negative token":          guard(-1, 1, 0, 4, 0, 0, 0, 1),
		"epoch of 3 bytes":        guard(0, 1, 0, 3, 0, 0, 1),
	} {
		var p partTxns
		if err := readEndedTag(&kbin.Reader{Src: b}, &p); err == nil {
			t.Errorf("%s: loaded %+v", name, p.ended)
		}
	}
	var p partTxns
	if err := readEndedTag(&kbin.Reader{Src: guard(0, 1, 0, 4, 0, 0, 0, 7)}, &p); err != nil || p.ended[1].coordEpoch != 7 {
		t.Fatalf("a guard of epoch 7 and no token: %+v %v", p.ended, err)
	}
}

// TestTxnCompletedPastANewerEpoch: a transaction over t-0 and t-1 whose
// producer an operator's marker of a newer epoch moved on in t-1 (the
// transaction aborted there, kafka-transactions.sh abort with a later
// epoch): its COMMIT is written to t-0, refused in t-1
// (INVALID_PRODUCER_EPOCH), and the transaction completes — as Kafka's
// coordinator drops a marker its partition answers so — rather than
// staying PrepareCommit, retried for ever (DESIGN §Transactions).
func TestTxnCompletedPastANewerEpoch(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 2, func(c *Config) { c.TxnAbortCheckInterval = -1 })
	top := e.createTopic("t", 2, nil)
	m := &epochMarkers{e: e, topic: top}
	e.c.SetMarkerWriter(m)
	r := e.initTxn("tx", 60_000, -1, -1)
	pid, ep := r.ProducerID, r.ProducerEpoch
	tps := []diskless.TopicPartition{{TopicID: top.ID, Partition: 0}, {TopicID: top.ID, Partition: 1}}
	want(t, "add partitions", e.addPartitions("tx", pid, ep, false, "t", 0, 1)[0], nil)
	seq, errs := e.c.CheckTxnProduce(ctx, "tx", pid, ep, tps)
	if errs != nil {
		t.Fatalf("CheckTxnProduce: %v", errs)
	}
	for _, tp := range tps {
		b := withSeq(txnData(top, tp.Partition, pid, 0, 1), seq)
		b.ProducerEpoch = ep
		if r := e.commit(nextKey(), b)[0]; r.Err != nil {
			t.Fatalf("transactional batch to %v: %v", tp, r.Err)
		}
	}
	op := marker(top, 1, pid, false)
	op.ProducerEpoch = ep + 1
	if r := e.commit(nextKey(), op)[0]; r.Err != nil {
		t.Fatalf("the operator's ABORT of epoch %d: %v", ep+1, r.Err)
	}
	want(t, "EndTxn", e.endTxn("tx", pid, ep, true), nil)
	if st := e.txnState("tx"); st.State != txn.CompleteCommit {
		t.Fatalf("state %v, want CompleteCommit", st.State)
	}
	if r := e.findCommitted(top, 0, 0); r.HighWatermark != 2 {
		t.Fatalf("t-0's high watermark %d, want 2 (the batch, the COMMIT)", r.HighWatermark)
	}
	if r := e.findCommitted(top, 1, 0); r.HighWatermark != 2 {
		t.Fatalf("t-1's high watermark %d, want 2 (the batch, the operator's ABORT)", r.HighWatermark)
	}
}
