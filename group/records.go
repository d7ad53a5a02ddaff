package group

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/tagged"
)

// Record keys of the group coordinator's metadata-log records
// (docs/format/metadata-records.md §107 … §110). Keys 100–106 belong to the
// partition coordinator; these share its log, frame and encoding.
const (
	KeyOffsetCommit    int16 = 107
	KeyOffsetsDeleted  int16 = 108
	KeyGroupDeleted    int16 = 109
	KeyTxnOffsetsEnded int16 = 110
	// KeyTopicOffsetsDeleted is record 113: keys 111 and 112 are the
	// partition coordinator's.
	KeyTopicOffsetsDeleted int16 = 113
)

const recordFrameVersion = 1 // KRaft's metadata record frame version

// ErrBadRecord is returned (wrapped) by DecodeRecord and DecodeSnapshot for
// bytes that are not a well-formed record or snapshot section.
var ErrBadRecord = errors.New("group: malformed record")

// IsRecordKey reports whether key is one of this package's record keys
// (107 … 110, 113), so a log reader can hand the body to DecodeRecord.
func IsRecordKey(key int16) bool {
	return key >= KeyOffsetCommit && key <= KeyTxnOffsetsEnded || key == KeyTopicOffsetsDeleted
}

// Record is one of the group coordinator's metadata-log records:
// *OffsetCommitRecord, *OffsetsDeletedRecord, *GroupDeletedRecord,
// *TxnOffsetsEndedRecord or *TopicOffsetsDeletedRecord.
type Record interface {
	Key() int16
	appendFields(dst []byte) []byte
	readFields(r *kbin.Reader) error
}

// OffsetCommitRecord is record 107 DisklessOffsetCommitRecord: the offsets
// one OffsetCommit (or TxnOffsetCommit, ProducerID ≥ 0) request committed
// for one group, all at one commit time.
type OffsetCommitRecord struct {
	Group string
	// CommitTimestamp is the coordinator's time of the commit, ms since the
	// epoch (Kafka's commit timestamp; OffsetCommit v1's client timestamp is
	// not used, as in Kafka 4.x).
	CommitTimestamp int64
	// ProducerID is −1 for a plain commit; ≥ 0 for a transactional commit,
	// pending until record 110 ends the producer's transaction (issue 15).
	ProducerID    int64
	ProducerEpoch int16
	// TxnSeq is tagged field 0, an int64 written only when not 0: the
	// token of the producer's transaction the offsets belong to
	// (txn.StateRecord.Seq, answered by TxnOffsetCommit's check), which a
	// record 110 must match to end them (Offsets.Apply). 0: not known (a
	// record written before the token, or a plain commit).
	TxnSeq int64
	Topics []CommitTopic
}

// CommitTopic is one topic of record 107.
type CommitTopic struct {
	Name string
	// TopicID is the topic's id when the commit named it (OffsetCommit
	// v10+), else all zero.
	TopicID    [16]byte
	Partitions []CommitPartition
}

// CommitPartition is one committed offset of record 107.
type CommitPartition struct {
	Partition   int32
	Offset      int64
	LeaderEpoch int32 // −1: none
	Metadata    string
	// ExpireTimestamp is ms since the epoch when the commit carried a
	// retention time (OffsetCommit v2–v4), else −1: the offset then expires
	// by offsets.retention.minutes (KIP-211).
	ExpireTimestamp int64
}

// OffsetsDeletedRecord is record 108 DisklessOffsetsDeletedRecord: committed
// (and pending transactional) offsets removed by OffsetDelete or by expiry.
type OffsetsDeletedRecord struct {
	Group  string
	Topics []DeletedTopic
}

// DeletedTopic is one topic of record 108.
type DeletedTopic struct {
	Name       string
	Partitions []int32
}

// GroupDeletedRecord is record 109 DisklessGroupDeletedRecord: every offset
// of the group, committed and pending, removed (DeleteGroups, or expiry of
// the group's last offset).
type GroupDeletedRecord struct {
	Group string
}

// TxnOffsetsEndedRecord is record 110 DisklessTxnOffsetsEndedRecord: the
// transaction of ProducerID ended; its pending offsets in every group of
// the shard become committed (Committed) or are dropped (the transaction
// coordinator writes it when it completes a transaction, DESIGN
// §Transactions) — unless they belong to a later transaction of the
// producer (TxnSeq, Offsets.Apply).
type TxnOffsetsEndedRecord struct {
	ProducerID    int64
	ProducerEpoch int16
	Committed     bool
	// TxnSeq is tagged field 0, an int64 written only when not 0: the
	// token of the transaction that ended (txn.StateRecord.Seq). 0: not
	// known (a record written before the token): it ends the producer's
	// pending offsets whatever their token.
	TxnSeq int64
	// Timestamp is tagged field 1, an int64 written only when not 0: the
	// group's shard's time when it wrote the record, ms since the epoch.
	// The shard remembers TxnSeq for the producer from then on for
	// producer.id.expiration.ms (the offsets' guard, Offsets.Apply). 0:
	// not known (a record written before it): nothing is remembered.
	Timestamp int64
}

