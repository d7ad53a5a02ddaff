package txn

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// apply is what the shard does with a decided record, through the codec
// as replay would see it.
func apply(t *testing.T, tb *Table, rec *StateRecord) {
	t.Helper()
	if rec == nil {
		return
	}
	got, err := DecodeRecord(AppendRecord(nil, rec))
	if err != nil {
		t.Fatalf("decode own record: %v", err)
	}
	tb.Apply(got)
}

func newCoord(t *testing.T) (*Coordinator, *Table) {
	t.Helper()
	tb := NewTable()
	c, err := New(Config{MaxTimeoutMs: 60_000}, tb)
	if err != nil {
		t.Fatal(err)
	}
	return c, tb
}

func code(e *kerr.Error) int16 {
	if e == nil {
		return 0
	}
	return e.Code
}

var topicA = [16]byte{1}

func TestInitProducerID(t *testing.T) {
	c, tb := newCoord(t)
	for _, to := range []int32{0, -1, 60_001} {
		if r := c.InitProducerID(0, "tx", to, -1, -1, 7); r.Code != kerr.InvalidTransactionTimeout.Code || r.Record != nil {
			t.Fatalf("timeout %d: %+v, want INVALID_TRANSACTION_TIMEOUT", to, r)
		}
	}
	if r := c.InitProducerID(0, "tx", 1000, -1, -1, -1); !r.NeedProducerID {
		t.Fatalf("new id without a fresh producer id: %+v", r)
	}
	r := c.InitProducerID(0, "tx", 1000, -1, -1, 7)
	if r.Code != 0 || r.ProducerID != 7 || r.ProducerEpoch != 0 {
		t.Fatalf("first init: %+v", r)
	}
	apply(t, tb, r.Record)
	r = c.InitProducerID(1, "tx", 1000, -1, -1, 8)
	if r.Code != 0 || r.ProducerID != 7 || r.ProducerEpoch != 1 {
		t.Fatalf("second init: %+v, want 7/1 (epoch bump, fresh id unused)", r)
	}
	apply(t, tb, r.Record)
	// KIP-360: another producer id is fenced; the current epoch bumps;
	// an epoch that is neither current nor previous is fenced.
	if r := c.InitProducerID(2, "tx", 1000, 99, 0, -1); r.Code != kerr.ProducerFenced.Code {
		t.Fatalf("expected wrong id: %+v", r)
	}
	if r := c.InitProducerID(2, "tx", 1000, 7, 0, -1); r.Code != kerr.ProducerFenced.Code {
		t.Fatalf("expected old epoch: %+v", r)
	}
	r = c.InitProducerID(2, "tx", 1000, 7, 1, -1)
	if r.Code != 0 || r.ProducerEpoch != 2 {
		t.Fatalf("expected current epoch: %+v", r)
	}
	apply(t, tb, r.Record)
	// A retry whose answer was lost (expected = previous) gets epoch 2 again.
	if r := c.InitProducerID(3, "tx", 1000, 7, 1, -1); r.Code != 0 || r.ProducerEpoch != 2 {
		t.Fatalf("retry after lost answer: %+v", r)
	}
}

func TestEpochExhausted(t *testing.T) {
	c, tb := newCoord(t)
	tb.Apply(&StateRecord{TransactionalID: "tx", ProducerID: 5, ProducerEpoch: 32766, LastProducerID: -1, LastProducerEpoch: -1, TimeoutMs: 1000, StartTimestamp: -1})
	if r := c.InitProducerID(0, "tx", 1000, -1, -1, -1); !r.NeedProducerID {
		t.Fatalf("exhausted epoch without a fresh id: %+v", r)
	}
	r := c.InitProducerID(0, "tx", 1000, -1, -1, 6)
	if r.Code != 0 || r.ProducerID != 6 || r.ProducerEpoch != 0 || r.Record.LastProducerID != 5 {
		t.Fatalf("exhausted epoch: %+v", r)
	}
}

