package coordinator

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// Record keys of the metadata log (SPEC §8; 104+ are the project's, see
// docs/format/metadata-records.md).
const (
	keyPartitionCreated int16 = 100
	keyTopicDeleted     int16 = 101
	keyFileCommitted    int16 = 102
	keyRecordsDeleted   int16 = 103
	keyTopicConfig      int16 = 104
	keyProducerIDBlock  int16 = 105
	keyFileDeleted      int16 = 106
)

// recordFrameVersion is the frame version of KRaft's metadata record
// serialisation, which the record body follows.
const recordFrameVersion = 1

// errBadRecord is returned (wrapped) by the record decoder for a body that
// is not a well-formed metadata record.
var errBadRecord = errors.New("coordinator: malformed metadata record")

// record is one metadata log record.
type record interface {
	key() int16
	// appendTo appends the record's fields (without the key prefix).
	appendTo(dst []byte) []byte
	// readFrom decodes the fields; r reports truncation.
	readFrom(r *kbin.Reader) error
}

// partitionCreatedRecord is record 100 DisklessPartitionCreatedRecord.
type partitionCreatedRecord struct {
	TopicID   diskless.TopicID
	TopicName string
	Partition int32
}

// topicDeletedRecord is record 101 DisklessTopicDeletedRecord.
type topicDeletedRecord struct {
	TopicID diskless.TopicID
}

// fileCommittedRecord is record 102 DisklessFileCommittedRecord.
type fileCommittedRecord struct {
	ObjectKey        string
	ObjectFormat     int8
	FileSize         int64
	UploaderBrokerID int32
	OwnerIDs         []int32
	Topics           []fileTopic
}

type fileTopic struct {
	TopicID    diskless.TopicID
	Partitions []filePartition
}

type filePartition struct {
	Partition int32
	Batches   []committedBatch
}

// committedBatch is one batch of record 102, offsets assigned.
type committedBatch struct {
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
}

// recordsDeletedRecord is record 103 DisklessRecordsDeletedRecord.
type recordsDeletedRecord struct {
	TopicID           diskless.TopicID
	Partition         int32
	NewLogStartOffset int64
}

// topicConfigRecord is record 104 DisklessTopicConfigRecord, the catalog
// entry of a topic (shard 0).
type topicConfigRecord struct {
	TopicID       diskless.TopicID
	TopicName     string
	NumPartitions int32
	Configs       []topicConfigEntry
}

type topicConfigEntry struct {
	Name, Value string
}

// producerIDBlockRecord is record 105 DisklessProducerIdBlockRecord
// (shard 0).
type producerIDBlockRecord struct {
	NodeID          int32
	FirstProducerID int64
	BlockSize       int32
}

// fileDeletedRecord is record 106 DisklessFileDeletedRecord: the shard
// closes its reference to an object it had released (no live batch left
// in it). Either this shard deleted the object from the object store
// (DeleterShard is this shard) or it leaves the deletion to DeleterShard,
// a lower owner that also committed the object.
type fileDeletedRecord struct {
	ObjectKey    string
	DeleterShard int32
}

func (*partitionCreatedRecord) key() int16 { return keyPartitionCreated }
func (*topicDeletedRecord) key() int16     { return keyTopicDeleted }
func (*fileCommittedRecord) key() int16    { return keyFileCommitted }
func (*recordsDeletedRecord) key() int16   { return keyRecordsDeleted }
func (*topicConfigRecord) key() int16      { return keyTopicConfig }
func (*producerIDBlockRecord) key() int16  { return keyProducerIDBlock }
func (*fileDeletedRecord) key() int16      { return keyFileDeleted }

// appendRecord appends rec's body: frame version, key and version as
// uvarints, then the fields in flexible-version encoding.
func appendRecord(dst []byte, rec record) []byte {
	dst = kbin.AppendUvarint(dst, recordFrameVersion)
	dst = kbin.AppendUvarint(dst, uint32(rec.key()))
	dst = kbin.AppendUvarint(dst, 0) // version
	return rec.appendTo(dst)
}

// encodeRecords returns the bodies of recs, encoded into one buffer sized
// up front (record 102 of a large file is tens of KiB: growing a buffer
// from empty copies it a dozen times).
func encodeRecords(recs []record) [][]byte {
	size := 0
	for _, rec := range recs {
		size += recordSizeBound(rec)
	}
	buf := make([]byte, 0, size)
	bodies := make([][]byte, len(recs))
	for i, rec := range recs {
		start := len(buf)
		buf = appendRecord(buf, rec)
		bodies[i] = buf[start:len(buf):len(buf)]
	}
	return bodies
}

