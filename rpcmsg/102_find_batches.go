package rpcmsg

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/tagged"
)

// FindBatchesRequest is DisklessFindBatches (API key 102): the batches of
// some of one shard's partitions from an offset on
// (docs/format/coordinator-rpcs.md §102 DisklessFindBatches;
// diskless.FindBatchesRequest).
type FindBatchesRequest struct {
	Header
	TimeoutMs  int32
	ShardID    int32
	Partitions []FindBatchesPartition
}

// FindBatchesPartition is one partition asked about.
type FindBatchesPartition struct {
	TopicID   [16]byte
	Partition int32
	Offset    int64
	MaxBytes  int32
}

const findBatchesPartitionSize = 16 + 4 + 8 + 4 + 1

// NewFindBatchesRequest returns an empty request.
func NewFindBatchesRequest() *FindBatchesRequest { return &FindBatchesRequest{} }

func (*FindBatchesRequest) Key() int16        { return KeyFindBatches }
func (*FindBatchesRequest) MaxVersion() int16 { return maxVersion }
func (v *FindBatchesRequest) ResponseKind() kmsg.Response {
	return &FindBatchesResponse{Header: v.Header}
}

func (v *FindBatchesRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.TimeoutMs)
	dst = kbin.AppendInt32(dst, v.ShardID)
	dst = kbin.AppendCompactArrayLen(dst, len(v.Partitions))
	for i := range v.Partitions {
		p := &v.Partitions[i]
		dst = kbin.AppendUuid(dst, p.TopicID)
		dst = kbin.AppendInt32(dst, p.Partition)
		dst = kbin.AppendInt64(dst, p.Offset)
		dst = kbin.AppendInt32(dst, p.MaxBytes)
		dst = tagged.AppendNone(dst)
	}
	return tagged.AppendNone(dst)
}

func (v *FindBatchesRequest) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.TimeoutMs = r.Int32()
	v.ShardID = r.Int32()
	n := r.arrayLen("Partitions", findBatchesPartitionSize)
	v.Partitions = nil
	if r.ok() {
		v.Partitions = make([]FindBatchesPartition, n)
	}
	for i := range v.Partitions {
		p := &v.Partitions[i]
		p.TopicID = r.Uuid()
		p.Partition = r.Int32()
		p.Offset = r.Int64()
		p.MaxBytes = r.Int32()
		r.noTags()
	}
	r.noTags()
	return r.done()
}

// FindBatchesResponse answers FindBatchesRequest.
type FindBatchesResponse struct {
	Header
	ThrottleTimeMs int32
	ErrorCode      int16
	ErrorMessage   *string
	// Objects are the objects the coordinates name, each once.
	Objects []FindBatchesObject
	// Partitions holds one answer per request partition, in order.
	Partitions []FindBatchesResult
}

// FindBatchesObject is an object the coordinates of a
// FindBatchesResponse refer to by index.
type FindBatchesObject struct {
	ObjectKey string
	FileSize  int64
	// ObjectFormat is the object's format (diskless.RunCoordinate): tagged
	// field 0, sent only when it is not 1 (WRITE_AHEAD_MULTI_SEGMENT), the
	// value it takes when absent; 2 is a segment object.
	ObjectFormat int8
}

// FindBatchesResult is one partition's answer
// (diskless.FindBatchesResult).
type FindBatchesResult struct {
	ErrorCode      int16
	LogStartOffset int64
	HighWatermark  int64
	// Runs are the partition's runs from the one holding the offset:
	// consecutive batches of the partition in one object
	// (diskless.RunCoordinate).
	Runs []Coordinate
	// Next is the run after Runs; ObjectIndex −1 when there is none.
	Next Coordinate
}

// Coordinate locates one run of batches (diskless.RunCoordinate), its
// object by index into the response's Objects.
type Coordinate struct {
	ObjectIndex       int32
	ByteOffset        int64
	ByteSize          int32
	BaseOffset        int64
	LastOffset        int64
	TimestampType     int8
	LogAppendTime     int64
	BatchMaxTimestamp int64
}

