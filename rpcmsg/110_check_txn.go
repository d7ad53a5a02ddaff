package rpcmsg

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CheckTxnRequest is DisklessCheckTxn (API key 110): whether producer
// (ProducerID, ProducerEpoch), holding TransactionalID, may write a
// transactional batch to (TopicID, Partition) — when GroupID is empty — or
// commit offsets of consumer group GroupID in its open transaction, asked
// of the sidecar hosting the id's shard (SPEC §15; docs/format/coordinator-rpcs.md
// §110 DisklessCheckTxn). It writes nothing.
type CheckTxnRequest struct {
	Header
	TimeoutMs       int32
	ShardID         int32
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	TopicID         [16]byte
	Partition       int32
	GroupID         string
}

// NewCheckTxnRequest returns an empty request.
func NewCheckTxnRequest() *CheckTxnRequest { return &CheckTxnRequest{} }

func (*CheckTxnRequest) Key() int16        { return KeyCheckTxn }
func (*CheckTxnRequest) MaxVersion() int16 { return maxVersion }
func (v *CheckTxnRequest) ResponseKind() kmsg.Response {
	return &CheckTxnResponse{Header: v.Header}
}

func (v *CheckTxnRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.TimeoutMs)
	dst = kbin.AppendInt32(dst, v.ShardID)
	dst = kbin.AppendCompactString(dst, v.TransactionalID)
	dst = kbin.AppendInt64(dst, v.ProducerID)
	dst = kbin.AppendInt16(dst, v.ProducerEpoch)
	dst = kbin.AppendUuid(dst, v.TopicID)
	dst = kbin.AppendInt32(dst, v.Partition)
	dst = kbin.AppendCompactString(dst, v.GroupID)
	return appendNoTags(dst)
}

func (v *CheckTxnRequest) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.TimeoutMs = r.Int32()
	v.ShardID = r.Int32()
	v.TransactionalID = r.string("TransactionalId")
	v.ProducerID = r.Int64()
	v.ProducerEpoch = r.Int16()
	v.TopicID = r.Uuid()
	v.Partition = r.Int32()
	v.GroupID = r.string("GroupId")
	r.noTags()
	return r.done()
}

// CheckTxnResponse answers CheckTxnRequest. ErrorCode is the shard's
// (NOT_COORDINATOR: ask the owner again); TxnErrorCode the check's
// (INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH or PRODUCER_FENCED,
// INVALID_TXN_STATE; 0: allowed) and TxnSeq, when allowed, the open
// transaction's token (txn.StateRecord.Seq).
type CheckTxnResponse struct {
	Header
	ThrottleTimeMs int32
	ErrorCode      int16
	ErrorMessage   *string
	TxnErrorCode   int16
	TxnSeq         int64
}

func (*CheckTxnResponse) Key() int16        { return KeyCheckTxn }
func (*CheckTxnResponse) MaxVersion() int16 { return maxVersion }
func (v *CheckTxnResponse) RequestKind() kmsg.Request {
	return &CheckTxnRequest{Header: v.Header}
}

func (v *CheckTxnResponse) AppendTo(dst []byte) []byte {
	dst = appendTop(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage)
	dst = kbin.AppendInt16(dst, v.TxnErrorCode)
	dst = kbin.AppendInt64(dst, v.TxnSeq)
	return appendNoTags(dst)
}

func (v *CheckTxnResponse) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage = r.top()
	v.TxnErrorCode = r.Int16()
	v.TxnSeq = r.Int64()
	r.noTags()
	return r.done()
}
