package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/tagged"
)

// Record keys of the transaction coordinator (docs/format/metadata-records.md
// §118). Keys 119 … 121 are reserved for the data path of transactions.
const KeyTxnState int16 = 118

const recordFrameVersion = 1 // KRaft's metadata record frame version

// ErrBadRecord is returned (wrapped) by DecodeRecord and DecodeSnapshot for
// bytes that are not a well-formed record or snapshot section.
var ErrBadRecord = errors.New("txn: malformed record")

// IsRecordKey reports whether key is one of this package's record keys.
func IsRecordKey(key int16) bool { return key == KeyTxnState }

// State is a transaction's state, numbered as Kafka's TransactionState
// (KIP-98): Empty 0, Ongoing 1, PrepareCommit 2, PrepareAbort 3,
// CompleteCommit 4, CompleteAbort 5, Dead 6 (the id expired: a record in
// this state removes it).
type State int8

// The states of a transactional id.
const (
	Empty State = iota
	Ongoing
	PrepareCommit
	PrepareAbort
	CompleteCommit
	CompleteAbort
	Dead
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead"}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// StateNamed returns the state Kafka names name (case-sensitive), for
// ListTransactions' state filters. PrepareEpochFence, a state of Kafka's
// this coordinator never holds, is known and returned as -1 (no id is in
// it); ok is false for a name Kafka does not know.
func StateNamed(name string) (s State, ok bool) {
	if name == "PrepareEpochFence" {
		return -1, true
	}
	i := slices.Index(stateNames[:], name)
	return State(i), i >= 0
}

// preparing reports whether s is PrepareCommit or PrepareAbort: the outcome
// is decided and durable, the markers not all written.
func (s State) preparing() bool { return s == PrepareCommit || s == PrepareAbort }

// StateRecord is record 118 DisklessTxnStateRecord: the whole state of one
// transactional id after a transition. Applying it replaces what the
// table held for the id.
type StateRecord struct {
	TransactionalID string
	// ProducerID and ProducerEpoch are the id's current producer.
	ProducerID    int64
	ProducerEpoch int16
	// LastProducerID is the producer id before the last rotation (epoch
	// exhausted), −1 if none; LastProducerEpoch the epoch before the
	// coordinator last bumped it itself (a fenced or timed-out
	// transaction's abort), −1 if none. Both let a producer's retry of
	// InitProducerId after a lost answer be recognised (KIP-360).
	LastProducerID    int64
	LastProducerEpoch int16
	// TimeoutMs is the producer's transaction.timeout.ms.
	TimeoutMs int32
	State     State
	// StartTimestamp is ms since the epoch when the id's last transaction
	// became Ongoing (its timeout counts from it), kept until the next
	// InitProducerId as Kafka keeps it; −1 when none began since.
	StartTimestamp int64
	// UpdateTimestamp is ms since the epoch of the transition.
	UpdateTimestamp int64
	// Topics are the partitions in the transaction, by topic id
	// ascending, partitions ascending (empty unless Ongoing or Prepare*).
	Topics []Topic
	// Groups are the consumer groups whose offsets are in the
	// transaction (AddOffsetsToTxn), ascending.
	Groups []string
	// Seq numbers the id's transactions: 1 for the first one to begin,
	// one more each time a transaction begins (Ongoing from Empty or
	// Complete*), kept through its end and InitProducerId; 0 in records
	// written before it was kept (tagged field 0, written when not 0). It
	// is the token of the transaction guard: a transactional batch's
	// commit carries the Seq its check saw, a marker the Seq of the
	// transaction it ends, and a partition refuses a batch whose Seq its
	// producer's last marker there has reached (DESIGN §Transactions).
	Seq int64
	// CoordinatorEpoch is the coordinator epoch of the transaction
	// coordinator that wrote the record (Coordinator.Epoch: one more than
	// the largest of the shard's records when it took the shard over);
	// −1 in records written before it was kept (tagged field 1, an int32
	// written when not −1). A coordinator writes a transaction's markers
	// with its epoch only once a record of the transaction carrying it is
	// durable, and a partition refuses a marker whose epoch is below its
	// producer's last marker's there (DESIGN §Transactions, the
	// coordinator epoch).
	CoordinatorEpoch int32
}

// Topic is one topic of a transaction: its id, its name when added, and
// the partitions added.
type Topic struct {
	TopicID    [16]byte
	Name       string
	Partitions []int32
}

// Key returns 118.
func (*StateRecord) Key() int16 { return KeyTxnState }

// AppendRecord appends rec's record body — uvarint frame version 1, uvarint
// key, uvarint version 0, then the fields in Kafka's flexible-version
// encoding — to dst, the same body layout as records 100–114.
func AppendRecord(dst []byte, rec *StateRecord) []byte {
	dst = kbin.AppendUvarint(dst, recordFrameVersion)
	dst = kbin.AppendUvarint(dst, uint32(KeyTxnState))
	dst = kbin.AppendUvarint(dst, 0)
	return rec.appendFields(dst)
}

func (r *StateRecord) appendFields(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, r.TransactionalID)
	dst = kbin.AppendInt64(dst, r.ProducerID)
	dst = kbin.AppendInt16(dst, r.ProducerEpoch)
	dst = kbin.AppendInt64(dst, r.LastProducerID)
	dst = kbin.AppendInt16(dst, r.LastProducerEpoch)
	dst = kbin.AppendInt32(dst, r.TimeoutMs)
	dst = kbin.AppendInt8(dst, int8(r.State))
	dst = kbin.AppendInt64(dst, r.StartTimestamp)
	dst = kbin.AppendInt64(dst, r.UpdateTimestamp)
	dst = kbin.AppendCompactArrayLen(dst, len(r.Topics))
	for _, t := range r.Topics {
		dst = kbin.AppendUuid(dst, t.TopicID)
		dst = kbin.AppendCompactString(dst, t.Name)
		dst = kbin.AppendCompactArrayLen(dst, len(t.Partitions))
		for _, p := range t.Partitions {
			dst = kbin.AppendInt32(dst, p)
		}
		dst = kbin.AppendUvarint(dst, 0)
	}
	dst = kbin.AppendCompactArrayLen(dst, len(r.Groups))
	for _, g := range r.Groups {
		dst = kbin.AppendCompactString(dst, g)
	}
	var buf [8 + 4]byte
	var fs [2]tagged.Field
	fields := fs[:0]
	if r.Seq != 0 {
		// Tag 0: Seq as an int64.
		fields = append(fields, tagged.Field{Tag: 0, Value: kbin.AppendInt64(buf[:0], r.Seq)})
	}
	if r.CoordinatorEpoch != -1 {
		// Tag 1: CoordinatorEpoch as an int32.
		fields = append(fields, tagged.Field{Tag: 1, Value: kbin.AppendInt32(buf[8:8], r.CoordinatorEpoch)})
	}
	return tagged.Append(dst, fields...)
}

