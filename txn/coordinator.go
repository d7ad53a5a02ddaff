package txn

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Config configures a shard's transaction coordinator.
type Config struct {
	// MaxTimeoutMs is transaction.max.timeout.ms: the largest
	// transaction.timeout.ms a producer may ask for; InitProducerId with a
	// larger one (or one ≤ 0) gets INVALID_TRANSACTION_TIMEOUT. Default
	// 900000 (15 min), Kafka's (SPEC §15).
	MaxTimeoutMs int32
	// IDExpirationMs is transactional.id.expiration.ms: a transactional
	// id with no open transaction whose state has not changed for this
	// long is removed (ExpireIDs). Default 604800000 (7 days), Kafka's.
	IDExpirationMs int64
}

// Kafka's defaults of transaction.max.timeout.ms and
// transactional.id.expiration.ms.
const (
	DefaultMaxTimeoutMs   int32 = 900_000
	DefaultIDExpirationMs int64 = 7 * 24 * 3600 * 1000
)

// Validate reports a config that cannot work.
func (c Config) Validate() error {
	if c.MaxTimeoutMs < 0 {
		return fmt.Errorf("txn: transaction.max.timeout.ms %d must be ≥ 1", c.MaxTimeoutMs)
	}
	if c.IDExpirationMs < 0 {
		return fmt.Errorf("txn: transactional.id.expiration.ms %d must be ≥ 1", c.IDExpirationMs)
	}
	return nil
}

// Coordinator decides the transaction requests of one shard against its
// Table. It does no IO and keeps no clock: every method takes now (ms
// since the epoch) and returns the record 118 to write, which the caller
// applies to the Table (Table.Apply) as decided and answers once it is
// durable (doc.go). Used only by the shard's driver.
type Coordinator struct {
	cfg   Config
	table *Table
	// epoch is the coordinator epoch (Epoch).
	epoch int32
}

// New returns a coordinator deciding against table (replayed from the
// log). A zero MaxTimeoutMs means DefaultMaxTimeoutMs.
func New(cfg Config, table *Table) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxTimeoutMs == 0 {
		cfg.MaxTimeoutMs = DefaultMaxTimeoutMs
	}
	if cfg.IDExpirationMs == 0 {
		cfg.IDExpirationMs = DefaultIDExpirationMs
	}
	if table == nil {
		return nil, errors.New("txn: nil table")
	}
	return &Coordinator{cfg: cfg, table: table, epoch: table.Epoch() + 1}, nil
}

// Replace makes the coordinator decide against table (the shard rebuilt
// its state from the log); its epoch stays.
func (c *Coordinator) Replace(table *Table) { c.table = table }

// Adopt returns the state of transactional id id if it holds producer
// (pid, epoch) in state st, and the record to write first when that state
// carries an older coordinator epoch than this coordinator's: the same
// state again, its CoordinatorEpoch to be stamped with Epoch by the
// caller. A coordinator writes a transaction's markers with its epoch only
// once a record of the transaction carrying it is durable (DESIGN
// §Transactions, the coordinator epoch). cur is nil when the id no longer
// holds that state, rec nil when nothing need be written.
func (c *Coordinator) Adopt(id string, pid int64, epoch int16, st State) (cur, rec *StateRecord) {
	r, ok := c.table.ids[id]
	if !ok || r.ProducerID != pid || r.ProducerEpoch != epoch || r.State != st {
		return nil, nil
	}
	if r.CoordinatorEpoch >= c.epoch {
		return r, nil
	}
	rec = r.clone()
	rec.CoordinatorEpoch = c.epoch
	return rec, rec
}

// Epoch is the coordinator epoch of this coordinator: one more than the
// largest of the table it was created with (Table.Epoch), so 0 on a shard
// no coordinator wrote yet. A coordinator is created each time its shard
// is taken over or opened, so every owner of the shard has a larger
// epoch than those before it whose records it read; the caller stamps
// it on every record it writes (StateRecord.CoordinatorEpoch) and on the
// transaction's markers (DESIGN §Transactions, the coordinator epoch).
func (c *Coordinator) Epoch() int32 { return c.epoch }

// Table returns the table the coordinator decides against.
func (c *Coordinator) Table() *Table { return c.table }

