package coordinator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/group"
	"github.com/diskless-sidecar/sidecar/txn"
)

// Transactions (DESIGN §Transactions). Every shard hosts the transaction
// coordinator (package txn) of the transactional ids that hash to it
// (diskless.GroupShardFor, as consumer groups). A transaction request is
// a request on the shard's queue whose txnOp runs on the driver, in the
// group commit of the requests around it; its record 118 is written with
// them and the request answered once durable. Ending a transaction is
// three steps, each durable before the next: the outcome (PrepareCommit
// or PrepareAbort, record 118), the markers (a control batch in every
// partition of the transaction, then record 110 on the shard of every
// consumer group in it), the completion
// (CompleteCommit or CompleteAbort, record 118). A crash or a failed
// write between them leaves the transaction Prepare*; the periodic check
// (runTxnCheck) finishes it, as it aborts the transactions whose timeout
// passed.

// txnOp is a transaction request's work on the shard's driver: it runs
// against the shard's transaction coordinator at now (ms) and returns the
// records to write and reply, called once they are durable (err nil) or
// could not be written — or not at all when the shard refused the request
// before running it.
type txnOp func(tc *txn.Coordinator, now int64) (recs []*txn.StateRecord, reply func(err error))

// TxnShard returns the shard owning transactional id id:
// diskless.GroupShardFor(id, NumShards()).
func (c *Coordinator) TxnShard(id string) int32 {
	return diskless.GroupShardFor(id, c.cfg.NumShards)
}

// txnDo runs op on shard's driver and returns once its records are
// durable (or failed). Errors as groupDo's.
func (c *Coordinator) txnDo(ctx context.Context, shard int32, op txnOp) error {
	s := c.shards[shard]
	if s.rebuilding.Load() {
		return fmt.Errorf("%w (shard %d, %w)", diskless.ErrShardLoading, shard, kerr.CoordinatorLoadInProgress)
	}
	return s.do(&request{ctx: ctx, txn: op}).err
}

// one returns a txnOp's records for rec, none when nil.
func one(rec *txn.StateRecord) []*txn.StateRecord {
	if rec == nil {
		return nil
	}
	return []*txn.StateRecord{rec}
}