// DecodeRecord decodes one record body written by AppendRecord. The result
// does not alias b. Errors wrap ErrBadRecord: a truncated body, another
// frame version, key or record version, a null or over-long string or
// array, a state out of range, topics or partitions or groups out of
// order or repeated, an empty transactional id, trailing bytes.
func DecodeRecord(b []byte) (*StateRecord, error) {
	r := kbin.Reader{Src: b}
	frame := r.Uvarint()
	key := r.Uvarint()
	version := r.Uvarint()
	if err := r.Complete(); err != nil {
		return nil, fmt.Errorf("%w: truncated record header", ErrBadRecord)
	}
	if frame != recordFrameVersion {
		return nil, fmt.Errorf("%w: frame version %d, want %d", ErrBadRecord, frame, recordFrameVersion)
	}
	if key != uint32(KeyTxnState) {
		return nil, fmt.Errorf("%w: unknown record key %d", ErrBadRecord, key)
	}
	if version != 0 {
		return nil, fmt.Errorf("%w: record %d version %d is not supported", ErrBadRecord, key, version)
	}
	rec := new(StateRecord)
	if err := rec.readFields(&r); err != nil {
		return nil, fmt.Errorf("%w: record %d: %v", ErrBadRecord, key, err)
	}
	if len(r.Src) != 0 {
		return nil, fmt.Errorf("%w: record %d has %d trailing bytes", ErrBadRecord, key, len(r.Src))
	}
	return rec, nil
}

