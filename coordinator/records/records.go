// Package records is the codec of the coordinator shards' metadata-log
// records (KIP-1164's DisklessPartitionCreatedRecord … and the project's
// 104–106, 111, 112, 114, 116, 117; SPEC §8, docs/format/metadata-records.md): KRaft's metadata
// record serialisation — uvarint frame version 1, uvarint key, uvarint
// version 0 — then the record's fields in Kafka's flexible-version
// encoding, tagged fields after every struct. Append and Encode write
// bodies, Decode reads one (refusing unknown keys and versions, trailing
// bytes, and array lengths the input cannot hold), and the primitives
// (ReadString, ReadArrayLen; tagged fields through internal/tagged) are
// shared with the snapshot encoding. It knows nothing of shard state (package
// coordinator applies the records) nor of the log that stores the bodies
// (package metalog).
package records

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/tagged"
)

// Record keys of the metadata log (SPEC §8; 104+ are the project's, see
// docs/format/metadata-records.md). 107 and up are the consumer-group
// coordinator's offset records.
const (
	KeyPartitionCreated int16 = 100
	KeyTopicDeleted     int16 = 101
	KeyFileCommitted    int16 = 102
	KeyRecordsDeleted   int16 = 103
	KeyTopicConfig      int16 = 104
	KeyProducerIDBlock  int16 = 105
	KeyFileDeleted      int16 = 106
	// 107 … 110 and 113 are package group's.
	KeyTopicDisablement int16 = 111
	KeyTopicPurged      int16 = 112
	// 113 is the consumer groups' (a topic's offsets deleted).
	KeySegmentCommitted int16 = 114
	// 115 is not used; 118 is package txn's.
	KeyScramCredential int16 = 116
	KeyACL             int16 = 117
)

// frameVersion is the frame version of KRaft's metadata record
// serialisation, which the record body follows.
const frameVersion = 1

// ErrBadRecord is returned (wrapped) by Decode for a body that is not a
// well-formed metadata record.
var ErrBadRecord = errors.New("records: malformed metadata record")

// Record is one metadata log record: one of this package's types.
type Record interface {
	// Key is the record's key (KeyPartitionCreated …).
	Key() int16
	// AppendTo appends the record's fields (without the key prefix).
	AppendTo(dst []byte) []byte
	// ReadFrom decodes the fields; r reports truncation.
	ReadFrom(r *kbin.Reader) error
}

// PartitionCreated is record 100 DisklessPartitionCreatedRecord.
type PartitionCreated struct {
	TopicID   diskless.TopicID
	TopicName string
	Partition int32
}

// TopicDeleted is record 101 DisklessTopicDeletedRecord.
type TopicDeleted struct {
	TopicID diskless.TopicID
}

// FileCommitted is record 102 DisklessFileCommittedRecord.
type FileCommitted struct {
	ObjectKey        string
	ObjectFormat     int8
	FileSize         int64
	UploaderBrokerID int32
	OwnerIDs         []int32
	Topics           []FileTopic
}

type FileTopic struct {
	TopicID    diskless.TopicID
	Partitions []FilePartition
}

type FilePartition struct {
	Partition int32
	Batches   []CommittedBatch
}

// CommittedBatch is one batch of record 102, offsets assigned.
type CommittedBatch struct {
	Magic              int8
	ByteOffset         int32
	ByteSize           int32
	AssignedBaseOffset int64
	AssignedLastOffset int64
	LogAppendTimestamp int64
	BatchMaxTimestamp  int64
	TimestampType      int8
	ProducerID         int64
	ProducerEpoch      int16
	BaseSequence       int32
	LastSequence       int32
	// Txn is tagged field 0, written only when not diskless.TxnNone: what
	// the batch is to transactions (diskless.TxnData, TxnCommit,
	// TxnAbort; SPEC §15).
	Txn int8
	// TxnSeq is tagged field 1, an int64 written only when not 0: the
	// transaction guard's token (diskless.CommitBatch.TxnSeq).
	TxnSeq int64
	// CoordinatorEpoch is tagged field 2, an int32 written for a marker
	// (Txn TxnCommit or TxnAbort) only: the coordinator epoch of its
	// control record (diskless.CommitBatch.CoordinatorEpoch). A marker
	// without it (written before it was kept) reads as −1; other batches
	// read as 0.
	CoordinatorEpoch int32
}