// InitTransactionalProducer answers InitProducerId with a transactional id
// (txn.Coordinator.InitProducerID, SPEC §15) on the id's shard: it
// allocates a producer id when the decision needs one and, when the
// request fenced an open transaction, completes that transaction's abort
// before answering (the answer is then CONCURRENT_TRANSACTIONS, which the
// producer retries). Errors: the shard's (as groupDo's), the producer-id
// allocation's.
func (c *Coordinator) InitTransactionalProducer(ctx context.Context, req *kmsg.InitProducerIDRequest) (*kmsg.InitProducerIDResponse, error) {
	id := *req.TransactionalID
	shard := c.TxnShard(id)
	fresh := int64(-1)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	for range 3 {
		var (
			res   txn.InitResult
			abort *txn.StateRecord
		)
		err := c.txnDo(ctx, shard, func(tc *txn.Coordinator, now int64) ([]*txn.StateRecord, func(error)) {
			res = tc.InitProducerID(now, id, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch, fresh)
			if res.Record != nil && res.Record.State == txn.PrepareAbort {
				abort = res.Record
			}
			return one(res.Record), nil
		})
		if err != nil {
			return nil, err
		}
		if res.NeedProducerID {
			if fresh, err = c.AllocateProducerID(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if abort != nil {
			c.completeTxnLogged(ctx, shard, abort)
		}
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = res.Code, res.ProducerID, res.ProducerEpoch
		return resp, nil
	}
	// Another request took the id's fresh producer id each time: rare;
	// the producer retries.
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = kerr.ConcurrentTransactions.Code, -1, -1
	return resp, nil
}

// AddPartitionsToTxn answers one transaction of AddPartitionsToTxn (v0–3
// as one transaction, v4+ each of its batch): partitions the catalog does
// not hold get UNKNOWN_TOPIC_OR_PARTITION and the others
// OPERATION_NOT_ATTEMPTED, as Kafka answers; otherwise
// txn.Coordinator.AddPartitions (or, with VerifyOnly, Verify: a partition
// not in the open transaction gets TRANSACTION_ABORTABLE) on the id's
// shard. Errors: the shard's (as groupDo's); the caller answers every
// partition with its code.
func (c *Coordinator) AddPartitionsToTxn(ctx context.Context, t *kmsg.AddPartitionsToTxnRequestTransaction) (kmsg.AddPartitionsToTxnResponseTransaction, error) {
	out := kmsg.AddPartitionsToTxnResponseTransaction{TransactionalID: t.TransactionalID}
	cat := c.catalog.Load()
	var (
		topics  []txn.Topic
		unknown bool
	)
	for _, rt := range t.Topics {
		tp := cat.byName[rt.Topic]
		if tp == nil {
			unknown = true
			continue
		}
		tt := txn.Topic{TopicID: tp.ID, Name: tp.Name}
		for _, p := range rt.Partitions {
			if p < 0 || p >= tp.Partitions {
				unknown = true
			}
			tt.Partitions = append(tt.Partitions, p)
		}
		topics = append(topics, tt)
	}
	answer := func(code func(topic string, p int32) int16) kmsg.AddPartitionsToTxnResponseTransaction {
		for _, rt := range t.Topics {
			ot := kmsg.AddPartitionsToTxnResponseTransactionTopic{Topic: rt.Topic}
			for _, p := range rt.Partitions {
				ot.Partitions = append(ot.Partitions, kmsg.AddPartitionsToTxnResponseTransactionTopicPartition{Partition: p, ErrorCode: code(rt.Topic, p)})
			}
			out.Topics = append(out.Topics, ot)
		}
		return out
	}
	if unknown {
		return answer(func(topic string, p int32) int16 {
			if tp := cat.byName[topic]; tp == nil || p < 0 || p >= tp.Partitions {
				return kerr.UnknownTopicOrPartition.Code
			}
			return kerr.OperationNotAttempted.Code
		}), nil
	}
	// The record keeps topics by id and partitions ascending, once each.
	for i := range topics {
		slices.Sort(topics[i].Partitions)
		topics[i].Partitions = slices.Compact(topics[i].Partitions)
	}
	slices.SortFunc(topics, func(a, b txn.Topic) int { return bytes.Compare(a.TopicID[:], b.TopicID[:]) })
	var (
		code  int16
		state *txn.StateRecord
	)
	err := c.txnDo(ctx, c.TxnShard(t.TransactionalID), func(tc *txn.Coordinator, now int64) ([]*txn.StateRecord, func(error)) {
		if t.VerifyOnly {
			state, code = tc.Verify(t.TransactionalID, t.ProducerID, t.ProducerEpoch)
			return nil, nil
		}
		var rec *txn.StateRecord
		code, rec = tc.AddPartitions(now, t.TransactionalID, t.ProducerID, t.ProducerEpoch, topics)
		return one(rec), nil
	})
	if err != nil {
		return out, err
	}
	return answer(func(topic string, p int32) int16 {
		if code != 0 || state == nil {
			return code
		}
		if !state.Contains(cat.byName[topic].ID, p) {
			return kerr.TransactionAbortable.Code
		}
		return 0
	}), nil
}

// AddOffsetsToTxn answers AddOffsetsToTxn (txn.Coordinator.AddOffsets) on
// the id's shard. Errors: the shard's.
func (c *Coordinator) AddOffsetsToTxn(ctx context.Context, req *kmsg.AddOffsetsToTxnRequest) (*kmsg.AddOffsetsToTxnResponse, error) {
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, nil
	}
	err := c.txnDo(ctx, c.TxnShard(req.TransactionalID), func(tc *txn.Coordinator, now int64) ([]*txn.StateRecord, func(error)) {
		var rec *txn.StateRecord
		resp.ErrorCode, rec = tc.AddOffsets(now, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group)
		return one(rec), nil
	})
	return resp, err
}

// EndTxn answers EndTxn (txn.Coordinator.EndTxn) on the id's shard: once
// the outcome is durable the transaction is completed (markers, then
// CompleteCommit or CompleteAbort) and only then answered, so the
// producer's next transaction never waits on this one; a completion that
// fails is answered NONE all the same — the outcome is decided and
// durable — and finished by the periodic check. Errors: the shard's.
func (c *Coordinator) EndTxn(ctx context.Context, req *kmsg.EndTxnRequest) (*kmsg.EndTxnResponse, error) {
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	shard := c.TxnShard(req.TransactionalID)
	var prepared *txn.StateRecord
	err := c.txnDo(ctx, shard, func(tc *txn.Coordinator, now int64) ([]*txn.StateRecord, func(error)) {
		resp.ErrorCode, prepared = tc.EndTxn(now, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit)
		return one(prepared), nil
	})
	if err != nil {
		return nil, err
	}
	if prepared != nil {
		c.completeTxnLogged(ctx, shard, prepared)
	}
	return resp, nil
}

// TxnOffsetCommit answers TxnOffsetCommit: the transaction coordinator
// checks the producer and that the group is in its open transaction
// (txn.Coordinator.CheckOffsetCommit; for TxnOffsetCommit v4+ a group not
// added is TRANSACTION_ABORTABLE, before it INVALID_TXN_STATE) and
// answers the transaction's token, then the group's shard checks the
// member and writes the pending offsets (record 107 with the producer id
// and the token, group.Coordinator.CommitTxnOffsets), answered once
// durable — unless the transaction ended on the group's shard between the
// two (its record 110 there first): then nothing is written and every
// partition answers INVALID_TXN_STATE, TRANSACTION_ABORTABLE from v4 (the
// offsets' guard, DESIGN §Transactions). Errors: the shards'.
func (c *Coordinator) TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) (*kmsg.TxnOffsetCommitResponse, error) {
	res, err := c.checkTxn(ctx, diskless.TxnCheck{TransactionalID: req.TransactionalID, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, Group: req.Group})
	if err != nil {
		return nil, err
	}
	if res.Code != 0 {
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, t := range req.Topics {
			rt := kmsg.TxnOffsetCommitResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.TxnOffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: res.Code})
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return txnOffsetsAbortable(resp, req.Version), nil
	}
	var resp *kmsg.TxnOffsetCommitResponse
	err = c.groupDo(ctx, c.GroupShard(req.Group), func(gc *group.Coordinator, now time.Time) ([]group.Record, func(error)) {
		r, rec := gc.CommitTxnOffsets(now, req, res.Seq)
		resp = r
		if rec == nil {
			return nil, nil
		}
		return []group.Record{rec}, nil
	})
	if err != nil {
		return nil, err
	}
	return txnOffsetsAbortable(resp, req.Version), nil
}