// InitResult is InitProducerId's decision.
type InitResult struct {
	// Code is the answer's error code; ProducerID and ProducerEpoch the
	// producer's (−1 on an error).
	Code          int16
	ProducerID    int64
	ProducerEpoch int16
	// Record is the record 118 to write before answering, or nil.
	Record *StateRecord
	// NeedProducerID: the decision needs a fresh producer id (a new
	// transactional id, or an exhausted epoch) and none was given; call
	// again with one. Nothing else is set.
	NeedProducerID bool
}

// InitProducerID decides InitProducerId for transactional id id with
// transaction.timeout.ms timeoutMs and (v3+, KIP-360) the producer id and
// epoch the producer holds (−1, −1: none); freshPID is a never-used
// producer id the caller allocated, or −1 (SPEC §15):
//
//   - timeoutMs ≤ 0 or > transaction.max.timeout.ms: INVALID_TRANSACTION_TIMEOUT;
//   - a new id: freshPID with epoch 0, state Empty;
//   - an expected producer id that is neither the id's nor (with an
//     exhausted epoch) its previous one: PRODUCER_FENCED;
//   - PrepareCommit, PrepareAbort: CONCURRENT_TRANSACTIONS (retriable);
//   - Ongoing: the open transaction is aborted with the epoch bumped
//     (PrepareAbort; the caller completes it) and the answer is
//     CONCURRENT_TRANSACTIONS, which the producer retries;
//   - otherwise the epoch is bumped (a fresh producer id with epoch 0 once
//     it is exhausted) and the state is Empty: every older producer of the
//     id is fenced. With an expected epoch, a retry after a lost answer
//     (the expected epoch is the previous one) gets the current epoch
//     without a bump; another expected epoch than the current one gets
//     PRODUCER_FENCED.
func (c *Coordinator) InitProducerID(now int64, id string, timeoutMs int32, expPID int64, expEpoch int16, freshPID int64) InitResult {
	fail := func(e *kerr.Error) InitResult { return InitResult{Code: e.Code, ProducerID: -1, ProducerEpoch: -1} }
	if timeoutMs <= 0 || timeoutMs > c.cfg.MaxTimeoutMs {
		return fail(kerr.InvalidTransactionTimeout)
	}
	cur, ok := c.table.ids[id]
	if !ok {
		if freshPID < 0 {
			return InitResult{NeedProducerID: true}
		}
		rec := &StateRecord{
			TransactionalID: id, ProducerID: freshPID, ProducerEpoch: 0,
			LastProducerID: -1, LastProducerEpoch: -1, TimeoutMs: timeoutMs,
			State: Empty, StartTimestamp: -1, UpdateTimestamp: now,
		}
		return InitResult{ProducerID: freshPID, ProducerEpoch: 0, Record: rec}
	}
	expected := expPID >= 0
	if expected && expPID != cur.ProducerID && (expPID != cur.LastProducerID || !exhausted(expEpoch)) {
		return fail(kerr.ProducerFenced)
	}
	switch cur.State {
	case PrepareCommit, PrepareAbort:
		return fail(kerr.ConcurrentTransactions)
	case Ongoing:
		rec := c.fence(now, cur)
		return InitResult{Code: kerr.ConcurrentTransactions.Code, ProducerID: -1, ProducerEpoch: -1, Record: rec}
	}
	rec := cur.clone()
	rec.State, rec.StartTimestamp, rec.UpdateTimestamp, rec.TimeoutMs = Empty, -1, now, timeoutMs
	rec.Topics, rec.Groups = nil, nil
	bump := true
	switch {
	case !expected:
		rec.LastProducerEpoch = -1
	case expPID == cur.ProducerID && expEpoch == cur.ProducerEpoch:
		rec.LastProducerEpoch = cur.ProducerEpoch
	case expPID == cur.ProducerID && cur.LastProducerEpoch >= 0 && expEpoch == cur.LastProducerEpoch,
		expPID == cur.LastProducerID:
		// A retry whose answer was lost: the current producer again.
		bump = false
	default:
		return fail(kerr.ProducerFenced)
	}
	if bump {
		if exhausted(cur.ProducerEpoch) {
			if freshPID < 0 {
				return InitResult{NeedProducerID: true}
			}
			rec.LastProducerID, rec.LastProducerEpoch = cur.ProducerID, cur.ProducerEpoch
			rec.ProducerID, rec.ProducerEpoch = freshPID, 0
		} else {
			rec.ProducerEpoch++
		}
	}
	return InitResult{ProducerID: rec.ProducerID, ProducerEpoch: rec.ProducerEpoch, Record: rec}
}