// RecordsDeleted is record 103 DisklessRecordsDeletedRecord.
type RecordsDeleted struct {
	TopicID           diskless.TopicID
	Partition         int32
	NewLogStartOffset int64
}

// TopicConfig is record 104 DisklessTopicConfigRecord, the catalog
// entry of a topic (shard 0).
type TopicConfig struct {
	TopicID       diskless.TopicID
	TopicName     string
	NumPartitions int32
	Configs       []TopicConfigEntry
}

type TopicConfigEntry struct {
	Name, Value string
}

// ProducerIDBlock is record 105 DisklessProducerIdBlockRecord
// (shard 0).
type ProducerIDBlock struct {
	NodeID          int32
	FirstProducerID int64
	BlockSize       int32
}

// FileDeleted is record 106 DisklessFileDeletedRecord: the shard
// closes its reference to an object it had released (no live batch left
// in it). Either this shard deleted the object from the object store
// (DeleterShard is this shard) or it leaves the deletion to DeleterShard,
// a lower owner that also committed the object.
type FileDeleted struct {
	ObjectKey    string
	DeleterShard int32
}

// TopicDisablement is record 111 DisklessTopicDisablementRecord: a
// topic's diskless state (SPEC §10), on shard 0. State is one of
// diskless.TopicEnabled, TopicDisabling, TopicDisabled; Policy one of
// diskless.DisableRetain, DisableDelete.
type TopicDisablement struct {
	TopicID diskless.TopicID
	State   int8
	Epoch   int32
	Policy  int8
}

// TopicPurged is record 112 DisklessTopicPurgedRecord: the shard's
// deleted partitions of the topic, all empty, leave its state.
type TopicPurged struct {
	TopicID diskless.TopicID
}

// SegmentCommitted is record 114 DisklessSegmentCommittedRecord: a segment
// object (docs/format/segment-object.md) replaces the partition's first
// ReplacedRuns WAL runs, which hold exactly offsets [BaseOffset,
// LastOffset] and DataSize bytes — the consolidation of old WAL runs
// (DESIGN §Consolidation).
type SegmentCommitted struct {
	ObjectKey    string
	ObjectFormat int8
	FileSize     int64
	TopicID      diskless.TopicID
	Partition    int32
	BaseOffset   int64
	LastOffset   int64
	DataSize     int32
	IndexEntries int32
	// MaxTimestamp is the largest maxTimestamp of the segment's batches,
	// AppendTime the latest log-append time of them, ms.
	MaxTimestamp  int64
	AppendTime    int64
	TimestampType int8
	// ReplacedRuns is how many WAL runs the segment replaces.
	ReplacedRuns int32
	// CommitTimestamp is the shard's log time of the swap, ms: the time
	// the file table keeps for the object.
	CommitTimestamp int64
}

// ScramCredential is record 116 DisklessScramCredentialRecord: one
// user's credential of one SCRAM mechanism (SPEC §14, SCRAM), set or —
// with Iterations 0 and the byte fields empty — removed, on shard 0.
// Mechanism is diskless.ScramSHA256 or ScramSHA512.
type ScramCredential struct {
	Name       string
	Mechanism  int8
	Iterations int32
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
}

// ACL is record 117 DisklessAclRecord: one access control entry (SPEC
// §14, ACLs), added or — with Removed — removed, on shard 0. The codes
// are Kafka's (AclResourceType, PatternType, AclOperation,
// AclPermissionType); package coordinator checks them.
type ACL struct {
	ResourceType   int8
	ResourceName   string
	PatternType    int8
	Principal      string
	Host           string
	Operation      int8
	PermissionType int8
	Removed        bool
}