// txnOffsetsAbortable returns resp with INVALID_TXN_STATE answered
// TRANSACTION_ABORTABLE from TxnOffsetCommit v4, the version whose client
// takes abortable errors (KIP-890; Kafka 4.4 answers v3 INVALID_TXN_STATE,
// v4 TRANSACTION_ABORTABLE, SPEC §15): the code of
// a transaction not open, refused by the check (the group not added) or
// by the group's shard (the transaction ended before the write, the
// offsets' guard).
func txnOffsetsAbortable(resp *kmsg.TxnOffsetCommitResponse, version int16) *kmsg.TxnOffsetCommitResponse {
	if version < 4 {
		return resp
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if p := &resp.Topics[i].Partitions[j]; p.ErrorCode == kerr.InvalidTxnState.Code {
				p.ErrorCode = kerr.TransactionAbortable.Code
			}
		}
	}
	return resp
}

// MarkerWriter writes the COMMIT (commit) or ABORT marker of producer
// (producerID, epoch)'s transaction to each partition of parts as a record
// batch through the produce pipeline, and returns once all are committed
// (produce.Handler.WriteMarkers; SPEC §15), each carrying seq, the token
// of the transaction it ends (0: not known), and coordinator epoch
// coordEpoch (its control record's; −1: none). It waits first for the
// producer's transactional batches still in flight here. A marker written
// twice changes nothing in the partition; one whose producer epoch is
// below the producer's there (INVALID_PRODUCER_EPOCH) or whose
// coordinator epoch is below the producer's last marker's there
// (TRANSACTION_COORDINATOR_FENCED) is refused, that partition alone:
// the error is then a diskless.MarkerErrors naming each refused
// partition, the others' markers written.
type MarkerWriter interface {
	WriteMarkers(ctx context.Context, producerID int64, epoch int16, seq int64, coordEpoch int32, commit bool, parts []diskless.TopicPartition) error
}

