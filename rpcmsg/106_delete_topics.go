package rpcmsg

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/tagged"
)

// DeleteTopicsRequest is DisklessDeleteTopics (API key 106): mark topics'
// partitions in one shard deleted, a record 101 each
// (docs/format/coordinator-rpcs.md §106 DisklessDeleteTopics).
type DeleteTopicsRequest struct {
	Header
	TimeoutMs int32
	ShardID   int32
	TopicIDs  [][16]byte
}

// NewDeleteTopicsRequest returns an empty request.
func NewDeleteTopicsRequest() *DeleteTopicsRequest { return &DeleteTopicsRequest{} }

func (*DeleteTopicsRequest) Key() int16        { return KeyDeleteTopics }
func (*DeleteTopicsRequest) MaxVersion() int16 { return maxVersion }
func (v *DeleteTopicsRequest) ResponseKind() kmsg.Response {
	return &DeleteTopicsResponse{Header: v.Header}
}

func (v *DeleteTopicsRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.TimeoutMs)
	dst = kbin.AppendInt32(dst, v.ShardID)
	dst = kbin.AppendCompactArrayLen(dst, len(v.TopicIDs))
	for _, id := range v.TopicIDs {
		dst = kbin.AppendUuid(dst, id)
	}
	return tagged.AppendNone(dst)
}

func (v *DeleteTopicsRequest) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.TimeoutMs = r.Int32()
	v.ShardID = r.Int32()
	n := r.arrayLen("TopicIds", 16)
	v.TopicIDs = nil
	if r.ok() {
		v.TopicIDs = make([][16]byte, n)
	}
	for i := range v.TopicIDs {
		v.TopicIDs[i] = r.Uuid()
	}
	r.noTags()
	return r.done()
}

// DeleteTopicsResponse answers DeleteTopicsRequest.
type DeleteTopicsResponse struct {
	Header
	ThrottleTimeMs int32
	ErrorCode      int16
	ErrorMessage   *string
}

func (*DeleteTopicsResponse) Key() int16        { return KeyDeleteTopics }
func (*DeleteTopicsResponse) MaxVersion() int16 { return maxVersion }
func (v *DeleteTopicsResponse) RequestKind() kmsg.Request {
	return &DeleteTopicsRequest{Header: v.Header}
}

func (v *DeleteTopicsResponse) AppendTo(dst []byte) []byte {
	return tagged.AppendNone(appendTop(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage))
}

func (v *DeleteTopicsResponse) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage = r.top()
	r.noTags()
	return r.done()
}
