package coordinator

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/txn"
)

func (e *env) initTxn(id string, timeoutMs int32, pid int64, epoch int16) *kmsg.InitProducerIDResponse {
	e.t.Helper()
	return initTxnAt(e.t, e.c, id, timeoutMs, pid, epoch)
}

// initTxnAt sends InitProducerId v4 for transactional id id to c, failing
// t on an error.
func initTxnAt(t testing.TB, c *Coordinator, id string, timeoutMs int32, pid int64, epoch int16) *kmsg.InitProducerIDResponse {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = &id, timeoutMs, pid, epoch
	resp, err := c.InitTransactionalProducer(context.Background(), req)
	if err != nil {
		t.Fatalf("InitTransactionalProducer(%s): %v", id, err)
	}
	return resp
}

func (e *env) addPartitions(id string, pid int64, epoch int16, verify bool, topic string, parts ...int32) []int16 {
	e.t.Helper()
	return addPartitionsAt(e.t, e.c, id, pid, epoch, verify, topic, parts...)
}

// addPartitionsAt sends AddPartitionsToTxn of parts of topic to c and
// returns the partitions' error codes, failing t on an error.
func addPartitionsAt(tb testing.TB, c *Coordinator, id string, pid int64, epoch int16, verify bool, topic string, parts ...int32) []int16 {
	tb.Helper()
	t := kmsg.NewAddPartitionsToTxnRequestTransaction()
	t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.VerifyOnly = id, pid, epoch, verify
	t.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: topic, Partitions: parts}}
	resp, err := c.AddPartitionsToTxn(context.Background(), &t)
	if err != nil {
		tb.Fatalf("AddPartitionsToTxn(%s): %v", id, err)
	}
	var codes []int16
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			codes = append(codes, p.ErrorCode)
		}
	}
	return codes
}

func (e *env) addOffsets(id string, pid int64, epoch int16, group string) int16 {
	e.t.Helper()
	return addOffsetsAt(e.t, e.c, id, pid, epoch, group)
}

// addOffsetsAt sends AddOffsetsToTxn of group to c and returns its error
// code, failing t on an error.
func addOffsetsAt(t testing.TB, c *Coordinator, id string, pid int64, epoch int16, group string) int16 {
	t.Helper()
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = id, pid, epoch, group
	resp, err := c.AddOffsetsToTxn(context.Background(), req)
	if err != nil {
		t.Fatalf("AddOffsetsToTxn(%s): %v", id, err)
	}
	return resp.ErrorCode
}

func (e *env) txnCommit(id string, pid int64, epoch int16, group, topic string, p int32, offset int64) int16 {
	e.t.Helper()
	return txnCommitAt(e.t, e.c, id, pid, epoch, group, topic, p, offset)
}