func (*PartitionCreated) Key() int16 { return KeyPartitionCreated }
func (*TopicDeleted) Key() int16     { return KeyTopicDeleted }
func (*FileCommitted) Key() int16    { return KeyFileCommitted }
func (*RecordsDeleted) Key() int16   { return KeyRecordsDeleted }
func (*TopicConfig) Key() int16      { return KeyTopicConfig }
func (*ProducerIDBlock) Key() int16  { return KeyProducerIDBlock }
func (*FileDeleted) Key() int16      { return KeyFileDeleted }
func (*TopicDisablement) Key() int16 { return KeyTopicDisablement }
func (*TopicPurged) Key() int16      { return KeyTopicPurged }
func (*SegmentCommitted) Key() int16 { return KeySegmentCommitted }
func (*ScramCredential) Key() int16  { return KeyScramCredential }
func (*ACL) Key() int16              { return KeyACL }

// Append appends rec's body: frame version, key and version as
// uvarints, then the fields in flexible-version encoding.
func Append(dst []byte, rec Record) []byte {
	dst = kbin.AppendUvarint(dst, frameVersion)
	dst = kbin.AppendUvarint(dst, uint32(rec.Key()))
	dst = kbin.AppendUvarint(dst, 0) // version
	return rec.AppendTo(dst)
}

// Encode returns the bodies of recs, encoded into one buffer sized
// up front (record 102 of a large file is tens of KiB: growing a buffer
// from empty copies it a dozen times).
func Encode(recs []Record) [][]byte {
	size := 0
	for _, rec := range recs {
		size += sizeBound(rec)
	}
	buf := make([]byte, 0, size)
	bodies := make([][]byte, len(recs))
	for i, rec := range recs {
		start := len(buf)
		buf = Append(buf, rec)
		bodies[i] = buf[start:len(buf):len(buf)]
	}
	return bodies
}

// sizeBound returns a size that rec's body usually fits in: exact
// bounds for record 102, a guess for the small ones (a body that does not
// fit only costs a regrowth).
func sizeBound(rec Record) int {
	const uvarint = 5 // the longest uvarint of a uint32
	r, ok := rec.(*FileCommitted)
	if !ok {
		return 64
	}
	n := 3*uvarint + uvarint + len(r.ObjectKey) + 1 + 8 + 4 + uvarint + 4*len(r.OwnerIDs) + uvarint + 1
	for i := range r.Topics {
		t := &r.Topics[i]
		n += 16 + uvarint + 1
		for j := range t.Partitions {
			n += 4 + uvarint + committedBatchMinSize*len(t.Partitions[j].Batches) + 1
		}
	}
	return n
}

// Decode decodes one record body. Strings are copied: the result does
// not alias b. Errors wrap ErrBadRecord.
func Decode(b []byte) (Record, error) {
	r := kbin.Reader{Src: b}
	frame := r.Uvarint()
	key := r.Uvarint()
	version := r.Uvarint()
	if err := r.Complete(); err != nil {
		return nil, fmt.Errorf("%w: truncated record header", ErrBadRecord)
	}
	if frame != frameVersion {
		return nil, fmt.Errorf("%w: frame version %d, want %d", ErrBadRecord, frame, frameVersion)
	}
	var rec Record
	switch key {
	case uint32(KeyPartitionCreated):
		rec = new(PartitionCreated)
	case uint32(KeyTopicDeleted):
		rec = new(TopicDeleted)
	case uint32(KeyFileCommitted):
		rec = new(FileCommitted)
	case uint32(KeyRecordsDeleted):
		rec = new(RecordsDeleted)
	case uint32(KeyTopicConfig):
		rec = new(TopicConfig)
	case uint32(KeyProducerIDBlock):
		rec = new(ProducerIDBlock)
	case uint32(KeyFileDeleted):
		rec = new(FileDeleted)
	case uint32(KeyTopicDisablement):
		rec = new(TopicDisablement)
	case uint32(KeyTopicPurged):
		rec = new(TopicPurged)
	case uint32(KeySegmentCommitted):
		rec = new(SegmentCommitted)
	case uint32(KeyScramCredential):
		rec = new(ScramCredential)
	case uint32(KeyACL):
		rec = new(ACL)
	default:
		return nil, fmt.Errorf("%w: unknown record key %d", ErrBadRecord, key)
	}
	if version != 0 {
		return nil, fmt.Errorf("%w: record %d version %d is not supported", ErrBadRecord, key, version)
	}
	if err := rec.ReadFrom(&r); err != nil {
		return nil, fmt.Errorf("%w: record %d: %v", ErrBadRecord, key, err)
	}
	if err := r.Complete(); err != nil {
		return nil, fmt.Errorf("%w: record %d truncated", ErrBadRecord, key)
	}
	if len(r.Src) != 0 {
		return nil, fmt.Errorf("%w: record %d has %d trailing bytes", ErrBadRecord, key, len(r.Src))
	}
	return rec, nil
}