type markerWriterBox struct{ w MarkerWriter }

// SetMarkerWriter makes the coordinator write every transaction's markers
// into its partitions with w before completing it (DESIGN
// §Transactions). Without one (tests of the coordinator alone) a
// transaction's partitions get no marker.
func (c *Coordinator) SetMarkerWriter(w MarkerWriter) { c.markers.Store(&markerWriterBox{w}) }

// CheckTxnProduce answers whether producer (pid, epoch), holding
// transactional id id, may write a transactional batch to each of tps now
// (SPEC §15; produce.Transactions), and the open transaction's token (the
// batches' CommitBatch.TxnSeq): one CheckTxn on the id's shard for all of
// tps, here or — in a cluster — at its owner through Config.Remote. errs
// is nil when every partition is allowed, else one error per tps (nil:
// allowed): another producer id, or none, INVALID_PRODUCER_ID_MAPPING for
// every partition; another epoch INVALID_PRODUCER_EPOCH, which Kafka's
// partition leader answers a fenced producer; a partition not in the
// Ongoing transaction INVALID_TXN_STATE, that partition alone (the
// produce handler answers it TRANSACTION_ABORTABLE from Produce v11). A
// shard that cannot answer: NOT_LEADER_OR_FOLLOWER for every partition,
// which the producer retries.
func (c *Coordinator) CheckTxnProduce(ctx context.Context, id string, pid int64, epoch int16, tps []diskless.TopicPartition) (seq int64, errs []*kerr.Error) {
	res, err := c.checkTxn(ctx, diskless.TxnCheck{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, Partitions: tps})
	all := func(e *kerr.Error) []*kerr.Error {
		errs := make([]*kerr.Error, len(tps))
		for i := range errs {
			errs[i] = e
		}
		return errs
	}
	switch {
	case err != nil:
		return 0, all(kerr.NotLeaderForPartition)
	case res.Code != 0:
		return 0, all(kerr.ErrorForCode(res.Code).(*kerr.Error))
	case len(res.PartitionCodes) != len(tps):
		// A broken answer (the peer client checks the count): the
		// producer retries.
		return 0, all(kerr.NotLeaderForPartition)
	}
	for i, code := range res.PartitionCodes {
		if code == 0 {
			continue
		}
		if errs == nil {
			errs = make([]*kerr.Error, len(tps))
		}
		errs[i] = kerr.ErrorForCode(code).(*kerr.Error)
	}
	return res.Seq, errs
}

// checkTxn is CheckTxn on req's id's shard: here alone, through the
// router (Config.Remote: here or at the owner) in a cluster.
func (c *Coordinator) checkTxn(ctx context.Context, req diskless.TxnCheck) (diskless.TxnCheckResult, error) {
	shard := c.TxnShard(req.TransactionalID)
	if c.clustered() {
		return c.cfg.Remote.CheckTxn(ctx, shard, req)
	}
	return c.CheckTxn(ctx, shard, req)
}