// txnCommitAt sends TxnOffsetCommit v3 of offset for partition p of topic
// to c, the group's coordinator, and returns the partition's error code,
// failing t on an error.
func txnCommitAt(t testing.TB, c *Coordinator, id string, pid int64, epoch int16, group, topic string, p int32, offset int64) int16 {
	t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = 3
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group, req.Generation = id, pid, epoch, group, -1
	req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: p, Offset: offset, LeaderEpoch: -1}}}}
	resp, err := c.TxnOffsetCommit(context.Background(), req)
	if err != nil {
		t.Fatalf("TxnOffsetCommit(%s): %v", id, err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

func (e *env) endTxn(id string, pid int64, epoch int16, commit bool) int16 {
	e.t.Helper()
	return endTxnAt(e.t, e.c, id, pid, epoch, commit)
}

// endTxnAt sends EndTxn to c and returns its error code, failing t on an
// error.
func endTxnAt(t testing.TB, c *Coordinator, id string, pid int64, epoch int16, commit bool) int16 {
	t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	resp, err := c.EndTxn(context.Background(), req)
	if err != nil {
		t.Fatalf("EndTxn(%s): %v", id, err)
	}
	return resp.ErrorCode
}

func (e *env) txnState(id string) *txn.StateRecord {
	e.t.Helper()
	s := e.c.shards[e.c.TxnShard(id)]
	s.mu.RLock()
	defer s.mu.RUnlock()
	st, ok := s.mu.st.txns.Get(id)
	if !ok {
		e.t.Fatalf("transactional id %s unknown", id)
	}
	return st
}

func (e *env) committed(group, topic string, p int32) int64 { return committedAt(e.c, group, topic, p) }

// committedAt returns the offset group committed for partition p of topic
// on c, the group's coordinator, or −1.
func committedAt(c *Coordinator, group, topic string, p int32) int64 {
	if o, ok := c.GroupOffsets()[group][topic][p]; ok {
		return o.Offset
	}
	return -1
}

func want(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	w := int16(0)
	if want != nil {
		w = want.Code
	}
	if got != w {
		t.Fatalf("%s: %v, want %v", what, kerr.ErrorForCode(got), kerr.ErrorForCode(w))
	}
}

// TestTxnOffsetsCommitAbortRestart runs transactions with offsets through
// the coordinator: a commit's offsets become visible only at EndTxn, an
// abort's never, the state survives restarts (snapshot then replay equals
// replay), and a second producer of the id fences the first.
func TestTxnOffsetsCommitAbortRestart(t *testing.T) {
	e := newEnv(t, 4, func(c *Config) { c.TxnAbortCheckInterval = -1; c.SnapshotIntervalRecords = 5 })
	e.createTopic("t", 2, nil)

	for _, to := range []int32{0, 900_001} {
		r := e.initTxn("tx", to, -1, -1)
		want(t, "timeout", r.ErrorCode, kerr.InvalidTransactionTimeout)
	}
	r := e.initTxn("tx", 60_000, -1, -1)
	want(t, "init", r.ErrorCode, nil)
	pid, ep := r.ProducerID, r.ProducerEpoch
	if pid < 0 || ep != 0 {
		t.Fatalf("init: %d/%d", pid, ep)
	}

	codes := e.addPartitions("tx", pid, ep, false, "nosuch", 0)
	want(t, "unknown topic", codes[0], kerr.UnknownTopicOrPartition)
	codes = e.addPartitions("tx", pid, ep, false, "t", 0, 5)
	want(t, "known partition beside an unknown one", codes[0], kerr.OperationNotAttempted)
	want(t, "unknown partition", codes[1], kerr.UnknownTopicOrPartition)
	codes = e.addPartitions("tx", pid, ep, false, "t", 0)
	want(t, "add", codes[0], nil)
	codes = e.addPartitions("tx", pid, ep, true, "t", 0, 1)
	want(t, "verify added", codes[0], nil)
	want(t, "verify not added", codes[1], kerr.TransactionAbortable)
	want(t, "commit of a group not added", e.txnCommit("tx", pid, ep, "g", "t", 0, 5), kerr.InvalidTxnState)
	want(t, "add offsets", e.addOffsets("tx", pid, ep, "g"), nil)
	want(t, "txn offset commit", e.txnCommit("tx", pid, ep, "g", "t", 0, 5), nil)
	if got := e.committed("g", "t", 0); got != -1 {
		t.Fatalf("pending offset visible before EndTxn: %d", got)
	}

	e.reopenSame()
	if st := e.txnState("tx"); st.State != txn.Ongoing || !st.Contains(e.c.catalog.Load().byName["t"].ID, 0) || !st.HasGroup("g") {
		t.Fatalf("after restart: %+v", st)
	}
	want(t, "commit", e.endTxn("tx", pid, ep, true), nil)
	if got := e.committed("g", "t", 0); got != 5 {
		t.Fatalf("committed offset %d, want 5", got)
	}
	if st := e.txnState("tx"); st.State != txn.CompleteCommit {
		t.Fatalf("after EndTxn: %v", st.State)
	}
	want(t, "commit retried", e.endTxn("tx", pid, ep, true), nil)

	// An aborted transaction's offsets never become visible.
	want(t, "add offsets 2", e.addOffsets("tx", pid, ep, "g"), nil)
	want(t, "txn offset commit 2", e.txnCommit("tx", pid, ep, "g", "t", 0, 9), nil)
	want(t, "abort", e.endTxn("tx", pid, ep, false), nil)
	if got := e.committed("g", "t", 0); got != 5 {
		t.Fatalf("after abort: %d, want 5", got)
	}

	// Zombie fencing: a second producer of the id bumps the epoch.
	want(t, "add offsets 3", e.addOffsets("tx", pid, ep, "g"), nil)
	want(t, "txn offset commit 3", e.txnCommit("tx", pid, ep, "g", "t", 0, 11), nil)
	r = e.initTxn("tx", 60_000, -1, -1)
	want(t, "init over an open transaction", r.ErrorCode, kerr.ConcurrentTransactions)
	r = e.initTxn("tx", 60_000, -1, -1)
	want(t, "new producer", r.ErrorCode, nil)
	if r.ProducerID != pid || r.ProducerEpoch != ep+2 {
		t.Fatalf("new producer %d/%d, want %d/%d", r.ProducerID, r.ProducerEpoch, pid, ep+2)
	}
	want(t, "zombie EndTxn", e.endTxn("tx", pid, ep, true), kerr.ProducerFenced)
	want(t, "zombie AddPartitions", e.addPartitions("tx", pid, ep, false, "t", 1)[0], kerr.ProducerFenced)
	want(t, "zombie offsets", e.txnCommit("tx", pid, ep, "g", "t", 0, 12), kerr.ProducerFenced)
	if got := e.committed("g", "t", 0); got != 5 {
		t.Fatalf("after the fenced transaction: %d, want 5", got)
	}
	e.cfg.SnapshotIntervalRecords = -1
	e.reopenSame()
}

// TestCheckTxnProducePartitions: CheckTxnProduce checks all of a produce
// request's partitions at once, each answered on its own: a partition in
// the open transaction is allowed, with the transaction's token, one not
// in it gets INVALID_TXN_STATE;
// another epoch, producer id or transactional id refuses every partition;
// once the transaction ended none is allowed (SPEC §15).
func TestCheckTxnProducePartitions(t *testing.T) {
	e := newEnv(t, 4, func(c *Config) { c.TxnAbortCheckInterval = -1 })
	topic := e.createTopic("t", 4, nil)
	tps := make([]diskless.TopicPartition, 4)
	for p := range tps {
		tps[p] = diskless.TopicPartition{TopicID: topic.ID, Partition: int32(p)}
	}
	r := e.initTxn("tx", 60_000, -1, -1)
	want(t, "init", r.ErrorCode, nil)
	pid, ep := r.ProducerID, r.ProducerEpoch
	for _, code := range e.addPartitions("tx", pid, ep, false, "t", 0, 2) {
		want(t, "add", code, nil)
	}
	token := e.txnState("tx").Seq
	check := func(what, id string, pid int64, epoch int16, tps []diskless.TopicPartition, wantSeq int64, wantErrs ...*kerr.Error) {
		t.Helper()
		seq, errs := e.c.CheckTxnProduce(context.Background(), id, pid, epoch, tps)
		if seq != wantSeq || (errs != nil && len(errs) != len(tps)) {
			t.Fatalf("%s: token %d, %d errors; want %d, %d", what, seq, len(errs), wantSeq, len(tps))
		}
		for i := range tps {
			var got *kerr.Error
			if errs != nil {
				got = errs[i]
			}
			var w *kerr.Error
			if wantErrs != nil {
				w = wantErrs[i]
			}
			if got != w {
				t.Fatalf("%s: partition %d: %v, want %v", what, tps[i].Partition, got, w)
			}
		}
	}
	if token < 1 {
		t.Fatalf("transaction token %d", token)
	}
	check("the transaction's partitions", "tx", pid, ep, []diskless.TopicPartition{tps[2], tps[0]}, token)
	check("two not in it", "tx", pid, ep, tps, token, nil, kerr.InvalidTxnState, nil, kerr.InvalidTxnState)
	fenced := []*kerr.Error{kerr.InvalidProducerEpoch, kerr.InvalidProducerEpoch, kerr.InvalidProducerEpoch, kerr.InvalidProducerEpoch}
	check("another epoch", "tx", pid, ep+1, tps, 0, fenced...)
	mapping := []*kerr.Error{kerr.InvalidProducerIDMapping, kerr.InvalidProducerIDMapping, kerr.InvalidProducerIDMapping, kerr.InvalidProducerIDMapping}
	check("another producer", "tx", pid+1, ep, tps, 0, mapping...)
	check("another transactional id", "tx-other", pid, ep, tps, 0, mapping...)
	want(t, "commit", e.endTxn("tx", pid, ep, true), nil)
	ended := []*kerr.Error{kerr.InvalidTxnState, kerr.InvalidTxnState, kerr.InvalidTxnState, kerr.InvalidTxnState}
	check("ended", "tx", pid, ep, tps, token, ended...)
}

// TestTxnTimeoutAborts: a transaction open past its timeout is aborted by
// the periodic check, its producer fenced (KIP-588: it re-initialises with
// its old epoch), its offsets dropped.
func TestTxnTimeoutAborts(t *testing.T) {
	e := newEnv(t, 2, func(c *Config) { c.TxnAbortCheckInterval = -1 })
	e.createTopic("t", 1, nil)
	r := e.initTxn("tx", 1000, -1, -1)
	pid, ep := r.ProducerID, r.ProducerEpoch
	want(t, "add offsets", e.addOffsets("tx", pid, ep, "g"), nil)
	want(t, "txn offset commit", e.txnCommit("tx", pid, ep, "g", "t", 0, 7), nil)
	e.clock.Advance(999 * time.Millisecond)
	if err := e.c.runTxnCheck(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := e.txnState("tx"); st.State != txn.Ongoing {
		t.Fatalf("aborted before its timeout: %v", st.State)
	}
	e.clock.Advance(time.Millisecond)
	if err := e.c.runTxnCheck(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := e.txnState("tx")
	if st.State != txn.CompleteAbort || st.ProducerEpoch != ep+1 {
		t.Fatalf("after the timeout: %v epoch %d", st.State, st.ProducerEpoch)
	}
	want(t, "EndTxn of the timed-out producer", e.endTxn("tx", pid, ep, true), kerr.ProducerFenced)
	if got := e.committed("g", "t", 0); got != -1 {
		t.Fatalf("timed-out offsets committed: %d", got)
	}
	// The pending offset is gone: a later commit of the same producer id
	// does not carry it.
	r = e.initTxn("tx", 1000, pid, ep)
	want(t, "re-init with the old epoch", r.ErrorCode, nil)
	if r.ProducerEpoch != ep+1 {
		t.Fatalf("re-init epoch %d, want %d", r.ProducerEpoch, ep+1)
	}
	want(t, "add offsets 2", e.addOffsets("tx", pid, r.ProducerEpoch, "g"), nil)
	want(t, "commit 2", e.endTxn("tx", pid, r.ProducerEpoch, true), nil)
	if got := e.committed("g", "t", 0); got != -1 {
		t.Fatalf("an aborted offset resurfaced: %d", got)
	}
}

// TestTxnPreparedCompletedAfterRestart: a transaction whose outcome was
// durable but whose markers were not written when the process stopped is
// completed by the periodic check after the restart.
func TestTxnPreparedCompletedAfterRestart(t *testing.T) {
	e := newEnv(t, 4, func(c *Config) { c.TxnAbortCheckInterval = -1 })
	e.createTopic("t", 1, nil)
	r := e.initTxn("tx", 60_000, -1, -1)
	pid, ep := r.ProducerID, r.ProducerEpoch
	want(t, "add offsets", e.addOffsets("tx", pid, ep, "g"), nil)
	want(t, "txn offset commit", e.txnCommit("tx", pid, ep, "g", "t", 0, 3), nil)
	// The outcome alone, as EndTxn writes it before its markers.
	err := e.c.txnDo(context.Background(), e.c.TxnShard("tx"), func(tc *txn.Coordinator, now int64) ([]*txn.StateRecord, func(error)) {
		_, rec := tc.EndTxn(now, "tx", pid, ep, true)
		return one(rec), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.reopen()
	if st := e.txnState("tx"); st.State != txn.PrepareCommit {
		t.Fatalf("after restart: %v", st.State)
	}
	want(t, "EndTxn while preparing", e.endTxn("tx", pid, ep, true), kerr.ConcurrentTransactions)
	if err := e.c.runTxnCheck(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := e.txnState("tx"); st.State != txn.CompleteCommit {
		t.Fatalf("after the check: %v", st.State)
	}
	if got := e.committed("g", "t", 0); got != 3 {
		t.Fatalf("committed %d, want 3", got)
	}
}

// TestTxnIDExpiry: an idle transactional id is removed after
// transactional.id.expiration.ms, durably (gone after a restart); one with
// an open transaction is kept.
func TestTxnIDExpiry(t *testing.T) {
	e := newEnv(t, 2, func(c *Config) {
		c.TxnAbortCheckInterval, c.TxnIDExpirationCheckInterval = -1, -1
		c.Txns.IDExpirationMs = 60_000
	})
	e.createTopic("t", 1, nil)
	e.initTxn("idle", 10_000, -1, -1)
	r := e.initTxn("open", 120_000, -1, -1)
	e.clock.Advance(30 * time.Second)
	want(t, "add offsets", e.addOffsets("open", r.ProducerID, r.ProducerEpoch, "g"), nil)
	e.clock.Advance(30 * time.Second)
	if err := e.c.runTxnIDExpiry(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	s := e.c.shards[e.c.TxnShard("idle")]
	s.mu.RLock()
	_, ok := s.mu.st.txns.Get("idle")
	s.mu.RUnlock()
	if ok {
		t.Fatal("the idle id survived its expiry")
	}
	if st := e.txnState("open"); st.State != txn.Ongoing {
		t.Fatalf("the open transaction's id: %v", st.State)
	}
}

// blockingMarkers is a MarkerWriter whose first call waits for release;
// it counts the calls.
type blockingMarkers struct {
	calls   atomic.Int32
	entered chan struct{}
	release chan struct{}
}

func (m *blockingMarkers) WriteMarkers(ctx context.Context, _ int64, _ int16, _ int64, _ int32, _ bool, _ []diskless.TopicPartition) error {
	if m.calls.Add(1) == 1 {
		close(m.entered)
		<-m.release
	}
	return nil
}

// TestTxnMarkersOnceWhenCompletionsRace: EndTxn's completion and the
// periodic check finishing the same transaction at once write its markers
// once (a marker takes an offset; TestTransactionsJava saw a high
// watermark one past the one expected when they raced).
func TestTxnMarkersOnceWhenCompletionsRace(t *testing.T) {
	e := newEnv(t, 4, func(c *Config) { c.TxnAbortCheckInterval = -1 })
	e.createTopic("t", 1, nil)
	m := &blockingMarkers{entered: make(chan struct{}), release: make(chan struct{})}
	e.c.SetMarkerWriter(m)
	r := e.initTxn("tx", 60_000, -1, -1)
	pid, ep := r.ProducerID, r.ProducerEpoch
	if codes := e.addPartitions("tx", pid, ep, false, "t", 0); codes[0] != 0 {
		t.Fatalf("AddPartitionsToTxn: %v", kerr.ErrorForCode(codes[0]))
	}
	ended := make(chan int16)
	go func() { ended <- e.endTxn("tx", pid, ep, true) }()
	<-m.entered // EndTxn's completion is writing the markers
	checked := make(chan error)
	go func() { checked <- e.c.runTxnCheck(context.Background()) }()
	// Give the check the time to reach the markers if it does not wait
	// (it needs milliseconds); with the fix it waits for the release.
	deadline := time.Now().Add(time.Second)
	for m.calls.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	close(m.release)
	want(t, "EndTxn", <-ended, nil)
	if err := <-checked; err != nil {
		t.Fatal(err)
	}
	if n := m.calls.Load(); n != 1 {
		t.Fatalf("markers written %d times, want once", n)
	}
	if st := e.txnState("tx"); st.State != txn.CompleteCommit {
		t.Fatalf("state %v, want CompleteCommit", st.State)
	}
}