// The flexible-version primitives below are the encoding's, shared with
// the snapshot encoding (package coordinator) so that both read strings,
// arrays and tagged fields alike. Writers emit tagged fields only where a
// record's or snapshot's format names them (record 102's Txn and TxnSeq,
// docs/format/metadata-records.md).

// ReadString reads a non-null compact string (uvarint length + 1, then
// the bytes), copied. Errors: ErrTruncated; a null string.
func ReadString(r *kbin.Reader) (string, error) {
	n := r.Uvarint()
	if !r.Ok() {
		return "", ErrTruncated
	}
	if n == 0 {
		return "", errors.New("null string")
	}
	s := r.Span(int(n - 1))
	if !r.Ok() {
		return "", ErrTruncated
	}
	return string(s), nil
}

// ReadBytes reads non-null compact bytes (uvarint length + 1, then the
// bytes), copied; empty bytes read as nil. Errors: ErrTruncated; null
// bytes.
func ReadBytes(r *kbin.Reader) ([]byte, error) {
	n := r.Uvarint()
	if !r.Ok() {
		return nil, ErrTruncated
	}
	if n == 0 {
		return nil, errors.New("null bytes")
	}
	b := r.Span(int(n - 1))
	if !r.Ok() {
		return nil, ErrTruncated
	}
	if len(b) == 0 {
		return nil, nil
	}
	return append([]byte{}, b...), nil
}

// ReadArrayLen reads a non-null compact array length, bounded by the bytes
// left (every element takes at least minElem bytes), so that a length
// read from damaged bytes cannot make the caller allocate more than the
// input could hold. Errors: ErrTruncated (also for a length above that
// bound); a null array.
func ReadArrayLen(r *kbin.Reader, minElem int) (int, error) {
	n := r.Uvarint()
	if !r.Ok() {
		return 0, ErrTruncated
	}
	if n == 0 {
		return 0, errors.New("null array")
	}
	l := int(n - 1)
	if l*minElem > len(r.Src) {
		return 0, ErrTruncated
	}
	return l, nil
}

// ErrTruncated is returned by the primitives when the bytes end early.
var ErrTruncated = errors.New("truncated")

// OKOrTruncated returns ErrTruncated if r ran out of bytes, else nil.
func OKOrTruncated(r *kbin.Reader) error {
	if !r.Ok() {
		return ErrTruncated
	}
	return nil
}

// 100

func (v *PartitionCreated) AppendTo(dst []byte) []byte {
	dst = kbin.AppendUuid(dst, v.TopicID)
	dst = kbin.AppendCompactString(dst, v.TopicName)
	dst = kbin.AppendInt32(dst, v.Partition)
	return tagged.AppendNone(dst)
}

func (v *PartitionCreated) ReadFrom(r *kbin.Reader) (err error) {
	v.TopicID = r.Uuid()
	if v.TopicName, err = ReadString(r); err != nil {
		return err
	}
	v.Partition = r.Int32()
	kmsg.SkipTags(r)
	return OKOrTruncated(r)
}

// 101

func (v *TopicDeleted) AppendTo(dst []byte) []byte {
	dst = kbin.AppendUuid(dst, v.TopicID)
	return tagged.AppendNone(dst)
}

func (v *TopicDeleted) ReadFrom(r *kbin.Reader) error {
	v.TopicID = r.Uuid()
	kmsg.SkipTags(r)
	return OKOrTruncated(r)
}

// 102

// committedBatchMinSize is the smallest encoding of a CommittedBatch, used
// to bound array lengths before allocating.
const committedBatchMinSize = 1 + 4 + 4 + 8 + 8 + 8 + 8 + 1 + 8 + 2 + 4 + 4 + 1