// TopicOffsetsDeletedRecord is record 113 DisklessTopicOffsetsDeletedRecord:
// every consumer group's offsets of a topic, committed and pending,
// removed from the shard because the topic was deleted (Kafka's group
// coordinator drops them when a topic is deleted, SPEC §6). One record per
// shard that holds any, whatever the number of groups: applying it costs
// O(the groups holding offsets of the topic), through the table's index by
// topic.
type TopicOffsetsDeletedRecord struct {
	// TopicName is the deleted topic's name, the key offsets are held
	// under.
	TopicName string
	// TopicID is the deleted topic's id, or all zero when the offsets were
	// found left over by the purge pass, which no longer knows it; it is
	// informational (apply goes by name).
	TopicID [16]byte
}

func (*OffsetCommitRecord) Key() int16        { return KeyOffsetCommit }
func (*OffsetsDeletedRecord) Key() int16      { return KeyOffsetsDeleted }
func (*GroupDeletedRecord) Key() int16        { return KeyGroupDeleted }
func (*TxnOffsetsEndedRecord) Key() int16     { return KeyTxnOffsetsEnded }
func (*TopicOffsetsDeletedRecord) Key() int16 { return KeyTopicOffsetsDeleted }

// AppendRecord appends rec's record body — uvarint frame version 1, uvarint
// key, uvarint version 0, then the fields in Kafka's flexible-version
// encoding — to dst, the same body layout as records 100–106.
func AppendRecord(dst []byte, rec Record) []byte {
	dst = kbin.AppendUvarint(dst, recordFrameVersion)
	dst = kbin.AppendUvarint(dst, uint32(rec.Key()))
	dst = kbin.AppendUvarint(dst, 0)
	return rec.appendFields(dst)
}

// DecodeRecord decodes one record body written by AppendRecord. The result
// does not alias b. Errors wrap ErrBadRecord: a truncated body, an unknown
// key or version, a null string or array, trailing bytes.
func DecodeRecord(b []byte) (Record, error) {
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
	var rec Record
	switch key {
	case uint32(KeyOffsetCommit):
		rec = new(OffsetCommitRecord)
	case uint32(KeyOffsetsDeleted):
		rec = new(OffsetsDeletedRecord)
	case uint32(KeyGroupDeleted):
		rec = new(GroupDeletedRecord)
	case uint32(KeyTxnOffsetsEnded):
		rec = new(TxnOffsetsEndedRecord)
	case uint32(KeyTopicOffsetsDeleted):
		rec = new(TopicOffsetsDeletedRecord)
	default:
		return nil, fmt.Errorf("%w: unknown record key %d", ErrBadRecord, key)
	}
	if version != 0 {
		return nil, fmt.Errorf("%w: record %d version %d is not supported", ErrBadRecord, key, version)
	}
	if err := rec.readFields(&r); err != nil {
		return nil, fmt.Errorf("%w: record %d: %v", ErrBadRecord, key, err)
	}
	if len(r.Src) != 0 {
		return nil, fmt.Errorf("%w: record %d has %d trailing bytes", ErrBadRecord, key, len(r.Src))
	}
	return rec, nil
}

// Encoding helpers. Writers emit no tagged fields but the token of
// records 107 and 110 and record 110's time (appendInt64Tags); readers
// skip the tags they do not know.

var errTruncated = errors.New("truncated")

// appendSeqTag appends a tagged-field section holding seq under tag 0
// (size 8) when seq is not 0, else an empty one.
func appendSeqTag(dst []byte, seq int64) []byte { return appendInt64Tags(dst, seq) }

// appendInt64Tags appends a tagged-field section holding vals[i] under
// tag i (size 8, big-endian) for each vals[i] that is not 0.
func appendInt64Tags(dst []byte, vals ...int64) []byte {
	var buf [2 * 8]byte // the values of the records' two tags at most
	var fs [2]tagged.Field
	b, fields := buf[:0], fs[:0]
	for i, v := range vals {
		if v != 0 {
			b = kbin.AppendInt64(b, v)
			fields = append(fields, tagged.Field{Tag: uint32(i), Value: b[len(b)-8:]})
		}
	}
	return tagged.Append(dst, fields...)
}