const (
	coordinateSize        = 4 + 8 + 4 + 8 + 8 + 1 + 8 + 8 + 1
	findBatchesResultSize = 2 + 8 + 8 + 1 + coordinateSize + 1
)

func (c *Coordinate) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, c.ObjectIndex)
	dst = kbin.AppendInt64(dst, c.ByteOffset)
	dst = kbin.AppendInt32(dst, c.ByteSize)
	dst = kbin.AppendInt64(dst, c.BaseOffset)
	dst = kbin.AppendInt64(dst, c.LastOffset)
	dst = kbin.AppendInt8(dst, c.TimestampType)
	dst = kbin.AppendInt64(dst, c.LogAppendTime)
	dst = kbin.AppendInt64(dst, c.BatchMaxTimestamp)
	return tagged.AppendNone(dst)
}

func (c *Coordinate) readFrom(r *reader) {
	c.ObjectIndex = r.Int32()
	c.ByteOffset = r.Int64()
	c.ByteSize = r.Int32()
	c.BaseOffset = r.Int64()
	c.LastOffset = r.Int64()
	c.TimestampType = r.Int8()
	c.LogAppendTime = r.Int64()
	c.BatchMaxTimestamp = r.Int64()
	r.noTags()
}

func (*FindBatchesResponse) Key() int16        { return KeyFindBatches }
func (*FindBatchesResponse) MaxVersion() int16 { return maxVersion }
func (v *FindBatchesResponse) RequestKind() kmsg.Request {
	return &FindBatchesRequest{Header: v.Header}
}

func (v *FindBatchesResponse) AppendTo(dst []byte) []byte {
	dst = appendTop(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage)
	dst = kbin.AppendCompactArrayLen(dst, len(v.Objects))
	for i := range v.Objects {
		o := &v.Objects[i]
		dst = kbin.AppendCompactString(dst, o.ObjectKey)
		dst = kbin.AppendInt64(dst, o.FileSize)
		dst = appendFormatTag(dst, o.ObjectFormat)
	}
	dst = kbin.AppendCompactArrayLen(dst, len(v.Partitions))
	for i := range v.Partitions {
		p := &v.Partitions[i]
		dst = kbin.AppendInt16(dst, p.ErrorCode)
		dst = kbin.AppendInt64(dst, p.LogStartOffset)
		dst = kbin.AppendInt64(dst, p.HighWatermark)
		dst = kbin.AppendCompactArrayLen(dst, len(p.Runs))
		for j := range p.Runs {
			dst = p.Runs[j].appendTo(dst)
		}
		dst = p.Next.appendTo(dst)
		dst = tagged.AppendNone(dst)
	}
	return tagged.AppendNone(dst)
}

func (v *FindBatchesResponse) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage = r.top()
	n := r.arrayLen("Objects", 1+8+1)
	v.Objects = nil
	if r.ok() {
		v.Objects = make([]FindBatchesObject, n)
	}
	for i := range v.Objects {
		o := &v.Objects[i]
		o.ObjectKey = r.string("ObjectKey")
		o.FileSize = r.Int64()
		o.ObjectFormat = r.formatTag()
	}
	n = r.arrayLen("Partitions", findBatchesResultSize)
	v.Partitions = nil
	if r.ok() {
		v.Partitions = make([]FindBatchesResult, n)
	}
	for i := range v.Partitions {
		p := &v.Partitions[i]
		p.ErrorCode = r.Int16()
		p.LogStartOffset = r.Int64()
		p.HighWatermark = r.Int64()
		m := r.arrayLen("Runs", coordinateSize)
		p.Runs = nil
		if r.ok() {
			p.Runs = make([]Coordinate, m)
		}
		for j := range p.Runs {
			p.Runs[j].readFrom(r)
		}
		p.Next.readFrom(r)
		r.noTags()
	}
	r.noTags()
	return r.done()
}