func TestTransactionLifecycle(t *testing.T) {
	c, tb := newCoord(t)
	r := c.InitProducerID(0, "tx", 1000, -1, -1, 7)
	apply(t, tb, r.Record)
	pid, ep := r.ProducerID, r.ProducerEpoch

	if code, _ := c.EndTxn(1, "tx", pid, ep, true); code != kerr.InvalidTxnState.Code {
		t.Fatalf("EndTxn commit of Empty: %d", code)
	}
	if code, rec := c.EndTxn(1, "tx", pid, ep, false); code != 0 || rec != nil {
		t.Fatalf("EndTxn abort of Empty: %d %+v, want NONE and no record", code, rec)
	}
	for _, tc := range []struct {
		name string
		pid  int64
		ep   int16
		id   string
		want *kerr.Error
	}{
		{"unknown id", pid, ep, "nope", kerr.InvalidProducerIDMapping},
		{"other producer", pid + 1, ep, "tx", kerr.InvalidProducerIDMapping},
		{"old epoch", pid, ep - 1, "tx", kerr.ProducerFenced},
		{"future epoch", pid, ep + 1, "tx", kerr.ProducerFenced},
	} {
		if got, rec := c.AddPartitions(1, tc.id, tc.pid, tc.ep, []Topic{{TopicID: topicA, Name: "a", Partitions: []int32{0}}}); got != code(tc.want) || rec != nil {
			t.Errorf("AddPartitions %s: %d, want %d", tc.name, got, code(tc.want))
		}
		if got, _ := c.EndTxn(1, tc.id, tc.pid, tc.ep, true); got != code(tc.want) {
			t.Errorf("EndTxn %s: %d, want %d", tc.name, got, code(tc.want))
		}
		if got, _ := c.AddOffsets(1, tc.id, tc.pid, tc.ep, "g"); got != code(tc.want) {
			t.Errorf("AddOffsets %s: %d, want %d", tc.name, got, code(tc.want))
		}
	}
	got, rec := c.AddPartitions(10, "tx", pid, ep, []Topic{{TopicID: topicA, Name: "a", Partitions: []int32{1, 0}}})
	if got != 0 || rec == nil || rec.State != Ongoing || rec.StartTimestamp != 10 || rec.Seq != 1 {
		t.Fatalf("AddPartitions: %d %+v", got, rec)
	}
	apply(t, tb, rec)
	if got, rec := c.AddPartitions(11, "tx", pid, ep, []Topic{{TopicID: topicA, Partitions: []int32{0}}}); got != 0 || rec != nil {
		t.Fatalf("adding a partition already in: %d %+v, want no record", got, rec)
	}
	got, rec = c.AddOffsets(12, "tx", pid, ep, "g")
	if got != 0 || rec == nil || !rec.HasGroup("g") || rec.StartTimestamp != 10 {
		t.Fatalf("AddOffsets: %d %+v", got, rec)
	}
	apply(t, tb, rec)
	st, _ := tb.Get("tx")
	if !st.Contains(topicA, 0) || !st.Contains(topicA, 1) || st.Contains(topicA, 2) {
		t.Fatalf("partitions: %+v", st.Topics)
	}
	if code, seq := c.CheckOffsetCommit("tx", pid, ep, "g"); code != 0 || seq != 1 {
		t.Fatalf("CheckOffsetCommit: %d, token %d, want 0, 1", code, seq)
	}
	if code, seq := c.CheckOffsetCommit("tx", pid, ep, "other"); code != kerr.InvalidTxnState.Code || seq != 0 {
		t.Fatalf("CheckOffsetCommit of a group not added: %d, token %d", code, seq)
	}
	got, rec = c.EndTxn(13, "tx", pid, ep, true)
	if got != 0 || rec.State != PrepareCommit || rec.Seq != 1 {
		t.Fatalf("EndTxn: %d %+v", got, rec)
	}
	apply(t, tb, rec)
	if got, _ := c.EndTxn(14, "tx", pid, ep, true); got != kerr.ConcurrentTransactions.Code {
		t.Fatalf("EndTxn retry while preparing: %d", got)
	}
	if got, _ := c.EndTxn(14, "tx", pid, ep, false); got != kerr.InvalidTxnState.Code {
		t.Fatalf("EndTxn abort while committing: %d", got)
	}
	if got, _ := c.AddPartitions(14, "tx", pid, ep, []Topic{{TopicID: topicA, Partitions: []int32{0}}}); got != kerr.ConcurrentTransactions.Code {
		t.Fatalf("AddPartitions while preparing: %d", got)
	}
	if r := c.InitProducerID(14, "tx", 1000, -1, -1, -1); r.Code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("InitProducerId while preparing: %+v", r)
	}
	if p := tb.Preparing(); len(p) != 1 || p[0].TransactionalID != "tx" {
		t.Fatalf("Preparing: %+v", p)
	}
	if rec := c.Complete(15, "tx", pid, ep, PrepareAbort); rec != nil {
		t.Fatalf("Complete of the wrong outcome: %+v", rec)
	}
	rec = c.Complete(15, "tx", pid, ep, PrepareCommit)
	if rec == nil || rec.State != CompleteCommit || len(rec.Topics) != 0 || len(rec.Groups) != 0 {
		t.Fatalf("Complete: %+v", rec)
	}
	apply(t, tb, rec)
	if rec := c.Complete(16, "tx", pid, ep, PrepareCommit); rec != nil {
		t.Fatalf("second Complete: %+v", rec)
	}
	if got, rec := c.EndTxn(16, "tx", pid, ep, true); got != 0 || rec != nil {
		t.Fatalf("EndTxn retry after completion: %d %+v", got, rec)
	}
	if got, _ := c.EndTxn(16, "tx", pid, ep, false); got != kerr.InvalidTxnState.Code {
		t.Fatalf("EndTxn abort after commit: %d", got)
	}
	// The next transaction starts afresh.
	got, rec = c.AddPartitions(20, "tx", pid, ep, []Topic{{TopicID: topicA, Partitions: []int32{3}}})
	if got != 0 || rec.StartTimestamp != 20 || rec.Contains(topicA, 0) || !rec.Contains(topicA, 3) || rec.Seq != 2 {
		t.Fatalf("next transaction: %d %+v (Seq: the next transaction's token)", got, rec)
	}
}