// fence returns cur's open transaction aborted by the coordinator: the
// epoch bumped (unless exhausted), so the producer holding it is fenced,
// the previous epoch kept (KIP-588), PrepareAbort.
func (c *Coordinator) fence(now int64, cur *StateRecord) *StateRecord {
	rec := cur.clone()
	rec.LastProducerEpoch = cur.ProducerEpoch
	if !exhausted(cur.ProducerEpoch) {
		rec.ProducerEpoch++
	}
	rec.State, rec.UpdateTimestamp = PrepareAbort, now
	return rec
}

// check is the producer check every request after InitProducerId makes:
// an unknown id or another producer id is INVALID_PRODUCER_ID_MAPPING,
// another epoch PRODUCER_FENCED.
func (c *Coordinator) check(id string, pid int64, epoch int16) (*StateRecord, *kerr.Error) {
	cur, ok := c.table.ids[id]
	switch {
	case !ok || cur.ProducerID != pid:
		return nil, kerr.InvalidProducerIDMapping
	case cur.ProducerEpoch != epoch:
		return cur, kerr.ProducerFenced
	}
	return cur, nil
}

// AddPartitions decides AddPartitionsToTxn (v0–3, and v4+ without
// VerifyOnly) for the partitions of topics, which the caller found in the
// catalog: INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (check);
// CONCURRENT_TRANSACTIONS while a previous transaction's markers are
// being written (Prepare*); otherwise the transaction is Ongoing (its
// timeout counting from now if it was not) with the partitions added —
// no record when it already held them all. Code 0 on success.
func (c *Coordinator) AddPartitions(now int64, id string, pid int64, epoch int16, topics []Topic) (int16, *StateRecord) {
	cur, err := c.check(id, pid, epoch)
	if err != nil {
		return err.Code, nil
	}
	if cur.State.preparing() {
		return kerr.ConcurrentTransactions.Code, nil
	}
	rec := cur.clone()
	changed := rec.addTopics(topics)
	if cur.State == Ongoing && !changed {
		return 0, nil
	}
	c.begin(now, cur, rec)
	return 0, rec
}

// begin makes rec (cur's next state) Ongoing, starting its timeout at now
// unless cur was already Ongoing.
func (c *Coordinator) begin(now int64, cur, rec *StateRecord) {
	if cur.State != Ongoing {
		// Empty and Complete* hold no partitions or groups (InitProducerID
		// and Complete cleared them): rec holds only what was added now.
		// A new transaction: its token is the next Seq.
		rec.StartTimestamp = now
		rec.Seq = cur.Seq + 1
	}
	rec.State, rec.UpdateTimestamp = Ongoing, now
}

// AddOffsets decides AddOffsetsToTxn for consumer group group: as
// AddPartitions, the group taking the place of its offsets partition.
func (c *Coordinator) AddOffsets(now int64, id string, pid int64, epoch int16, group string) (int16, *StateRecord) {
	cur, err := c.check(id, pid, epoch)
	if err != nil {
		return err.Code, nil
	}
	if cur.State.preparing() {
		return kerr.ConcurrentTransactions.Code, nil
	}
	if cur.State == Ongoing && cur.HasGroup(group) {
		return 0, nil
	}
	rec := cur.clone()
	if i, ok := slices.BinarySearch(rec.Groups, group); !ok {
		rec.Groups = slices.Insert(rec.Groups, i, group)
	}
	c.begin(now, cur, rec)
	return 0, rec
}

// Verify decides the KIP-890 verification of AddPartitionsToTxn v4+ with
// VerifyOnly: the producer check (INVALID_PRODUCER_ID_MAPPING,
// PRODUCER_FENCED) as a code for every partition, else the state, whose
// Contains says which partitions are in the open transaction (the others
// get TRANSACTION_ABORTABLE from the caller, as Kafka 4.4 answers, SPEC
// §15). Nothing is written.
func (c *Coordinator) Verify(id string, pid int64, epoch int16) (*StateRecord, int16) {
	cur, err := c.check(id, pid, epoch)
	if err != nil {
		return nil, err.Code
	}
	if cur.State != Ongoing {
		return &StateRecord{TransactionalID: id}, 0
	}
	return cur, 0
}