func (v *FileCommitted) AppendTo(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, v.ObjectKey)
	dst = kbin.AppendInt8(dst, v.ObjectFormat)
	dst = kbin.AppendInt64(dst, v.FileSize)
	dst = kbin.AppendInt32(dst, v.UploaderBrokerID)
	dst = kbin.AppendCompactArrayLen(dst, len(v.OwnerIDs))
	for _, id := range v.OwnerIDs {
		dst = kbin.AppendInt32(dst, id)
	}
	dst = kbin.AppendCompactArrayLen(dst, len(v.Topics))
	for i := range v.Topics {
		t := &v.Topics[i]
		dst = kbin.AppendUuid(dst, t.TopicID)
		dst = kbin.AppendCompactArrayLen(dst, len(t.Partitions))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			dst = kbin.AppendInt32(dst, p.Partition)
			dst = kbin.AppendCompactArrayLen(dst, len(p.Batches))
			for k := range p.Batches {
				dst = p.Batches[k].AppendTo(dst)
			}
			dst = tagged.AppendNone(dst)
		}
		dst = tagged.AppendNone(dst)
	}
	return tagged.AppendNone(dst)
}

func (b *CommittedBatch) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt8(dst, b.Magic)
	dst = kbin.AppendInt32(dst, b.ByteOffset)
	dst = kbin.AppendInt32(dst, b.ByteSize)
	dst = kbin.AppendInt64(dst, b.AssignedBaseOffset)
	dst = kbin.AppendInt64(dst, b.AssignedLastOffset)
	dst = kbin.AppendInt64(dst, b.LogAppendTimestamp)
	dst = kbin.AppendInt64(dst, b.BatchMaxTimestamp)
	dst = kbin.AppendInt8(dst, b.TimestampType)
	dst = kbin.AppendInt64(dst, b.ProducerID)
	dst = kbin.AppendInt16(dst, b.ProducerEpoch)
	dst = kbin.AppendInt32(dst, b.BaseSequence)
	dst = kbin.AppendInt32(dst, b.LastSequence)
	return tagged.AppendTxn(dst, b.Txn, b.TxnSeq, b.CoordinatorEpoch)
}

func (v *FileCommitted) ReadFrom(r *kbin.Reader) (err error) {
	if v.ObjectKey, err = ReadString(r); err != nil {
		return err
	}
	v.ObjectFormat = r.Int8()
	v.FileSize = r.Int64()
	v.UploaderBrokerID = r.Int32()
	n, err := ReadArrayLen(r, 4)
	if err != nil {
		return err
	}
	v.OwnerIDs = make([]int32, n)
	for i := range v.OwnerIDs {
		v.OwnerIDs[i] = r.Int32()
	}
	if n, err = ReadArrayLen(r, 16+1+1); err != nil {
		return err
	}
	v.Topics = make([]FileTopic, n)
	for i := range v.Topics {
		t := &v.Topics[i]
		t.TopicID = r.Uuid()
		if n, err = ReadArrayLen(r, 4+1+1); err != nil {
			return err
		}
		t.Partitions = make([]FilePartition, n)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.Partition = r.Int32()
			if n, err = ReadArrayLen(r, committedBatchMinSize); err != nil {
				return err
			}
			p.Batches = make([]CommittedBatch, n)
			for k := range p.Batches {
				if err := p.Batches[k].ReadFrom(r); err != nil {
					return err
				}
			}
			kmsg.SkipTags(r)
			if !r.Ok() {
				return ErrTruncated
			}
		}
		kmsg.SkipTags(r)
		if !r.Ok() {
			return ErrTruncated
		}
	}
	kmsg.SkipTags(r)
	return OKOrTruncated(r)
}

// ReadFrom reads a batch AppendTo wrote, its tagged fields with
// tagged.ReadTxn: a tag 0, 1 or 2 of another size than 1, 8 or 4 bytes is
// an error; tag 2 is read for a marker only (other batches: 0). Any int32
// is a coordinator epoch: a WriteTxnMarkers request's is written as it
// came.
func (b *CommittedBatch) ReadFrom(r *kbin.Reader) error {
	b.Magic = r.Int8()
	b.ByteOffset = r.Int32()
	b.ByteSize = r.Int32()
	b.AssignedBaseOffset = r.Int64()
	b.AssignedLastOffset = r.Int64()
	b.LogAppendTimestamp = r.Int64()
	b.BatchMaxTimestamp = r.Int64()
	b.TimestampType = r.Int8()
	b.ProducerID = r.Int64()
	b.ProducerEpoch = r.Int16()
	b.BaseSequence = r.Int32()
	b.LastSequence = r.Int32()
	var err error
	b.Txn, b.TxnSeq, b.CoordinatorEpoch, err = tagged.ReadTxn(r)
	return err
}