// CheckTxn answers req (diskless.TxnCheck, SPEC §15) on shard, which must
// be hosted here and own req's id: for partitions, all under one hold of
// the shard's read lock — the table the driver changes under its write
// lock, so the transition out of Ongoing and the check are ordered, and
// every partition sees the same state —; for a group's offsets, on the
// shard's driver (txn.Coordinator.CheckOffsetCommit). The result's Seq is
// the open transaction's token. Errors: diskless.ErrNotCoordinator
// (wrapped) for a shard not hosted here or not req's id's,
// diskless.ErrShardLoading, the shard's failure.
func (c *Coordinator) CheckTxn(ctx context.Context, shard int32, req diskless.TxnCheck) (diskless.TxnCheckResult, error) {
	if shard != c.TxnShard(req.TransactionalID) {
		return diskless.TxnCheckResult{}, fmt.Errorf("%w: transactional id %q is not on shard %d", diskless.ErrNotCoordinator, req.TransactionalID, shard)
	}
	if req.Group != "" {
		var res diskless.TxnCheckResult
		err := c.txnDo(ctx, shard, func(tc *txn.Coordinator, now int64) ([]*txn.StateRecord, func(error)) {
			res.Code, res.Seq = tc.CheckOffsetCommit(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group)
			return nil, nil
		})
		return res, err
	}
	if err := c.Serving(shard); err != nil {
		return diskless.TxnCheckResult{}, err
	}
	s := c.shards[shard]
	if s.rebuilding.Load() {
		return diskless.TxnCheckResult{}, fmt.Errorf("%w (shard %d, %w)", diskless.ErrShardLoading, shard, kerr.CoordinatorLoadInProgress)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.failed != nil {
		return diskless.TxnCheckResult{}, s.failedError()
	}
	rec, ok := s.mu.st.txns.Get(req.TransactionalID)
	switch {
	case !ok || rec.ProducerID != req.ProducerID:
		return diskless.TxnCheckResult{Code: kerr.InvalidProducerIDMapping.Code}, nil
	case rec.ProducerEpoch != req.ProducerEpoch:
		return diskless.TxnCheckResult{Code: kerr.InvalidProducerEpoch.Code}, nil
	}
	res := diskless.TxnCheckResult{PartitionCodes: make([]int16, len(req.Partitions)), Seq: rec.Seq}
	for i, tp := range req.Partitions {
		if rec.State != txn.Ongoing || !rec.Contains(tp.TopicID, tp.Partition) {
			res.PartitionCodes[i] = kerr.InvalidTxnState.Code
		}
	}
	return res, nil
}

// EndTxnOffsets writes record 110 on shard, hosted here and group's: the
// pending offsets of producer (pid, epoch) in the shard's groups are
// committed (committed) or dropped, answered once durable (DESIGN
// §Transactions, the markers) — unless they belong to a transaction
// after seq, the token of the one that ended (0: not known), which the
// record then leaves alone (group.Offsets.Apply); from then on the
// shard refuses the producer's offsets of seq or before
// (group.Coordinator.EndTxnOffsets). Errors: as CheckTxn's.
func (c *Coordinator) EndTxnOffsets(ctx context.Context, shard int32, groupID string, pid int64, epoch int16, seq int64, committed bool) error {
	if shard != c.GroupShard(groupID) {
		return fmt.Errorf("%w: group %q is not on shard %d", diskless.ErrNotCoordinator, groupID, shard)
	}
	return c.groupDo(ctx, shard, func(gc *group.Coordinator, now time.Time) ([]group.Record, func(error)) {
		return []group.Record{gc.EndTxnOffsets(now, pid, epoch, seq, committed)}, nil
	})
}

// endTxnOffsets is EndTxnOffsets on group's shard: here alone, through
// the router in a cluster.
func (c *Coordinator) endTxnOffsets(ctx context.Context, g string, pid int64, epoch int16, seq int64, committed bool) error {
	shard := c.GroupShard(g)
	if c.clustered() {
		return c.cfg.Remote.EndTxnOffsets(ctx, shard, g, pid, epoch, seq, committed)
	}
	return c.EndTxnOffsets(ctx, shard, g, pid, epoch, seq, committed)
}

// completeTxnLogged completes a transaction and logs a failure, which the
// periodic check retries.
func (c *Coordinator) completeTxnLogged(ctx context.Context, shard int32, prepared *txn.StateRecord) {
	if err := c.completeTxn(ctx, shard, prepared); err != nil && ctx.Err() == nil {
		c.logger.Warn("coordinator: completing a transaction failed; retried by the next transaction check",
			"shard", shard, "transactional_id", prepared.TransactionalID, "err", err)
	}
}

// completeTxn writes the markers of a transaction whose outcome is
// durable (prepared: its PrepareCommit or PrepareAbort state) and then its
// completion. The markers are a control batch in each of its partitions
// (through the MarkerWriter, when one is set), then records 110 on the
// shard of each consumer group in it, which commit or drop the producer's
// pending offsets. A marker takes an offset, so one completion at a time
// per transaction: a caller finding another under way (EndTxn and the
// periodic check racing) waits for it, and a transaction no longer in
// prepared's state (completed meanwhile, or fenced) is left alone. Only a
// crash between the markers and the completion writes them again: a
// marker for a producer with no open transaction in its partition changes
// nothing there (txndata.go) and consumers skip control batches (SPEC §15).
func (c *Coordinator) completeTxn(ctx context.Context, shard int32, prepared *txn.StateRecord) error {
	key := txnKey{prepared.TransactionalID, prepared.ProducerID, prepared.ProducerEpoch}
	for {
		done := make(chan struct{})
		other, busy := c.completing.LoadOrStore(key, done)
		if !busy {
			defer func() { c.completing.Delete(key); close(done) }()
			break
		}
		select {
		case <-other.(chan struct{}):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if !c.txnStill(shard, prepared) {
		return nil
	}
	if prepared.CoordinatorEpoch < c.shards[shard].txnEpoch.Load() {
		// Prepared by an earlier owner of the shard: its markers go out
		// with this coordinator's epoch only once a record of the
		// transaction carrying it is durable (DESIGN §Transactions, the
		// coordinator epoch).
		var err error
		if prepared, err = c.adoptTxn(ctx, shard, prepared); err != nil || prepared == nil {
			return err
		}
	}
	commit := prepared.State == txn.PrepareCommit
	if box := c.markers.Load(); box != nil && len(prepared.Topics) > 0 {
		var parts []diskless.TopicPartition
		for _, t := range prepared.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, diskless.TopicPartition{TopicID: t.TopicID, Partition: p})
			}
		}
		err := box.w.WriteMarkers(ctx, prepared.ProducerID, prepared.ProducerEpoch, prepared.Seq, prepared.CoordinatorEpoch, commit, parts)
		if refused := diskless.MarkerErrors(nil); errors.As(err, &refused) && refused.All(kerr.InvalidProducerEpoch) {
			// The partitions that refused hold the producer at a newer
			// epoch (an operator's WriteTxnMarkers of one): the
			// transaction is over there, as Kafka's coordinator takes
			// this answer ("this txn can now be ignored"); the others
			// have their markers, so the completion goes on rather than
			// the id staying Prepare* for ever.
			c.logger.Warn("coordinator: partitions hold the producer at a newer epoch than its transaction's markers; completing it without them",
				"shard", shard, "transactional_id", prepared.TransactionalID, "err", err)
			err = nil
		}
		if err != nil {
			return fmt.Errorf("markers: %w", err)
		}
	}
	for _, g := range prepared.Groups {
		if err := c.endTxnOffsets(ctx, g, prepared.ProducerID, prepared.ProducerEpoch, prepared.Seq, commit); err != nil {
			return fmt.Errorf("marker for group %q: %w", g, err)
		}
	}
	return c.txnDo(ctx, shard, func(tc *txn.Coordinator, now int64) ([]*txn.StateRecord, func(error)) {
		return one(tc.Complete(now, prepared.TransactionalID, prepared.ProducerID, prepared.ProducerEpoch, prepared.State)), nil
	})
}

