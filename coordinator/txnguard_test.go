package coordinator

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// withSeq returns b carrying the transaction guard's token seq.
func withSeq(b diskless.CommitBatch, seq int64) diskless.CommitBatch { b.TxnSeq = seq; return b }

// TestTxnGuard: a partition refuses a transactional batch whose token its
// producer's last marker there has reached — the batch of a transaction
// checked before the transaction ended and committed after its marker
// (DESIGN §Transactions, the hazard) — with INVALID_TXN_STATE; a later
// transaction's batch, another producer's and one without a token pass;
// a marker without a token leaves the guard as it is; the guard is the
// same after replaying the log and after loading a snapshot.
func TestTxnGuard(t *testing.T) {
	replayAndSnapshot(t, func(t *testing.T, e *env) {
		top := e.createTopic("t", 1, nil)
		check := func(what string, want *kerr.Error, b diskless.CommitBatch) {
			t.Helper()
			if r := e.commit(nextKey(), b)[0]; r.Err != want {
				t.Fatalf("%s: %v, want %v", what, r.Err, want)
			}
		}
		check("producer 7's batch of transaction 1", nil, withSeq(txnData(top, 0, 7, 0, 1), 1))
		check("producer 8's batch of transaction 4", nil, withSeq(txnData(top, 0, 8, 0, 1), 4))
		check("producer 7's COMMIT of transaction 1", nil, withSeq(marker(top, 0, 7, true), 1))
		check("producer 7's batch of transaction 1 after its marker", kerr.InvalidTxnState, withSeq(txnData(top, 0, 7, 1, 1), 1))
		if r := e.findCommitted(top, 0, 0); r.LastStableOffset != 1 {
			t.Fatalf("LSO %d, want 1 (producer 8's transaction only)", r.LastStableOffset)
		}
		check("producer 8's batch of transaction 4 (its own guard)", nil, withSeq(txnData(top, 0, 8, 1, 1), 4))
		e.reopenSame()
		check("after a restart: the batch of transaction 1", kerr.InvalidTxnState, withSeq(txnData(top, 0, 7, 1, 1), 1))
		check("producer 7's marker without a token", nil, withSeq(marker(top, 0, 7, false), 0))
		check("the batch of transaction 1 after a marker without a token", kerr.InvalidTxnState, withSeq(txnData(top, 0, 7, 1, 1), 1))
		check("a batch without a token", nil, withSeq(txnData(top, 0, 7, 1, 1), 0))
		check("producer 7's batch of transaction 2", nil, withSeq(txnData(top, 0, 7, 2, 1), 2))
		check("producer 7's ABORT of transaction 2", nil, withSeq(marker(top, 0, 7, false), 2))
		e.reopenSame()
		check("after a restart: the batch of transaction 2", kerr.InvalidTxnState, withSeq(txnData(top, 0, 7, 3, 1), 2))
		check("producer 7's batch of transaction 3", nil, withSeq(txnData(top, 0, 7, 3, 1), 3))
	})
}

// clusterMarkers is the marker writer of a coordinator of a cluster test:
// each marker committed at its partition's owner, with its token, as the
// produce pipeline's WriteMarkers does through the committer.
type clusterMarkers struct {
	cl      *cluster
	topic   diskless.Topic
	mu      sync.Mutex
	seqs    []int64 // every marker's token, in order
	epochs  []int32 // every marker's coordinator epoch, in order
	refused []error // the markers a partition refused
}

func (m *clusterMarkers) WriteMarkers(ctx context.Context, pid int64, epoch int16, seq int64, coordEpoch int32, commit bool, parts []diskless.TopicPartition) error {
	m.mu.Lock()
	m.seqs = append(m.seqs, seq)
	m.epochs = append(m.epochs, coordEpoch)
	m.mu.Unlock()
	for _, tp := range parts {
		b := withSeq(marker(m.topic, tp.Partition, pid, commit), seq)
		b.ProducerEpoch, b.CoordinatorEpoch = epoch, coordEpoch
		shard := diskless.ShardFor(tp.TopicID, tp.Partition, clusterShards)
		c := m.cl.owner(shard)
		if c == nil {
			return diskless.ErrNotCoordinator
		}
		rs, err := c.CommitFile(ctx, shard, commitRequest(c, nextKey(), b))
		if err != nil {
			return err
		}
		if rs[0].Err != nil {
			m.mu.Lock()
			m.refused = append(m.refused, fmt.Errorf("token %d in %v: %w", seq, tp, rs[0].Err))
			m.mu.Unlock()
		}
	}
	return nil
}

