package rpcmsg

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/tagged"
)

// AllocateProducerIDsRequest is DisklessAllocateProducerIds (API key
// 108): a block of producer ids, recorded on shard 0 (record 105;
// docs/format/coordinator-rpcs.md §108 DisklessAllocateProducerIds).
type AllocateProducerIDsRequest struct {
	Header
	TimeoutMs int32
	ShardID   int32
	// BrokerID is the asking sidecar's node.id.
	BrokerID int32
}

// NewAllocateProducerIDsRequest returns an empty request.
func NewAllocateProducerIDsRequest() *AllocateProducerIDsRequest {
	return &AllocateProducerIDsRequest{}
}

func (*AllocateProducerIDsRequest) Key() int16        { return KeyAllocateProducerIDs }
func (*AllocateProducerIDsRequest) MaxVersion() int16 { return maxVersion }
func (v *AllocateProducerIDsRequest) ResponseKind() kmsg.Response {
	return &AllocateProducerIDsResponse{Header: v.Header}
}

func (v *AllocateProducerIDsRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.TimeoutMs)
	dst = kbin.AppendInt32(dst, v.ShardID)
	dst = kbin.AppendInt32(dst, v.BrokerID)
	return tagged.AppendNone(dst)
}

func (v *AllocateProducerIDsRequest) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.TimeoutMs = r.Int32()
	v.ShardID = r.Int32()
	v.BrokerID = r.Int32()
	r.noTags()
	return r.done()
}

// AllocateProducerIDsResponse answers AllocateProducerIDsRequest: ids
// [ProducerIDStart, ProducerIDStart + ProducerIDLen) are the asker's.
type AllocateProducerIDsResponse struct {
	Header
	ThrottleTimeMs  int32
	ErrorCode       int16
	ErrorMessage    *string
	ProducerIDStart int64
	ProducerIDLen   int32
}

func (*AllocateProducerIDsResponse) Key() int16        { return KeyAllocateProducerIDs }
func (*AllocateProducerIDsResponse) MaxVersion() int16 { return maxVersion }
func (v *AllocateProducerIDsResponse) RequestKind() kmsg.Request {
	return &AllocateProducerIDsRequest{Header: v.Header}
}

func (v *AllocateProducerIDsResponse) AppendTo(dst []byte) []byte {
	dst = appendTop(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage)
	dst = kbin.AppendInt64(dst, v.ProducerIDStart)
	dst = kbin.AppendInt32(dst, v.ProducerIDLen)
	return tagged.AppendNone(dst)
}

func (v *AllocateProducerIDsResponse) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage = r.top()
	v.ProducerIDStart = r.Int64()
	v.ProducerIDLen = r.Int32()
	r.noTags()
	return r.done()
}