// readSeqTag reads a tagged-field section appendSeqTag wrote and returns
// tag 0's int64 (0 when absent); other tags are skipped. A tag 0 of
// another size than 8 is an error.
func readSeqTag(r *kbin.Reader) (int64, error) {
	var seq int64
	err := readInt64Tags(r, []string{"TxnSeq"}, &seq)
	return seq, err
}

// readInt64Tags reads a tagged-field section appendInt64Tags wrote into
// dst[i] (left as they are when absent), tag i being named names[i];
// other tags are skipped. A tag of another size than 8 is an error.
func readInt64Tags(r *kbin.Reader, names []string, dst ...*int64) error {
	err := tagged.Each(r, func(tag uint32, v []byte) error {
		if int(tag) >= len(dst) {
			return nil
		}
		if len(v) != 8 {
			return fmt.Errorf("tagged field %d (%s) of %d bytes, want 8", tag, names[tag], len(v))
		}
		*dst[tag] = int64(binary.BigEndian.Uint64(v))
		return nil
	})
	if err != nil {
		return err
	}
	return okOrTruncated(r)
}

func readString(r *kbin.Reader) (string, error) {
	n := r.Uvarint()
	if !r.Ok() {
		return "", errTruncated
	}
	if n == 0 {
		return "", errors.New("null string")
	}
	s := r.Span(int(n - 1))
	if !r.Ok() {
		return "", errTruncated
	}
	return string(s), nil
}

// readArrayLen reads a non-null compact array length, bounded by the bytes
// left (every element takes at least minElem bytes).
func readArrayLen(r *kbin.Reader, minElem int) (int, error) {
	n := r.Uvarint()
	if !r.Ok() {
		return 0, errTruncated
	}
	if n == 0 {
		return 0, errors.New("null array")
	}
	l := int(n - 1)
	if l < 0 || l > len(r.Src)/minElem {
		return 0, errTruncated
	}
	return l, nil
}

func okOrTruncated(r *kbin.Reader) error {
	if !r.Ok() {
		return errTruncated
	}
	return nil
}

// 107

const (
	commitPartitionMinSize = 4 + 8 + 4 + 1 + 8 + 1
	commitTopicMinSize     = 1 + 16 + 1 + 1
)

func (v *OffsetCommitRecord) appendFields(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, v.Group)
	dst = kbin.AppendInt64(dst, v.CommitTimestamp)
	dst = kbin.AppendInt64(dst, v.ProducerID)
	dst = kbin.AppendInt16(dst, v.ProducerEpoch)
	dst = kbin.AppendCompactArrayLen(dst, len(v.Topics))
	for i := range v.Topics {
		t := &v.Topics[i]
		dst = kbin.AppendCompactString(dst, t.Name)
		dst = kbin.AppendUuid(dst, t.TopicID)
		dst = kbin.AppendCompactArrayLen(dst, len(t.Partitions))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			dst = kbin.AppendInt32(dst, p.Partition)
			dst = kbin.AppendInt64(dst, p.Offset)
			dst = kbin.AppendInt32(dst, p.LeaderEpoch)
			dst = kbin.AppendCompactString(dst, p.Metadata)
			dst = kbin.AppendInt64(dst, p.ExpireTimestamp)
			dst = tagged.AppendNone(dst)
		}
		dst = tagged.AppendNone(dst)
	}
	return appendSeqTag(dst, v.TxnSeq)
}

func (v *OffsetCommitRecord) readFields(r *kbin.Reader) (err error) {
	if v.Group, err = readString(r); err != nil {
		return err
	}
	v.CommitTimestamp = r.Int64()
	v.ProducerID = r.Int64()
	v.ProducerEpoch = r.Int16()
	n, err := readArrayLen(r, commitTopicMinSize)
	if err != nil {
		return err
	}
	v.Topics = make([]CommitTopic, n)
	for i := range v.Topics {
		t := &v.Topics[i]
		if t.Name, err = readString(r); err != nil {
			return err
		}
		t.TopicID = r.Uuid()
		np, err := readArrayLen(r, commitPartitionMinSize)
		if err != nil {
			return err
		}
		t.Partitions = make([]CommitPartition, np)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.Partition = r.Int32()
			p.Offset = r.Int64()
			p.LeaderEpoch = r.Int32()
			if p.Metadata, err = readString(r); err != nil {
				return err
			}
			p.ExpireTimestamp = r.Int64()
			kmsg.SkipTags(r)
		}
		kmsg.SkipTags(r)
	}
	if v.TxnSeq, err = readSeqTag(r); err != nil {
		return err
	}
	return v.validate()
}

