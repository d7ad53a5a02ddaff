package coordinator

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/group"
)

// pausedCheck is a Remote whose next TxnOffsetCommit check, once armed,
// reports on checked when answered and returns only on resume: the
// window between TxnOffsetCommit's check and its write.
type pausedCheck struct {
	Remote
	armed   atomic.Bool
	checked chan diskless.TxnCheckResult
	resume  chan struct{}
}

func (p *pausedCheck) CheckTxn(ctx context.Context, shard int32, req diskless.TxnCheck) (diskless.TxnCheckResult, error) {
	res, err := p.Remote.CheckTxn(ctx, shard, req)
	if req.Group != "" && p.armed.CompareAndSwap(true, false) {
		p.checked <- res
		<-p.resume
	}
	return res, err
}

// TestTxnOffsetCommitEndedBeforeWrite: the transactional id's shard on
// coordinator A, the group's on B. TxnOffsetCommit at B is checked (the
// transaction open, its token answered); before its write, EndTxn at A
// ends the transaction and its record 110 reaches B; the write is then
// refused — INVALID_TXN_STATE for v3, TRANSACTION_ABORTABLE for v4 — and
// nothing of the offsets is pending or committed (the offsets' guard,
// DESIGN §Transactions). The producer's next transaction commits its
// offsets. The guard survives the group's shard moving to A (its log
// replayed there): a record 107 of an ended transaction is refused there
// too.
func TestTxnOffsetCommitEndedBeforeWrite(t *testing.T) {
	ctx := context.Background()
	p := &pausedCheck{checked: make(chan diskless.TxnCheckResult), resume: make(chan struct{})}
	cl := newCluster(t, 2, func(c *Config) {
		c.TxnAbortCheckInterval = -1
		c.SnapshotIntervalRecords = 3
		p.Remote = c.Remote
		c.Remote = p
	})
	cl.split("t", 1)
	a, b := cl.nodes[0], cl.nodes[1]
	id, g := splitIDs(a)
	r := initTxnAt(t, a, id, 60_000, -1, -1)
	pid, ep := r.ProducerID, r.ProducerEpoch
	fetch := func(c *Coordinator) kmsg.OffsetFetchResponseGroupTopicPartition {
		t.Helper()
		got, err := c.FetchOffsets(ctx, group.FetchRequest{Group: g, MemberEpoch: -1,
			Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}}, true)
		if err != nil {
			t.Fatal(err)
		}
		return got.Topics[0].Partitions[0]
	}
	var ended int64
	for _, tc := range []struct {
		version int16
		commit  bool
		want    *kerr.Error
	}{
		{3, false, kerr.InvalidTxnState},
		{4, true, kerr.TransactionAbortable},
	} {
		want(t, "add offsets", addOffsetsAt(t, a, id, pid, ep, g), nil)
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.Version = tc.version
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group, req.Generation = id, pid, ep, g, -1
		req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5, LeaderEpoch: -1}}}}
		answered := make(chan *kmsg.TxnOffsetCommitResponse, 1)
		p.armed.Store(true)
		go func() {
			resp, err := b.TxnOffsetCommit(ctx, req)
			if err != nil {
				t.Error(err)
			}
			answered <- resp
		}()
		res := <-p.checked
		if res.Code != 0 || res.Seq <= ended {
			t.Fatalf("v%d: check %+v, want the transaction open after token %d", tc.version, res, ended)
		}
		ended = res.Seq
		want(t, "EndTxn between the check and the write", endTxnAt(t, a, id, pid, ep, tc.commit), nil)
		p.resume <- struct{}{}
		resp := <-answered
		if resp == nil {
			t.FailNow()
		}
		want(t, fmt.Sprintf("v%d TxnOffsetCommit written after its transaction ended", tc.version), resp.Topics[0].Partitions[0].ErrorCode, tc.want)
		if got := fetch(b); got.ErrorCode != 0 || got.Offset != -1 {
			t.Fatalf("v%d: after the refusal, OffsetFetch require_stable: %v offset %d, want NONE -1", tc.version, kerr.ErrorForCode(got.ErrorCode), got.Offset)
		}
	}

	// The producer's next transaction commits its offsets.
	want(t, "add offsets", addOffsetsAt(t, a, id, pid, ep, g), nil)
	want(t, "txn offset commit", txnCommitAt(t, b, id, pid, ep, g, "t", 0, 9), nil)
	want(t, "commit", endTxnAt(t, a, id, pid, ep, true), nil)
	if got := fetch(b); got.ErrorCode != 0 || got.Offset != 9 {
		t.Fatalf("the next transaction's offset: %v %d, want 9", kerr.ErrorForCode(got.ErrorCode), got.Offset)
	}

	// The group's shard moves to A: the guard is there.
	shard := b.GroupShard(g)
	if err := b.Release(shard); err != nil {
		t.Fatal(err)
	}
	cl.host(0, shard)
	late := kmsg.NewPtrTxnOffsetCommitRequest()
	late.Version, late.TransactionalID, late.ProducerID, late.ProducerEpoch, late.Group, late.Generation = 3, id, pid, ep, g, -1
	late.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 11, LeaderEpoch: -1}}}}
	var code int16
	err := a.groupDo(ctx, shard, func(gc *group.Coordinator, now time.Time) ([]group.Record, func(error)) {
		resp, rec := gc.CommitTxnOffsets(now, late, ended)
		code = resp.Topics[0].Partitions[0].ErrorCode
		if rec != nil {
			return []group.Record{rec}, nil
		}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want(t, "an ended transaction's offsets after the shard moved", code, kerr.InvalidTxnState)
	if got := fetch(a); got.ErrorCode != 0 || got.Offset != 9 {
		t.Fatalf("after the move: %v %d, want 9", kerr.ErrorForCode(got.ErrorCode), got.Offset)
	}
}

// TestGroupsGuardInShardSnapshot: the shard's snapshot carries the
// offsets' guard, and a shard state, new or loaded from a snapshot,
// keeps it for the shard's producer.id.expiration.ms (not the table's
// default): a record 107 of the ended transaction is refused until then.
func TestGroupsGuardInShardSnapshot(t *testing.T) {
	const expiration, at = 1_000, 1_700_000_000_000
	st := newState(2, expiration, discardLogger())
	st.groups.Apply(&group.TxnOffsetsEndedRecord{ProducerID: 9, TxnSeq: 4, Timestamp: at})
	snap := st.appendSnapshot(nil)
	for _, tc := range []struct {
		t       int64
		pending bool
	}{{at + expiration - 1, false}, {at + expiration, true}} {
		for name, s := range map[string]*state{"new": newState(2, expiration, discardLogger()), "loaded": newState(2, expiration, discardLogger())} {
			if name == "loaded" {
				if err := s.decodeSnapshot(snap); err != nil {
					t.Fatal(err)
				}
				if got := s.appendSnapshot(nil); !bytes.Equal(got, snap) {
					t.Fatal("the snapshot does not round-trip")
				}
			} else {
				s.groups.Apply(&group.TxnOffsetsEndedRecord{ProducerID: 9, TxnSeq: 4, Timestamp: at})
			}
			s.groups.Apply(&group.OffsetCommitRecord{Group: "g", CommitTimestamp: tc.t, ProducerID: 9, TxnSeq: 4,
				Topics: []group.CommitTopic{{Name: "t", Partitions: []group.CommitPartition{{Offset: 1}}}}})
			if got := s.groups.HasPending("g", "t", 0); got != tc.pending {
				t.Fatalf("%s state, record 107 of the ended transaction at +%d ms: pending %v, want %v", name, tc.t-at, got, tc.pending)
			}
		}
	}
}