// 103

func (v *RecordsDeleted) AppendTo(dst []byte) []byte {
	dst = kbin.AppendUuid(dst, v.TopicID)
	dst = kbin.AppendInt32(dst, v.Partition)
	dst = kbin.AppendInt64(dst, v.NewLogStartOffset)
	return tagged.AppendNone(dst)
}

func (v *RecordsDeleted) ReadFrom(r *kbin.Reader) error {
	v.TopicID = r.Uuid()
	v.Partition = r.Int32()
	v.NewLogStartOffset = r.Int64()
	kmsg.SkipTags(r)
	return OKOrTruncated(r)
}

// 104

func (v *TopicConfig) AppendTo(dst []byte) []byte {
	dst = kbin.AppendUuid(dst, v.TopicID)
	dst = kbin.AppendCompactString(dst, v.TopicName)
	dst = kbin.AppendInt32(dst, v.NumPartitions)
	dst = kbin.AppendCompactArrayLen(dst, len(v.Configs))
	for _, c := range v.Configs {
		dst = kbin.AppendCompactString(dst, c.Name)
		dst = kbin.AppendCompactString(dst, c.Value)
		dst = tagged.AppendNone(dst)
	}
	return tagged.AppendNone(dst)
}

func (v *TopicConfig) ReadFrom(r *kbin.Reader) (err error) {
	v.TopicID = r.Uuid()
	if v.TopicName, err = ReadString(r); err != nil {
		return err
	}
	v.NumPartitions = r.Int32()
	n, err := ReadArrayLen(r, 3)
	if err != nil {
		return err
	}
	v.Configs = make([]TopicConfigEntry, n)
	for i := range v.Configs {
		c := &v.Configs[i]
		if c.Name, err = ReadString(r); err != nil {
			return err
		}
		if c.Value, err = ReadString(r); err != nil {
			return err
		}
		kmsg.SkipTags(r)
	}
	kmsg.SkipTags(r)
	return OKOrTruncated(r)
}

// 105

func (v *ProducerIDBlock) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.NodeID)
	dst = kbin.AppendInt64(dst, v.FirstProducerID)
	dst = kbin.AppendInt32(dst, v.BlockSize)
	return tagged.AppendNone(dst)
}

func (v *ProducerIDBlock) ReadFrom(r *kbin.Reader) error {
	v.NodeID = r.Int32()
	v.FirstProducerID = r.Int64()
	v.BlockSize = r.Int32()
	kmsg.SkipTags(r)
	return OKOrTruncated(r)
}

// 106

func (v *FileDeleted) AppendTo(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, v.ObjectKey)
	dst = kbin.AppendInt32(dst, v.DeleterShard)
	return tagged.AppendNone(dst)
}

func (v *FileDeleted) ReadFrom(r *kbin.Reader) (err error) {
	if v.ObjectKey, err = ReadString(r); err != nil {
		return err
	}
	v.DeleterShard = r.Int32()
	kmsg.SkipTags(r)
	return OKOrTruncated(r)
}

// 111

func (v *TopicDisablement) AppendTo(dst []byte) []byte {
	dst = kbin.AppendUuid(dst, v.TopicID)
	dst = kbin.AppendInt8(dst, v.State)
	dst = kbin.AppendInt32(dst, v.Epoch)
	dst = kbin.AppendInt8(dst, v.Policy)
	return tagged.AppendNone(dst)
}

func (v *TopicDisablement) ReadFrom(r *kbin.Reader) error {
	v.TopicID = r.Uuid()
	v.State = r.Int8()
	v.Epoch = r.Int32()
	v.Policy = r.Int8()
	kmsg.SkipTags(r)
	return OKOrTruncated(r)
}

// 112

func (v *TopicPurged) AppendTo(dst []byte) []byte {
	dst = kbin.AppendUuid(dst, v.TopicID)
	return tagged.AppendNone(dst)
}