// adoptTxn writes prepared's transaction again under this coordinator's
// epoch (txn.Coordinator.Adopt) and returns its state once durable; nil
// when the shard no longer holds the transaction in prepared's state.
// Errors: the shard's.
func (c *Coordinator) adoptTxn(ctx context.Context, shard int32, prepared *txn.StateRecord) (*txn.StateRecord, error) {
	var adopted *txn.StateRecord
	err := c.txnDo(ctx, shard, func(tc *txn.Coordinator, _ int64) ([]*txn.StateRecord, func(error)) {
		var rec *txn.StateRecord
		adopted, rec = tc.Adopt(prepared.TransactionalID, prepared.ProducerID, prepared.ProducerEpoch, prepared.State)
		return one(rec), nil
	})
	if err != nil {
		return nil, err
	}
	return adopted, nil
}

// txnKey names one transaction: its id, producer id and epoch.
type txnKey struct {
	id    string
	pid   int64
	epoch int16
}

// txnStill reports whether shard's transaction coordinator still holds
// prepared's transaction in prepared's state.
func (c *Coordinator) txnStill(shard int32, prepared *txn.StateRecord) bool {
	s := c.shards[shard]
	s.mu.RLock()
	defer s.mu.RUnlock()
	rec, ok := s.mu.st.txns.Get(prepared.TransactionalID)
	return ok && rec.ProducerID == prepared.ProducerID && rec.ProducerEpoch == prepared.ProducerEpoch && rec.State == prepared.State
}