// recordSizeBound returns a size that rec's body usually fits in: exact
// bounds for record 102, a guess for the small ones (a body that does not
// fit only costs a regrowth).
func recordSizeBound(rec record) int {
	const uvarint = 5 // the longest uvarint of a uint32
	r, ok := rec.(*fileCommittedRecord)
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

// decodeRecord decodes one record body. Strings are copied: the result does
// not alias b. Errors wrap errBadRecord.
func decodeRecord(b []byte) (record, error) {
	r := kbin.Reader{Src: b}
	frame := r.Uvarint()
	key := r.Uvarint()
	version := r.Uvarint()
	if err := r.Complete(); err != nil {
		return nil, fmt.Errorf("%w: truncated record header", errBadRecord)
	}
	if frame != recordFrameVersion {
		return nil, fmt.Errorf("%w: frame version %d, want %d", errBadRecord, frame, recordFrameVersion)
	}
	var rec record
	switch key {
	case uint32(keyPartitionCreated):
		rec = new(partitionCreatedRecord)
	case uint32(keyTopicDeleted):
		rec = new(topicDeletedRecord)
	case uint32(keyFileCommitted):
		rec = new(fileCommittedRecord)
	case uint32(keyRecordsDeleted):
		rec = new(recordsDeletedRecord)
	case uint32(keyTopicConfig):
		rec = new(topicConfigRecord)
	case uint32(keyProducerIDBlock):
		rec = new(producerIDBlockRecord)
	case uint32(keyFileDeleted):
		rec = new(fileDeletedRecord)
	default:
		return nil, fmt.Errorf("%w: unknown record key %d", errBadRecord, key)
	}
	if version != 0 {
		return nil, fmt.Errorf("%w: record %d version %d is not supported", errBadRecord, key, version)
	}
	if err := rec.readFrom(&r); err != nil {
		return nil, fmt.Errorf("%w: record %d: %v", errBadRecord, key, err)
	}
	if err := r.Complete(); err != nil {
		return nil, fmt.Errorf("%w: record %d truncated", errBadRecord, key)
	}
	if len(r.Src) != 0 {
		return nil, fmt.Errorf("%w: record %d has %d trailing bytes", errBadRecord, key, len(r.Src))
	}
	return rec, nil
}

// Encoding helpers. Writers emit no tagged fields.

func appendTags(dst []byte) []byte { return kbin.AppendUvarint(dst, 0) }

// skipTags skips a tagged-field section.
func skipTags(r *kbin.Reader) {
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		r.Uvarint() // tag
		size := r.Uvarint()
		r.Span(int(size))
	}
}

// readString reads a non-null compact string.
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
	if l*minElem > len(r.Src) {
		return 0, errTruncated
	}
	return l, nil
}

var errTruncated = errors.New("truncated")

func okOrTruncated(r *kbin.Reader) error {
	if !r.Ok() {
		return errTruncated
	}
	return nil
}

// 100

func (v *partitionCreatedRecord) appendTo(dst []byte) []byte {
	dst = kbin.AppendUuid(dst, v.TopicID)
	dst = kbin.AppendCompactString(dst, v.TopicName)
	dst = kbin.AppendInt32(dst, v.Partition)
	return appendTags(dst)
}

func (v *partitionCreatedRecord) readFrom(r *kbin.Reader) (err error) {
	v.TopicID = r.Uuid()
	if v.TopicName, err = readString(r); err != nil {
		return err
	}
	v.Partition = r.Int32()
	skipTags(r)
	return okOrTruncated(r)
}

// 101

func (v *topicDeletedRecord) appendTo(dst []byte) []byte {
	dst = kbin.AppendUuid(dst, v.TopicID)
	return appendTags(dst)
}

func (v *topicDeletedRecord) readFrom(r *kbin.Reader) error {
	v.TopicID = r.Uuid()
	skipTags(r)
	return okOrTruncated(r)
}

// 102

// committedBatchMinSize is the smallest encoding of a committedBatch, used
// to bound array lengths before allocating.
const committedBatchMinSize = 1 + 4 + 4 + 8 + 8 + 8 + 8 + 1 + 8 + 2 + 4 + 4 + 1

func (v *fileCommittedRecord) appendTo(dst []byte) []byte {
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
				dst = p.Batches[k].appendTo(dst)
			}
			dst = appendTags(dst)
		}
		dst = appendTags(dst)
	}
	return appendTags(dst)
}

