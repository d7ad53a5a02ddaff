package rpcmsg

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/tagged"
)

// DeleteRecordsRequest is DisklessDeleteRecords (API key 104): move log
// start offsets of partitions of one shard (docs/format/coordinator-rpcs.md
// §104 DisklessDeleteRecords; SPEC §5).
type DeleteRecordsRequest struct {
	Header
	TimeoutMs  int32
	ShardID    int32
	Partitions []DeleteRecordsPartition
}

// DeleteRecordsPartition is one partition's move.
type DeleteRecordsPartition struct {
	TopicID   [16]byte
	Partition int32
	// Offset is the new log start offset; −1 the high watermark.
	Offset int64
}

const deleteRecordsPartitionSize = 16 + 4 + 8 + 1

// NewDeleteRecordsRequest returns an empty request.
func NewDeleteRecordsRequest() *DeleteRecordsRequest { return &DeleteRecordsRequest{} }

func (*DeleteRecordsRequest) Key() int16        { return KeyDeleteRecords }
func (*DeleteRecordsRequest) MaxVersion() int16 { return maxVersion }
func (v *DeleteRecordsRequest) ResponseKind() kmsg.Response {
	return &DeleteRecordsResponse{Header: v.Header}
}

func (v *DeleteRecordsRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.TimeoutMs)
	dst = kbin.AppendInt32(dst, v.ShardID)
	dst = kbin.AppendCompactArrayLen(dst, len(v.Partitions))
	for i := range v.Partitions {
		p := &v.Partitions[i]
		dst = kbin.AppendUuid(dst, p.TopicID)
		dst = kbin.AppendInt32(dst, p.Partition)
		dst = kbin.AppendInt64(dst, p.Offset)
		dst = tagged.AppendNone(dst)
	}
	return tagged.AppendNone(dst)
}

func (v *DeleteRecordsRequest) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.TimeoutMs = r.Int32()
	v.ShardID = r.Int32()
	n := r.arrayLen("Partitions", deleteRecordsPartitionSize)
	v.Partitions = nil
	if r.ok() {
		v.Partitions = make([]DeleteRecordsPartition, n)
	}
	for i := range v.Partitions {
		p := &v.Partitions[i]
		p.TopicID = r.Uuid()
		p.Partition = r.Int32()
		p.Offset = r.Int64()
		r.noTags()
	}
	r.noTags()
	return r.done()
}

// DeleteRecordsResponse answers DeleteRecordsRequest.
type DeleteRecordsResponse struct {
	Header
	ThrottleTimeMs int32
	ErrorCode      int16
	ErrorMessage   *string
	// Partitions holds one answer per request partition, in order.
	Partitions []DeleteRecordsResult
}

// DeleteRecordsResult is one partition's answer.
type DeleteRecordsResult struct {
	ErrorCode    int16
	ErrorMessage *string
	// LogStartOffset is the partition's log start offset after the move.
	LogStartOffset int64
}

const deleteRecordsResultSize = 2 + 1 + 8 + 1

func (*DeleteRecordsResponse) Key() int16        { return KeyDeleteRecords }
func (*DeleteRecordsResponse) MaxVersion() int16 { return maxVersion }
func (v *DeleteRecordsResponse) RequestKind() kmsg.Request {
	return &DeleteRecordsRequest{Header: v.Header}
}

func (v *DeleteRecordsResponse) AppendTo(dst []byte) []byte {
	dst = appendTop(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage)
	dst = kbin.AppendCompactArrayLen(dst, len(v.Partitions))
	for i := range v.Partitions {
		p := &v.Partitions[i]
		dst = kbin.AppendInt16(dst, p.ErrorCode)
		dst = appendNullableString(dst, p.ErrorMessage)
		dst = kbin.AppendInt64(dst, p.LogStartOffset)
		dst = tagged.AppendNone(dst)
	}
	return tagged.AppendNone(dst)
}

func (v *DeleteRecordsResponse) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage = r.top()
	n := r.arrayLen("Partitions", deleteRecordsResultSize)
	v.Partitions = nil
	if r.ok() {
		v.Partitions = make([]DeleteRecordsResult, n)
	}
	for i := range v.Partitions {
		p := &v.Partitions[i]
		p.ErrorCode = r.Int16()
		p.ErrorMessage = r.nullableString()
		p.LogStartOffset = r.Int64()
		r.noTags()
	}
	r.noTags()
	return r.done()
}