// runTxnCheck is the periodic transaction check of every shard this
// sidecar hosts: abort the transactions whose timeout passed (fencing
// their producers, Kafka's abortTimedOutTransactions) and complete every
// transaction whose outcome is decided but not completed. Failures are
// joined; the next check retries them.
func (c *Coordinator) runTxnCheck(ctx context.Context) error {
	var errs []error
	for _, s := range c.shards {
		if c.clustered() && !s.hosted() || !s.holdsTxns() {
			continue
		}
		var preparing []*txn.StateRecord
		err := c.txnDo(ctx, s.id, func(tc *txn.Coordinator, now int64) ([]*txn.StateRecord, func(error)) {
			expired := tc.Expire(now)
			if len(expired) > 0 {
				// One line per pass, however many (clients choose how
				// many transactions time out).
				c.logger.Info("coordinator: aborting transactions whose timeout passed",
					"shard", s.id, "count", len(expired), "first_transactional_id", expired[0].TransactionalID)
			}
			return expired, func(err error) {
				if err == nil {
					preparing = tc.Table().Preparing()
				}
			}
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("shard %d: %w", s.id, err))
			continue
		}
		for _, rec := range preparing {
			if err := c.completeTxn(ctx, s.id, rec); err != nil {
				errs = append(errs, fmt.Errorf("shard %d: transactional id %q: %w", s.id, rec.TransactionalID, err))
			}
		}
	}
	return errors.Join(errs...)
}

// runTxnIDExpiry removes, on every shard this sidecar hosts, the
// transactional ids with no open transaction that were idle for
// transactional.id.expiration.ms (txn.Coordinator.ExpireIDs: records 118
// in state Dead). Failures are joined; the next pass retries.
func (c *Coordinator) runTxnIDExpiry(ctx context.Context) error {
	var errs []error
	for _, s := range c.shards {
		if c.clustered() && !s.hosted() || !s.holdsTxns() {
			continue
		}
		err := c.txnDo(ctx, s.id, func(tc *txn.Coordinator, now int64) ([]*txn.StateRecord, func(error)) {
			return tc.ExpireIDs(now), nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("shard %d: %w", s.id, err))
		}
	}
	return errors.Join(errs...)
}

// holdsTxns reports whether the shard holds any transactional id (under
// its read lock): the periodic passes skip the shards that hold none
// without a trip through their drivers.
func (s *shard) holdsTxns() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.failed == nil && s.mu.st.txns.HoldsIDs()
}