func (b *committedBatch) appendTo(dst []byte) []byte {
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
	return appendTags(dst)
}

func (v *fileCommittedRecord) readFrom(r *kbin.Reader) (err error) {
	if v.ObjectKey, err = readString(r); err != nil {
		return err
	}
	v.ObjectFormat = r.Int8()
	v.FileSize = r.Int64()
	v.UploaderBrokerID = r.Int32()
	n, err := readArrayLen(r, 4)
	if err != nil {
		return err
	}
	v.OwnerIDs = make([]int32, n)
	for i := range v.OwnerIDs {
		v.OwnerIDs[i] = r.Int32()
	}
	if n, err = readArrayLen(r, 16+1+1); err != nil {
		return err
	}
	v.Topics = make([]fileTopic, n)
	for i := range v.Topics {
		t := &v.Topics[i]
		t.TopicID = r.Uuid()
		if n, err = readArrayLen(r, 4+1+1); err != nil {
			return err
		}
		t.Partitions = make([]filePartition, n)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.Partition = r.Int32()
			if n, err = readArrayLen(r, committedBatchMinSize); err != nil {
				return err
			}
			p.Batches = make([]committedBatch, n)
			for k := range p.Batches {
				p.Batches[k].readFrom(r)
			}
			skipTags(r)
			if !r.Ok() {
				return errTruncated
			}
		}
		skipTags(r)
		if !r.Ok() {
			return errTruncated
		}
	}
	skipTags(r)
	return okOrTruncated(r)
}

func (b *committedBatch) readFrom(r *kbin.Reader) {
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
	skipTags(r)
}

// 103

func (v *recordsDeletedRecord) appendTo(dst []byte) []byte {
	dst = kbin.AppendUuid(dst, v.TopicID)
	dst = kbin.AppendInt32(dst, v.Partition)
	dst = kbin.AppendInt64(dst, v.NewLogStartOffset)
	return appendTags(dst)
}

func (v *recordsDeletedRecord) readFrom(r *kbin.Reader) error {
	v.TopicID = r.Uuid()
	v.Partition = r.Int32()
	v.NewLogStartOffset = r.Int64()
	skipTags(r)
	return okOrTruncated(r)
}

// 104

func (v *topicConfigRecord) appendTo(dst []byte) []byte {
	dst = kbin.AppendUuid(dst, v.TopicID)
	dst = kbin.AppendCompactString(dst, v.TopicName)
	dst = kbin.AppendInt32(dst, v.NumPartitions)
	dst = kbin.AppendCompactArrayLen(dst, len(v.Configs))
	for _, c := range v.Configs {
		dst = kbin.AppendCompactString(dst, c.Name)
		dst = kbin.AppendCompactString(dst, c.Value)
		dst = appendTags(dst)
	}
	return appendTags(dst)
}

func (v *topicConfigRecord) readFrom(r *kbin.Reader) (err error) {
	v.TopicID = r.Uuid()
	if v.TopicName, err = readString(r); err != nil {
		return err
	}
	v.NumPartitions = r.Int32()
	n, err := readArrayLen(r, 3)
	if err != nil {
		return err
	}
	v.Configs = make([]topicConfigEntry, n)
	for i := range v.Configs {
		c := &v.Configs[i]
		if c.Name, err = readString(r); err != nil {
			return err
		}
		if c.Value, err = readString(r); err != nil {
			return err
		}
		skipTags(r)
	}
	skipTags(r)
	return okOrTruncated(r)
}

// 105

func (v *producerIDBlockRecord) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.NodeID)
	dst = kbin.AppendInt64(dst, v.FirstProducerID)
	dst = kbin.AppendInt32(dst, v.BlockSize)
	return appendTags(dst)
}

func (v *producerIDBlockRecord) readFrom(r *kbin.Reader) error {
	v.NodeID = r.Int32()
	v.FirstProducerID = r.Int64()
	v.BlockSize = r.Int32()
	skipTags(r)
	return okOrTruncated(r)
}

// 106

func (v *fileDeletedRecord) appendTo(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, v.ObjectKey)
	dst = kbin.AppendInt32(dst, v.DeleterShard)
	return appendTags(dst)
}

func (v *fileDeletedRecord) readFrom(r *kbin.Reader) (err error) {
	if v.ObjectKey, err = readString(r); err != nil {
		return err
	}
	v.DeleterShard = r.Int32()
	skipTags(r)
	return okOrTruncated(r)
}
