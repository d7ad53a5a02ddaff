package rpcmsg

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/tagged"
)

// CheckTxnRequest is DisklessCheckTxn (API key 110): whether producer
// (ProducerID, ProducerEpoch), holding TransactionalID, may write a
// transactional batch to each of Partitions — when GroupID is empty: the
// transactional batches of one produce request, checked at once — or
// commit offsets of consumer group GroupID in its open transaction, asked
// of the sidecar hosting the id's shard (SPEC §15;
// docs/format/coordinator-rpcs.md §110 DisklessCheckTxn). It writes
// nothing.
type CheckTxnRequest struct {
	Header
	TimeoutMs       int32
	ShardID         int32
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	// Partitions are the partitions to check; empty for an offsets check.
	Partitions []CheckTxnPartition
	GroupID    string
}

// CheckTxnPartition is one partition of a produce check.
type CheckTxnPartition struct {
	TopicID   [16]byte
	Partition int32
}

const checkTxnPartitionSize = 16 + 4 + 1

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
	dst = kbin.AppendCompactArrayLen(dst, len(v.Partitions))
	for i := range v.Partitions {
		p := &v.Partitions[i]
		dst = kbin.AppendUuid(dst, p.TopicID)
		dst = kbin.AppendInt32(dst, p.Partition)
		dst = tagged.AppendNone(dst)
	}
	dst = kbin.AppendCompactString(dst, v.GroupID)
	return tagged.AppendNone(dst)
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
	n := r.arrayLen("Partitions", checkTxnPartitionSize)
	v.Partitions = nil
	if r.ok() {
		v.Partitions = make([]CheckTxnPartition, n)
	}
	for i := range v.Partitions {
		p := &v.Partitions[i]
		p.TopicID = r.Uuid()
		p.Partition = r.Int32()
		r.noTags()
	}
	v.GroupID = r.string("GroupId")
	r.noTags()
	return r.done()
}

// CheckTxnResponse answers CheckTxnRequest. ErrorCode is the shard's
// (NOT_COORDINATOR: ask the owner again); TxnErrorCode the check's for
// every partition, or for the group's offsets (INVALID_PRODUCER_ID_MAPPING,
// INVALID_PRODUCER_EPOCH or PRODUCER_FENCED, for offsets
// INVALID_TXN_STATE; 0: the producer holds the id). When both are 0,
// Partitions answers a produce check's partitions, one per request
// partition in order (0 allowed, INVALID_TXN_STATE not in the open
// transaction), and TxnSeq is the open transaction's token
// (txn.StateRecord.Seq), the same for every allowed partition — for a
// group's check, the token its pending offsets carry (record 107). A
// negative TxnSeq is refused as malformed.
type CheckTxnResponse struct {
	Header
	ThrottleTimeMs int32
	ErrorCode      int16
	ErrorMessage   *string
	TxnErrorCode   int16
	TxnSeq         int64
	Partitions     []CheckTxnResult
}

// CheckTxnResult is one partition's answer.
type CheckTxnResult struct {
	ErrorCode int16
}

const checkTxnResultSize = 2 + 1

func (*CheckTxnResponse) Key() int16        { return KeyCheckTxn }
func (*CheckTxnResponse) MaxVersion() int16 { return maxVersion }
func (v *CheckTxnResponse) RequestKind() kmsg.Request {
	return &CheckTxnRequest{Header: v.Header}
}

func (v *CheckTxnResponse) AppendTo(dst []byte) []byte {
	dst = appendTop(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage)
	dst = kbin.AppendInt16(dst, v.TxnErrorCode)
	dst = kbin.AppendInt64(dst, v.TxnSeq)
	dst = kbin.AppendCompactArrayLen(dst, len(v.Partitions))
	for i := range v.Partitions {
		dst = kbin.AppendInt16(dst, v.Partitions[i].ErrorCode)
		dst = tagged.AppendNone(dst)
	}
	return tagged.AppendNone(dst)
}

func (v *CheckTxnResponse) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage = r.top()
	v.TxnErrorCode = r.Int16()
	v.TxnSeq = r.Int64()
	if r.ok() && v.TxnSeq < 0 {
		// A token is never negative; the offsets' one becomes record
		// 107's, whose decoder refuses it (docs/format/metadata-records.md).
		r.fail("TxnSeq %d", v.TxnSeq)
	}
	n := r.arrayLen("Partitions", checkTxnResultSize)
	v.Partitions = nil
	if r.ok() {
		v.Partitions = make([]CheckTxnResult, n)
	}
	for i := range v.Partitions {
		v.Partitions[i].ErrorCode = r.Int16()
		r.noTags()
	}
	r.noTags()
	return r.done()
}
