package rpcmsg

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/tagged"
)

// DisableTopicRequest is DisklessDisableTopic (API key 109): a topic's
// disablement, sent to each sidecar (SPEC §10;
// docs/format/coordinator-rpcs.md §109 DisklessDisableTopic;
// diskless.DisableTopicRequest). Not addressed to a shard.
type DisableTopicRequest struct {
	Header
	TimeoutMs int32
	TopicID   [16]byte
	TopicName string
	Epoch     int32
	// Policy is diskless.DisablePolicy: 0 retain, 1 delete.
	Policy int8
}

// NewDisableTopicRequest returns an empty request.
func NewDisableTopicRequest() *DisableTopicRequest { return &DisableTopicRequest{} }

func (*DisableTopicRequest) Key() int16        { return KeyDisableTopic }
func (*DisableTopicRequest) MaxVersion() int16 { return maxVersion }
func (v *DisableTopicRequest) ResponseKind() kmsg.Response {
	return &DisableTopicResponse{Header: v.Header}
}

func (v *DisableTopicRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.TimeoutMs)
	dst = kbin.AppendUuid(dst, v.TopicID)
	dst = kbin.AppendCompactString(dst, v.TopicName)
	dst = kbin.AppendInt32(dst, v.Epoch)
	dst = kbin.AppendInt8(dst, v.Policy)
	return tagged.AppendNone(dst)
}

func (v *DisableTopicRequest) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.TimeoutMs = r.Int32()
	v.TopicID = r.Uuid()
	v.TopicName = r.string("TopicName")
	v.Epoch = r.Int32()
	v.Policy = r.Int8()
	r.noTags()
	return r.done()
}

// DisableTopicResponse answers DisableTopicRequest: ErrorCode 0 confirms.
// TxnShards (tagged field 0, sent only when not empty) are the shards of
// the topic's partitions the sidecar hosts, each with whether a
// transaction is open in one of the topic's partitions there
// (diskless.DisableTopicResult).
type DisableTopicResponse struct {
	Header
	ThrottleTimeMs int32
	ErrorCode      int16
	ErrorMessage   *string
	TxnShards      []DisableTopicShard
}

// DisableTopicShard is one shard of DisableTopicResponse.TxnShards.
type DisableTopicShard struct {
	ShardID  int32
	TxnsOpen bool
}

func (*DisableTopicResponse) Key() int16        { return KeyDisableTopic }
func (*DisableTopicResponse) MaxVersion() int16 { return maxVersion }
func (v *DisableTopicResponse) RequestKind() kmsg.Request {
	return &DisableTopicRequest{Header: v.Header}
}

func (v *DisableTopicResponse) AppendTo(dst []byte) []byte {
	dst = appendTop(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage)
	if len(v.TxnShards) == 0 {
		return tagged.AppendNone(dst)
	}
	var f []byte
	f = kbin.AppendCompactArrayLen(f, len(v.TxnShards))
	for _, s := range v.TxnShards {
		f = kbin.AppendInt32(f, s.ShardID)
		f = kbin.AppendBool(f, s.TxnsOpen)
		f = tagged.AppendNone(f)
	}
	return append(tagged.AppendOne(dst, 0, len(f)), f...)
}

func (v *DisableTopicResponse) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage = r.top()
	v.TxnShards = nil
	r.tags(func(tag uint32, f *reader) bool {
		if tag != 0 {
			return false
		}
		n := f.arrayLen("TxnShards", disableTopicShardSize)
		if !f.ok() {
			return true
		}
		v.TxnShards = make([]DisableTopicShard, n)
		for i := range v.TxnShards {
			v.TxnShards[i].ShardID = f.Int32()
			v.TxnShards[i].TxnsOpen = f.Bool()
			f.noTags()
		}
		return true
	})
	return r.done()
}

// disableTopicShardSize is a DisableTopicShard's encoded size (no tags).
const disableTopicShardSize = 4 + 1 + 1