// CheckOffsetCommit decides whether TxnOffsetCommit of (pid, epoch) for
// group may go ahead: the producer check, and the group added to the
// open transaction (AddOffsetsToTxn) — else INVALID_TXN_STATE (the
// group coordinator's verification, KIP-890). Code 0: go ahead, and seq
// is the open transaction's token (StateRecord.Seq), which the pending
// offsets carry (record 107) so that only that transaction's record 110
// ends them.
func (c *Coordinator) CheckOffsetCommit(id string, pid int64, epoch int16, group string) (code int16, seq int64) {
	cur, err := c.check(id, pid, epoch)
	if err != nil {
		return err.Code, 0
	}
	if cur.State != Ongoing || !cur.HasGroup(group) {
		return kerr.InvalidTxnState.Code, 0
	}
	return 0, cur.Seq
}

// EndTxn decides EndTxn (commit or abort): the producer check; Ongoing
// becomes PrepareCommit or PrepareAbort, which the caller completes
// (markers, then Complete); a retry of the outcome already decided is
// answered NONE when complete and CONCURRENT_TRANSACTIONS while its
// markers are written; the other outcome INVALID_TXN_STATE. With no
// transaction begun (Empty) a commit is INVALID_TXN_STATE and an abort
// NONE, nothing written (Kafka 4.4 observed, SPEC §15).
func (c *Coordinator) EndTxn(now int64, id string, pid int64, epoch int16, commit bool) (int16, *StateRecord) {
	cur, err := c.check(id, pid, epoch)
	if err != nil {
		return err.Code, nil
	}
	want, prep := CompleteAbort, PrepareAbort
	if commit {
		want, prep = CompleteCommit, PrepareCommit
	}
	switch cur.State {
	case Ongoing:
		rec := cur.clone()
		rec.State, rec.UpdateTimestamp = prep, now
		return 0, rec
	case want:
		return 0, nil
	case prep:
		return kerr.ConcurrentTransactions.Code, nil
	case Empty:
		if !commit {
			return 0, nil
		}
	}
	return kerr.InvalidTxnState.Code, nil
}

// Complete returns the record completing the transaction of id that was
// in state prep (PrepareCommit or PrepareAbort) with producer (pid,
// epoch), once every marker of it was written: CompleteCommit or
// CompleteAbort, partitions and groups cleared, the start timestamp kept. Nil when the id has moved
// on (another call completed it).
func (c *Coordinator) Complete(now int64, id string, pid int64, epoch int16, prep State) *StateRecord {
	cur, ok := c.table.ids[id]
	if !ok || cur.ProducerID != pid || cur.ProducerEpoch != epoch || cur.State != prep || !prep.preparing() {
		return nil
	}
	rec := cur.clone()
	rec.State = CompleteCommit
	if prep == PrepareAbort {
		rec.State = CompleteAbort
	}
	// StartTimestamp stays: Kafka keeps the start of the last transaction
	// until the next InitProducerId, and DescribeTransactions shows it.
	rec.Topics, rec.Groups, rec.UpdateTimestamp = nil, nil, now
	return rec
}

// Expire returns the records aborting every Ongoing transaction whose
// timeout passed by now (started at StartTimestamp, TimeoutMs long): each
// fenced (epoch bumped) and PrepareAbort, for the caller to complete
// (Kafka's abortTimedOutTransactions).
func (c *Coordinator) Expire(now int64) []*StateRecord {
	var out []*StateRecord
	for _, id := range slices.Sorted(maps.Keys(c.table.ids)) {
		cur := c.table.ids[id]
		if cur.State == Ongoing && cur.StartTimestamp+int64(cur.TimeoutMs) <= now {
			out = append(out, c.fence(now, cur))
		}
	}
	return out
}

// ExpireIDs returns the records removing every transactional id with no
// open transaction (Empty, CompleteCommit, CompleteAbort) whose state
// has not changed for transactional.id.expiration.ms by now: state Dead
// (Kafka's removal of expired transactional ids). A producer of a removed
// id gets INVALID_PRODUCER_ID_MAPPING, and its next InitProducerId a
// fresh producer id.
func (c *Coordinator) ExpireIDs(now int64) []*StateRecord {
	var out []*StateRecord
	for _, id := range slices.Sorted(maps.Keys(c.table.ids)) {
		cur := c.table.ids[id]
		switch cur.State {
		case Empty, CompleteCommit, CompleteAbort:
			if cur.UpdateTimestamp+c.cfg.IDExpirationMs <= now {
				rec := cur.clone()
				rec.State, rec.UpdateTimestamp = Dead, now
				out = append(out, rec)
			}
		}
	}
	return out
}