// TestTxnGuardAcrossCoordinators: the transactional id's shard on one
// coordinator, the partition's on the other. A batch checked on the
// partition's side (CheckTxnProduce through Remote) while the transaction
// is open and committed after its marker is refused; so is one checked
// before the id's shard moved (a takeover, as after a crash: the new owner
// fences the open transaction and writes its ABORT with the
// transaction's token), and after the partition's shard moved too.
func TestTxnGuardAcrossCoordinators(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 2)
	a, b := cl.nodes[0], cl.nodes[1]
	topic := cl.split("t", 8)
	m := &clusterMarkers{cl: cl, topic: topic}
	a.SetMarkerWriter(m)
	b.SetMarkerWriter(m)
	id := ""
	for i := 0; id == ""; i++ {
		if s := fmt.Sprintf("tx-%d", i); a.TxnShard(s) == 1 {
			id = s
		}
	}
	part := int32(-1)
	for p := range topic.Partitions {
		if a.ShardFor(topic.ID, p) == 2 {
			part = p
			break
		}
	}
	tp := diskless.TopicPartition{TopicID: topic.ID, Partition: part}
	// init retries CONCURRENT_TRANSACTIONS (the fencing abort under way)
	// a few times, as a producer does.
	init := func(c *Coordinator) (int64, int16) {
		t.Helper()
		for range 10 {
			resp := initTxnAt(t, c, id, 60000, -1, -1)
			if resp.ErrorCode != kerr.ConcurrentTransactions.Code {
				if resp.ErrorCode != 0 {
					t.Fatalf("InitTransactionalProducer: %v", kerr.ErrorForCode(resp.ErrorCode))
				}
				return resp.ProducerID, resp.ProducerEpoch
			}
		}
		t.Fatal("InitTransactionalProducer: CONCURRENT_TRANSACTIONS 10 times")
		return 0, 0
	}
	begin := func(c *Coordinator, pid int64, epoch int16) {
		t.Helper()
		if codes := addPartitionsAt(t, c, id, pid, epoch, false, "t", part); codes[0] != 0 {
			t.Fatalf("AddPartitionsToTxn: %v", codes)
		}
	}
	seqBatch := int32(0)
	// produce checks at B (through Remote: the id's shard is A's) and
	// returns the batch to commit, with its token.
	produce := func(pid int64, epoch int16) diskless.CommitBatch {
		t.Helper()
		seq, errs := b.CheckTxnProduce(ctx, id, pid, epoch, []diskless.TopicPartition{tp})
		if errs != nil || seq < 1 {
			t.Fatalf("CheckTxnProduce at the partition's side: %d %v", seq, errs)
		}
		bt := withSeq(txnData(topic, part, pid, seqBatch, 1), seq)
		bt.ProducerEpoch = epoch
		seqBatch++
		return bt
	}
	commitAt := func(c *Coordinator, bt diskless.CommitBatch) *kerr.Error {
		t.Helper()
		shard := c.ShardFor(topic.ID, part)
		rs, err := c.CommitFile(ctx, shard, commitRequest(c, nextKey(), bt))
		if err != nil {
			t.Fatalf("CommitFile: %v", err)
		}
		return rs[0].Err
	}

	pid, epoch := init(a)
	begin(a, pid, epoch)
	inTime, late := produce(pid, epoch), produce(pid, epoch)
	if errc := commitAt(b, inTime); errc != nil {
		t.Fatalf("the batch committed before the marker: %v", errc)
	}
	if code := endTxnAt(t, a, id, pid, epoch, true); code != 0 {
		t.Fatalf("EndTxn: %v", kerr.ErrorForCode(code))
	}
	if errc := commitAt(b, late); errc != kerr.InvalidTxnState {
		t.Fatalf("a batch checked before the end, committed after its marker: %v, want INVALID_TXN_STATE", errc)
	}

	// The next transaction begins at A; its batch is checked at B; then B
	// takes the id's shard over without A releasing it (A crashed), and a
	// new producer of the id fences the open transaction there.
	begin(a, pid, epoch)
	late = produce(pid, epoch)
	cl.host(1, 1)
	pid2, epoch2 := init(b)
	if pid2 != pid || epoch2 <= epoch {
		t.Fatalf("InitProducerId at the new owner: %d/%d after %d/%d", pid2, epoch2, pid, epoch)
	}
	if errc := commitAt(b, late); errc != kerr.InvalidTxnState {
		t.Fatalf("a batch checked before the coordinator's move, committed after the fencing abort: %v, want INVALID_TXN_STATE", errc)
	}
	// The partition's shard moves to A: the guard came with its log.
	if err := b.Release(2); err != nil {
		t.Fatal(err)
	}
	cl.host(0, 2)
	if errc := commitAt(a, late); errc != kerr.InvalidTxnState {
		t.Fatalf("after the partition's shard moved: %v, want INVALID_TXN_STATE", errc)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.seqs) != 2 || m.seqs[0] != 1 || m.seqs[1] != 2 || len(m.refused) != 0 {
		t.Fatalf("markers' tokens %v, want [1 2]; refused %v", m.seqs, m.refused)
	}
	// The id's shard's new owner wrote its markers under a higher
	// coordinator epoch (DESIGN §Transactions, the coordinator epoch).
	if len(m.epochs) != 2 || m.epochs[0] != 0 || m.epochs[1] != 1 {
		t.Fatalf("markers' coordinator epochs %v, want [0 1]", m.epochs)
	}
}