// validate checks what apply relies on.
func (v *OffsetCommitRecord) validate() error {
	if v.Group == "" {
		return errors.New("empty group id")
	}
	if v.ProducerID < -1 {
		return fmt.Errorf("producer id %d", v.ProducerID)
	}
	if v.TxnSeq != 0 && v.ProducerID < 0 {
		return fmt.Errorf("transaction token %d on a commit without a producer", v.TxnSeq)
	}
	if v.TxnSeq < 0 {
		return fmt.Errorf("transaction token %d", v.TxnSeq)
	}
	for i := range v.Topics {
		t := &v.Topics[i]
		if t.Name == "" {
			return errors.New("empty topic name")
		}
		for j := range t.Partitions {
			if t.Partitions[j].Partition < 0 {
				return fmt.Errorf("topic %q partition %d", t.Name, t.Partitions[j].Partition)
			}
		}
	}
	return nil
}

// 108

func (v *OffsetsDeletedRecord) appendFields(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, v.Group)
	dst = kbin.AppendCompactArrayLen(dst, len(v.Topics))
	for i := range v.Topics {
		t := &v.Topics[i]
		dst = kbin.AppendCompactString(dst, t.Name)
		dst = kbin.AppendCompactArrayLen(dst, len(t.Partitions))
		for _, p := range t.Partitions {
			dst = kbin.AppendInt32(dst, p)
		}
		dst = tagged.AppendNone(dst)
	}
	return tagged.AppendNone(dst)
}

func (v *OffsetsDeletedRecord) readFields(r *kbin.Reader) (err error) {
	if v.Group, err = readString(r); err != nil {
		return err
	}
	if v.Group == "" {
		return errors.New("empty group id")
	}
	n, err := readArrayLen(r, 3)
	if err != nil {
		return err
	}
	v.Topics = make([]DeletedTopic, n)
	for i := range v.Topics {
		t := &v.Topics[i]
		if t.Name, err = readString(r); err != nil {
			return err
		}
		np, err := readArrayLen(r, 4)
		if err != nil {
			return err
		}
		t.Partitions = make([]int32, np)
		for j := range t.Partitions {
			t.Partitions[j] = r.Int32()
		}
		kmsg.SkipTags(r)
	}
	kmsg.SkipTags(r)
	return okOrTruncated(r)
}

// 109

func (v *GroupDeletedRecord) appendFields(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, v.Group)
	return tagged.AppendNone(dst)
}

func (v *GroupDeletedRecord) readFields(r *kbin.Reader) (err error) {
	if v.Group, err = readString(r); err != nil {
		return err
	}
	if v.Group == "" {
		return errors.New("empty group id")
	}
	kmsg.SkipTags(r)
	return okOrTruncated(r)
}

// 110

func (v *TxnOffsetsEndedRecord) appendFields(dst []byte) []byte {
	dst = kbin.AppendInt64(dst, v.ProducerID)
	dst = kbin.AppendInt16(dst, v.ProducerEpoch)
	dst = kbin.AppendBool(dst, v.Committed)
	return appendInt64Tags(dst, v.TxnSeq, v.Timestamp)
}

func (v *TxnOffsetsEndedRecord) readFields(r *kbin.Reader) (err error) {
	v.ProducerID = r.Int64()
	v.ProducerEpoch = r.Int16()
	b := r.Int8()
	if err := readInt64Tags(r, []string{"TxnSeq", "Timestamp"}, &v.TxnSeq, &v.Timestamp); err != nil {
		return err
	}
	if v.TxnSeq < 0 {
		return fmt.Errorf("transaction token %d", v.TxnSeq)
	}
	if v.Timestamp < 0 {
		return fmt.Errorf("timestamp %d", v.Timestamp)
	}
	if b != 0 && b != 1 {
		return fmt.Errorf("committed flag %d", b)
	}
	v.Committed = b == 1
	if v.ProducerID < 0 {
		return fmt.Errorf("producer id %d", v.ProducerID)
	}
	return nil
}

// 113

func (v *TopicOffsetsDeletedRecord) appendFields(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, v.TopicName)
	dst = kbin.AppendUuid(dst, v.TopicID)
	return tagged.AppendNone(dst)
}

func (v *TopicOffsetsDeletedRecord) readFields(r *kbin.Reader) (err error) {
	if v.TopicName, err = readString(r); err != nil {
		return err
	}
	if v.TopicName == "" {
		return errors.New("empty topic name")
	}
	v.TopicID = r.Uuid()
	kmsg.SkipTags(r)
	return okOrTruncated(r)
}
