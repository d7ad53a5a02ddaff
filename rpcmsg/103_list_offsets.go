package rpcmsg

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/tagged"
)

// ListOffsetsRequest is DisklessListOffsets (API key 103): ListOffsets
// lookups on partitions of one shard, from its current state
// (docs/format/coordinator-rpcs.md §103 DisklessListOffsets).
type ListOffsetsRequest struct {
	Header
	TimeoutMs  int32
	ShardID    int32
	Partitions []ListOffsetsPartition
}

// ListOffsetsPartition is one lookup.
type ListOffsetsPartition struct {
	TopicID   [16]byte
	Partition int32
	// Timestamp is ≥ 0, or diskless.ListOffsetsLatest, …Earliest,
	// …MaxTimestamp.
	Timestamp int64
	// From restricts the lookup to batches holding an offset ≥ From
	// (ListOffsetsFrom); −1 for none.
	From int64
}

const listOffsetsPartitionSize = 16 + 4 + 8 + 8 + 1

// NewListOffsetsRequest returns an empty request.
func NewListOffsetsRequest() *ListOffsetsRequest { return &ListOffsetsRequest{} }

func (*ListOffsetsRequest) Key() int16        { return KeyListOffsets }
func (*ListOffsetsRequest) MaxVersion() int16 { return maxVersion }
func (v *ListOffsetsRequest) ResponseKind() kmsg.Response {
	return &ListOffsetsResponse{Header: v.Header}
}

func (v *ListOffsetsRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.TimeoutMs)
	dst = kbin.AppendInt32(dst, v.ShardID)
	dst = kbin.AppendCompactArrayLen(dst, len(v.Partitions))
	for i := range v.Partitions {
		p := &v.Partitions[i]
		dst = kbin.AppendUuid(dst, p.TopicID)
		dst = kbin.AppendInt32(dst, p.Partition)
		dst = kbin.AppendInt64(dst, p.Timestamp)
		dst = kbin.AppendInt64(dst, p.From)
		dst = tagged.AppendNone(dst)
	}
	return tagged.AppendNone(dst)
}

func (v *ListOffsetsRequest) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.TimeoutMs = r.Int32()
	v.ShardID = r.Int32()
	n := r.arrayLen("Partitions", listOffsetsPartitionSize)
	v.Partitions = nil
	if r.ok() {
		v.Partitions = make([]ListOffsetsPartition, n)
	}
	for i := range v.Partitions {
		p := &v.Partitions[i]
		p.TopicID = r.Uuid()
		p.Partition = r.Int32()
		p.Timestamp = r.Int64()
		p.From = r.Int64()
		r.noTags()
	}
	r.noTags()
	return r.done()
}

// ListOffsetsResponse answers ListOffsetsRequest.
type ListOffsetsResponse struct {
	Header
	ThrottleTimeMs int32
	ErrorCode      int16
	ErrorMessage   *string
	// Partitions holds one answer per request partition, in order.
	Partitions []ListOffsetsResult
}

// ListOffsetsResult is one lookup's answer (diskless.ListOffsetsResult).
type ListOffsetsResult struct {
	ErrorCode      int16
	LogStartOffset int64
	HighWatermark  int64
	Offset         int64
	Timestamp      int64
	// Candidates holds the candidate batch, if any (at most one).
	Candidates []Candidate
}

// Candidate is a ListOffsets candidate batch: a coordinate with its
// object named.
type Candidate struct {
	ObjectKey string
	FileSize  int64
	// ObjectFormat is the object's format: tagged field 0, as in
	// FindBatchesObject.
	ObjectFormat      int8
	ByteOffset        int64
	ByteSize          int32
	BaseOffset        int64
	LastOffset        int64
	TimestampType     int8
	LogAppendTime     int64
	BatchMaxTimestamp int64
}

const (
	candidateSize         = 1 + 8 + 8 + 4 + 8 + 8 + 1 + 8 + 8 + 1
	listOffsetsResultSize = 2 + 8 + 8 + 8 + 8 + 1 + 1
)

func (*ListOffsetsResponse) Key() int16        { return KeyListOffsets }
func (*ListOffsetsResponse) MaxVersion() int16 { return maxVersion }
func (v *ListOffsetsResponse) RequestKind() kmsg.Request {
	return &ListOffsetsRequest{Header: v.Header}
}

func (v *ListOffsetsResponse) AppendTo(dst []byte) []byte {
	dst = appendTop(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage)
	dst = kbin.AppendCompactArrayLen(dst, len(v.Partitions))
	for i := range v.Partitions {
		p := &v.Partitions[i]
		dst = kbin.AppendInt16(dst, p.ErrorCode)
		dst = kbin.AppendInt64(dst, p.LogStartOffset)
		dst = kbin.AppendInt64(dst, p.HighWatermark)
		dst = kbin.AppendInt64(dst, p.Offset)
		dst = kbin.AppendInt64(dst, p.Timestamp)
		dst = kbin.AppendCompactArrayLen(dst, len(p.Candidates))
		for j := range p.Candidates {
			c := &p.Candidates[j]
			dst = kbin.AppendCompactString(dst, c.ObjectKey)
			dst = kbin.AppendInt64(dst, c.FileSize)
			dst = kbin.AppendInt64(dst, c.ByteOffset)
			dst = kbin.AppendInt32(dst, c.ByteSize)
			dst = kbin.AppendInt64(dst, c.BaseOffset)
			dst = kbin.AppendInt64(dst, c.LastOffset)
			dst = kbin.AppendInt8(dst, c.TimestampType)
			dst = kbin.AppendInt64(dst, c.LogAppendTime)
			dst = kbin.AppendInt64(dst, c.BatchMaxTimestamp)
			dst = appendFormatTag(dst, c.ObjectFormat)
		}
		dst = tagged.AppendNone(dst)
	}
	return tagged.AppendNone(dst)
}

func (v *ListOffsetsResponse) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage = r.top()
	n := r.arrayLen("Partitions", listOffsetsResultSize)
	v.Partitions = nil
	if r.ok() {
		v.Partitions = make([]ListOffsetsResult, n)
	}
	for i := range v.Partitions {
		p := &v.Partitions[i]
		p.ErrorCode = r.Int16()
		p.LogStartOffset = r.Int64()
		p.HighWatermark = r.Int64()
		p.Offset = r.Int64()
		p.Timestamp = r.Int64()
		m := r.arrayLen("Candidates", candidateSize)
		p.Candidates = nil
		if r.ok() {
			p.Candidates = make([]Candidate, m)
		}
		for j := range p.Candidates {
			c := &p.Candidates[j]
			c.ObjectKey = r.string("ObjectKey")
			c.FileSize = r.Int64()
			c.ByteOffset = r.Int64()
			c.ByteSize = r.Int32()
			c.BaseOffset = r.Int64()
			c.LastOffset = r.Int64()
			c.TimestampType = r.Int8()
			c.LogAppendTime = r.Int64()
			c.BatchMaxTimestamp = r.Int64()
			c.ObjectFormat = r.formatTag()
		}
		r.noTags()
	}
	r.noTags()
	return r.done()
}
