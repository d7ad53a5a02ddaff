package rpcmsg

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/tagged"
)

// CreatePartitionsRequest is DisklessCreatePartitions (API key 105):
// create partitions in one shard, a record 100 each
// (docs/format/coordinator-rpcs.md §105 DisklessCreatePartitions).
type CreatePartitionsRequest struct {
	Header
	TimeoutMs int32
	ShardID   int32
	Topics    []CreatePartitionsTopic
}

// CreatePartitionsTopic names one topic's partitions to create.
type CreatePartitionsTopic struct {
	TopicID   [16]byte
	TopicName string
	// Partitions are the indexes, each owned by the shard.
	Partitions []int32
}

// NewCreatePartitionsRequest returns an empty request.
func NewCreatePartitionsRequest() *CreatePartitionsRequest { return &CreatePartitionsRequest{} }

func (*CreatePartitionsRequest) Key() int16        { return KeyCreatePartitions }
func (*CreatePartitionsRequest) MaxVersion() int16 { return maxVersion }
func (v *CreatePartitionsRequest) ResponseKind() kmsg.Response {
	return &CreatePartitionsResponse{Header: v.Header}
}

func (v *CreatePartitionsRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.TimeoutMs)
	dst = kbin.AppendInt32(dst, v.ShardID)
	dst = kbin.AppendCompactArrayLen(dst, len(v.Topics))
	for i := range v.Topics {
		t := &v.Topics[i]
		dst = kbin.AppendUuid(dst, t.TopicID)
		dst = kbin.AppendCompactString(dst, t.TopicName)
		dst = appendInt32s(dst, t.Partitions)
		dst = tagged.AppendNone(dst)
	}
	return tagged.AppendNone(dst)
}

func (v *CreatePartitionsRequest) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.TimeoutMs = r.Int32()
	v.ShardID = r.Int32()
	n := r.arrayLen("Topics", 16+1+1+1)
	v.Topics = nil
	if r.ok() {
		v.Topics = make([]CreatePartitionsTopic, n)
	}
	for i := range v.Topics {
		t := &v.Topics[i]
		t.TopicID = r.Uuid()
		t.TopicName = r.string("TopicName")
		t.Partitions = r.int32s("Partitions")
		r.noTags()
	}
	r.noTags()
	return r.done()
}

// CreatePartitionsResponse answers CreatePartitionsRequest.
type CreatePartitionsResponse struct {
	Header
	ThrottleTimeMs int32
	ErrorCode      int16
	ErrorMessage   *string
}

func (*CreatePartitionsResponse) Key() int16        { return KeyCreatePartitions }
func (*CreatePartitionsResponse) MaxVersion() int16 { return maxVersion }
func (v *CreatePartitionsResponse) RequestKind() kmsg.Request {
	return &CreatePartitionsRequest{Header: v.Header}
}

func (v *CreatePartitionsResponse) AppendTo(dst []byte) []byte {
	return tagged.AppendNone(appendTop(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage))
}

func (v *CreatePartitionsResponse) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage = r.top()
	r.noTags()
	return r.done()
}
