package rpcmsg

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/tagged"
)

// EndTxnOffsetsRequest is DisklessEndTxnOffsets (API key 111): record 110
// on the shard of consumer group GroupID, which commits (Committed) or
// drops producer (ProducerID, ProducerEpoch)'s pending offsets of its
// transaction's end (SPEC §15; docs/format/coordinator-rpcs.md §111
// DisklessEndTxnOffsets).
type EndTxnOffsetsRequest struct {
	Header
	TimeoutMs     int32
	ShardID       int32
	GroupID       string
	ProducerID    int64
	ProducerEpoch int16
	Committed     bool
	// TxnSeq (tagged field 0, an int64 sent only when not 0) is the token
	// of the transaction that ended (txn.StateRecord.Seq): record 110's,
	// which ends only pending offsets of that transaction or an earlier
	// one. 0: not known (a sender without the token).
	TxnSeq int64
}

// NewEndTxnOffsetsRequest returns an empty request.
func NewEndTxnOffsetsRequest() *EndTxnOffsetsRequest { return &EndTxnOffsetsRequest{} }

func (*EndTxnOffsetsRequest) Key() int16        { return KeyEndTxnOffsets }
func (*EndTxnOffsetsRequest) MaxVersion() int16 { return maxVersion }
func (v *EndTxnOffsetsRequest) ResponseKind() kmsg.Response {
	return &EndTxnOffsetsResponse{Header: v.Header}
}

func (v *EndTxnOffsetsRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.TimeoutMs)
	dst = kbin.AppendInt32(dst, v.ShardID)
	dst = kbin.AppendCompactString(dst, v.GroupID)
	dst = kbin.AppendInt64(dst, v.ProducerID)
	dst = kbin.AppendInt16(dst, v.ProducerEpoch)
	dst = kbin.AppendBool(dst, v.Committed)
	if v.TxnSeq == 0 {
		return tagged.AppendNone(dst)
	}
	return appendTag64(dst, 0, v.TxnSeq)
}

func (v *EndTxnOffsetsRequest) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.TimeoutMs = r.Int32()
	v.ShardID = r.Int32()
	v.GroupID = r.string("GroupId")
	v.ProducerID = r.Int64()
	v.ProducerEpoch = r.Int16()
	v.Committed = r.Bool()
	v.TxnSeq = 0
	r.tags(func(tag uint32, f *reader) bool {
		if tag != 0 {
			return false
		}
		v.TxnSeq = f.Int64()
		return true
	})
	if r.ok() && v.TxnSeq < 0 {
		r.fail("TxnSeq %d", v.TxnSeq)
	}
	return r.done()
}

// EndTxnOffsetsResponse answers EndTxnOffsetsRequest once record 110 is
// durable; ErrorCode is the shard's.
type EndTxnOffsetsResponse struct {
	Header
	ThrottleTimeMs int32
	ErrorCode      int16
	ErrorMessage   *string
}

func (*EndTxnOffsetsResponse) Key() int16        { return KeyEndTxnOffsets }
func (*EndTxnOffsetsResponse) MaxVersion() int16 { return maxVersion }
func (v *EndTxnOffsetsResponse) RequestKind() kmsg.Request {
	return &EndTxnOffsetsRequest{Header: v.Header}
}

func (v *EndTxnOffsetsResponse) AppendTo(dst []byte) []byte {
	dst = appendTop(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage)
	return tagged.AppendNone(dst)
}

func (v *EndTxnOffsetsResponse) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage = r.top()
	r.noTags()
	return r.done()
}