var errTruncated = errors.New("truncated")

func (rec *StateRecord) readFields(r *kbin.Reader) error {
	var err error
	if rec.TransactionalID, err = readString(r); err != nil {
		return err
	}
	if rec.TransactionalID == "" {
		return errors.New("empty transactional id")
	}
	rec.ProducerID = r.Int64()
	rec.ProducerEpoch = r.Int16()
	rec.LastProducerID = r.Int64()
	rec.LastProducerEpoch = r.Int16()
	rec.TimeoutMs = r.Int32()
	rec.State = State(r.Int8())
	rec.StartTimestamp = r.Int64()
	rec.UpdateTimestamp = r.Int64()
	if !r.Ok() {
		return errTruncated
	}
	if rec.State < Empty || rec.State > Dead {
		return fmt.Errorf("state %d out of range", rec.State)
	}
	if rec.ProducerID < 0 {
		return fmt.Errorf("producer id %d", rec.ProducerID)
	}
	n, err := readArrayLen(r, 18)
	if err != nil {
		return err
	}
	rec.Topics = make([]Topic, 0, n)
	for i := range n {
		t := Topic{TopicID: r.Uuid()}
		if t.Name, err = readString(r); err != nil {
			return err
		}
		if i > 0 && string(rec.Topics[i-1].TopicID[:]) >= string(t.TopicID[:]) {
			return errors.New("topics out of order")
		}
		np, err := readArrayLen(r, 4)
		if err != nil {
			return err
		}
		t.Partitions = make([]int32, np)
		for j := range np {
			t.Partitions[j] = r.Int32()
			if j > 0 && t.Partitions[j] <= t.Partitions[j-1] || t.Partitions[j] < 0 {
				return errors.New("partitions out of order")
			}
		}
		kmsg.SkipTags(r)
		if !r.Ok() {
			return errTruncated
		}
		rec.Topics = append(rec.Topics, t)
	}
	ng, err := readArrayLen(r, 1)
	if err != nil {
		return err
	}
	rec.Groups = make([]string, ng)
	for i := range ng {
		if rec.Groups[i], err = readString(r); err != nil {
			return err
		}
		if i > 0 && rec.Groups[i] <= rec.Groups[i-1] {
			return errors.New("groups out of order")
		}
	}
	rec.Seq, rec.CoordinatorEpoch = 0, -1
	err = tagged.Each(r, func(tag uint32, v []byte) error {
		switch tag {
		case 0:
			if len(v) != 8 {
				return fmt.Errorf("tagged field Seq of %d bytes", len(v))
			}
			if rec.Seq = int64(binary.BigEndian.Uint64(v)); rec.Seq < 0 {
				return fmt.Errorf("transaction seq %d", rec.Seq)
			}
		case 1:
			if len(v) != 4 {
				return fmt.Errorf("tagged field CoordinatorEpoch of %d bytes", len(v))
			}
			if rec.CoordinatorEpoch = int32(binary.BigEndian.Uint32(v)); rec.CoordinatorEpoch < -1 {
				return fmt.Errorf("coordinator epoch %d", rec.CoordinatorEpoch)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !r.Ok() {
		return errTruncated
	}
	return nil
}

func readString(r *kbin.Reader) (string, error) {
	n := r.Uvarint()
	if !r.Ok() {
		return "", errTruncated
	}
	if n == 0 {
		return "", errors.New("null string")
	}
	b := r.Span(int(n - 1))
	if !r.Ok() {
		return "", errTruncated
	}
	return string(b), nil
}

// readArrayLen reads a compact array length, refusing a null array and
// one whose elements (at least minSize bytes each) the rest could not hold.
func readArrayLen(r *kbin.Reader, minSize int) (int, error) {
	n := r.Uvarint()
	if !r.Ok() {
		return 0, errTruncated
	}
	if n == 0 {
		return 0, errors.New("null array")
	}
	if int(n-1) > len(r.Src)/max(minSize, 1) {
		return 0, fmt.Errorf("array of %d elements in %d bytes", n-1, len(r.Src))
	}
	return int(n - 1), nil
}