// TestTxnGuardStaleMarker: a marker whose token its producer's last marker
// in the partition has reached — the same transaction's marker written
// again, by a coordinator that lost the id's shard while its completion
// was in flight, or by a retried commit — changes nothing there, though
// the producer's next transaction is open in the partition by then: an
// ABORT of transaction 1 arriving after transaction 2's first batch does
// not abort that batch (nor move the LSO past it), and transaction 2's
// COMMIT then commits it; the same after replaying the log and after
// loading a snapshot. A marker without a token still ends whatever is
// open (WriteTxnMarkers, an operator's abort).
func TestTxnGuardStaleMarker(t *testing.T) {
	replayAndSnapshot(t, func(t *testing.T, e *env) {
		top := e.createTopic("t", 1, nil)
		check := func(what string, b diskless.CommitBatch) {
			t.Helper()
			if r := e.commit(nextKey(), b)[0]; r.Err != nil {
				t.Fatalf("%s: %v", what, r.Err)
			}
		}
		state := func(what string, lso int64, aborted []diskless.AbortedTxn) {
			t.Helper()
			r := e.findCommitted(top, 0, 0)
			if r.Err != nil || r.LastStableOffset != lso || !reflect.DeepEqual(r.Aborted, aborted) {
				t.Fatalf("%s: LSO %d aborted %+v (err %v), want %d, %+v", what, r.LastStableOffset, r.Aborted, r.Err, lso, aborted)
			}
		}
		check("0: transaction 1's batch", withSeq(txnData(top, 0, 7, 0, 1), 1))
		check("1: transaction 1's COMMIT", withSeq(marker(top, 0, 7, true), 1))
		check("2: transaction 2's batch", withSeq(txnData(top, 0, 7, 1, 1), 2))
		state("transaction 2 open", 2, nil)
		check("3: transaction 1's ABORT, stale", withSeq(marker(top, 0, 7, false), 1))
		state("after the stale marker", 2, nil)
		e.reopenSame()
		state("after the stale marker, reopened", 2, nil)
		check("4: transaction 2's COMMIT", withSeq(marker(top, 0, 7, true), 2))
		state("transaction 2 committed", 5, nil)
		check("5: transaction 3's batch", withSeq(txnData(top, 0, 7, 2, 1), 3))
		check("6: an operator's ABORT, no token", withSeq(marker(top, 0, 7, false), 0))
		state("transaction 3 aborted by the operator", 7, []diskless.AbortedTxn{{ProducerID: 7, FirstOffset: 5, LastOffset: 6}})
	})
}