func TestFencingAndExpiry(t *testing.T) {
	c, tb := newCoord(t)
	r := c.InitProducerID(0, "tx", 1000, -1, -1, 7)
	apply(t, tb, r.Record)
	_, rec := c.AddPartitions(100, "tx", 7, 0, []Topic{{TopicID: topicA, Partitions: []int32{0}}})
	apply(t, tb, rec)
	if recs := c.Expire(1099); len(recs) != 0 {
		t.Fatalf("expired before its timeout: %+v", recs)
	}
	recs := c.Expire(1100)
	if len(recs) != 1 || recs[0].State != PrepareAbort || recs[0].ProducerEpoch != 1 || recs[0].LastProducerEpoch != 0 {
		t.Fatalf("Expire: %+v", recs)
	}
	apply(t, tb, recs[0])
	// The timed-out producer is fenced.
	if got, _ := c.EndTxn(1101, "tx", 7, 0, true); got != kerr.ProducerFenced.Code {
		t.Fatalf("EndTxn of the timed-out producer: %d", got)
	}
	apply(t, tb, c.Complete(1102, "tx", 7, 1, PrepareAbort))
	// KIP-588: the timed-out producer re-initialises with its old epoch
	// and gets the bumped one.
	r = c.InitProducerID(1103, "tx", 1000, 7, 0, -1)
	if r.Code != 0 || r.ProducerEpoch != 1 {
		t.Fatalf("re-init after a timeout: %+v", r)
	}
	apply(t, tb, r.Record)

	// A new producer of the id aborts the old one's open transaction.
	_, rec = c.AddPartitions(2000, "tx", 7, 1, []Topic{{TopicID: topicA, Partitions: []int32{0}}})
	apply(t, tb, rec)
	r = c.InitProducerID(2001, "tx", 1000, -1, -1, -1)
	if r.Code != kerr.ConcurrentTransactions.Code || r.Record == nil || r.Record.State != PrepareAbort || r.Record.ProducerEpoch != 2 {
		t.Fatalf("init over an open transaction: %+v", r)
	}
	apply(t, tb, r.Record)
	if got, _ := c.EndTxn(2002, "tx", 7, 1, true); got != kerr.ProducerFenced.Code {
		t.Fatalf("zombie EndTxn: %d", got)
	}
	apply(t, tb, c.Complete(2003, "tx", 7, 2, PrepareAbort))
	r = c.InitProducerID(2004, "tx", 1000, -1, -1, -1)
	if r.Code != 0 || r.ProducerEpoch != 3 {
		t.Fatalf("retried init: %+v", r)
	}
}

func TestExpireIDs(t *testing.T) {
	tb := NewTable()
	c, err := New(Config{MaxTimeoutMs: 60_000, IDExpirationMs: 1000}, tb)
	if err != nil {
		t.Fatal(err)
	}
	apply(t, tb, c.InitProducerID(0, "idle", 1000, -1, -1, 1).Record)
	apply(t, tb, c.InitProducerID(0, "open", 1000, -1, -1, 2).Record)
	_, rec := c.AddOffsets(500, "open", 2, 0, "g")
	apply(t, tb, rec)
	if recs := c.ExpireIDs(999); len(recs) != 0 {
		t.Fatalf("expired early: %+v", recs)
	}
	recs := c.ExpireIDs(1000)
	if len(recs) != 1 || recs[0].TransactionalID != "idle" || recs[0].State != Dead {
		t.Fatalf("ExpireIDs: %+v (an open transaction's id is never removed)", recs)
	}
	apply(t, tb, recs[0])
	if _, ok := tb.Get("idle"); ok || tb.Len() != 1 {
		t.Fatal("the expired id is still there")
	}
	if got, _ := c.EndTxn(1001, "idle", 1, 0, true); got != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("EndTxn of a removed id: %d", got)
	}
	if r := c.InitProducerID(1001, "idle", 1000, -1, -1, 3); r.Code != 0 || r.ProducerID != 3 || r.ProducerEpoch != 0 {
		t.Fatalf("InitProducerId of a removed id: %+v", r)
	}
}