func (v *TopicPurged) ReadFrom(r *kbin.Reader) error {
	v.TopicID = r.Uuid()
	kmsg.SkipTags(r)
	return OKOrTruncated(r)
}

// 114

func (v *SegmentCommitted) AppendTo(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, v.ObjectKey)
	dst = kbin.AppendInt8(dst, v.ObjectFormat)
	dst = kbin.AppendInt64(dst, v.FileSize)
	dst = kbin.AppendUuid(dst, v.TopicID)
	dst = kbin.AppendInt32(dst, v.Partition)
	dst = kbin.AppendInt64(dst, v.BaseOffset)
	dst = kbin.AppendInt64(dst, v.LastOffset)
	dst = kbin.AppendInt32(dst, v.DataSize)
	dst = kbin.AppendInt32(dst, v.IndexEntries)
	dst = kbin.AppendInt64(dst, v.MaxTimestamp)
	dst = kbin.AppendInt64(dst, v.AppendTime)
	dst = kbin.AppendInt8(dst, v.TimestampType)
	dst = kbin.AppendInt32(dst, v.ReplacedRuns)
	dst = kbin.AppendInt64(dst, v.CommitTimestamp)
	return tagged.AppendNone(dst)
}

func (v *SegmentCommitted) ReadFrom(r *kbin.Reader) (err error) {
	if v.ObjectKey, err = ReadString(r); err != nil {
		return err
	}
	v.ObjectFormat = r.Int8()
	v.FileSize = r.Int64()
	v.TopicID = r.Uuid()
	v.Partition = r.Int32()
	v.BaseOffset = r.Int64()
	v.LastOffset = r.Int64()
	v.DataSize = r.Int32()
	v.IndexEntries = r.Int32()
	v.MaxTimestamp = r.Int64()
	v.AppendTime = r.Int64()
	v.TimestampType = r.Int8()
	v.ReplacedRuns = r.Int32()
	v.CommitTimestamp = r.Int64()
	kmsg.SkipTags(r)
	return OKOrTruncated(r)
}

// 116

func (v *ScramCredential) AppendTo(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, v.Name)
	dst = kbin.AppendInt8(dst, v.Mechanism)
	dst = kbin.AppendInt32(dst, v.Iterations)
	dst = kbin.AppendCompactBytes(dst, v.Salt)
	dst = kbin.AppendCompactBytes(dst, v.StoredKey)
	dst = kbin.AppendCompactBytes(dst, v.ServerKey)
	return tagged.AppendNone(dst)
}

func (v *ScramCredential) ReadFrom(r *kbin.Reader) (err error) {
	if v.Name, err = ReadString(r); err != nil {
		return err
	}
	v.Mechanism = r.Int8()
	v.Iterations = r.Int32()
	for _, b := range []*[]byte{&v.Salt, &v.StoredKey, &v.ServerKey} {
		if *b, err = ReadBytes(r); err != nil {
			return err
		}
	}
	kmsg.SkipTags(r)
	return OKOrTruncated(r)
}

// 117

func (v *ACL) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt8(dst, v.ResourceType)
	dst = kbin.AppendCompactString(dst, v.ResourceName)
	dst = kbin.AppendInt8(dst, v.PatternType)
	dst = kbin.AppendCompactString(dst, v.Principal)
	dst = kbin.AppendCompactString(dst, v.Host)
	dst = kbin.AppendInt8(dst, v.Operation)
	dst = kbin.AppendInt8(dst, v.PermissionType)
	dst = kbin.AppendBool(dst, v.Removed)
	return tagged.AppendNone(dst)
}

func (v *ACL) ReadFrom(r *kbin.Reader) (err error) {
	v.ResourceType = r.Int8()
	if v.ResourceName, err = ReadString(r); err != nil {
		return err
	}
	v.PatternType = r.Int8()
	for _, s := range []*string{&v.Principal, &v.Host} {
		if *s, err = ReadString(r); err != nil {
			return err
		}
	}
	v.Operation = r.Int8()
	v.PermissionType = r.Int8()
	v.Removed = r.Bool()
	kmsg.SkipTags(r)
	return OKOrTruncated(r)
}
