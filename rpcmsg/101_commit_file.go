package rpcmsg

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/tagged"
)

// CommitFileRequest is DisklessCommitFile (API key 101): commit one
// uploaded file's batches of one shard (docs/format/coordinator-rpcs.md
// §101 DisklessCommitFile; diskless.CommitFileRequest).
type CommitFileRequest struct {
	Header
	TimeoutMs        int32
	ShardID          int32
	ObjectKey        string
	ObjectFormat     int8
	FileSize         int64
	UploaderBrokerID int32
	OwnerIDs         []int32
	Batches          []CommitFileBatch
}

// CommitFileBatch is one batch of a CommitFileRequest
// (diskless.CommitBatch).
type CommitFileBatch struct {
	TopicID           [16]byte
	Partition         int32
	Magic             int8
	ByteOffset        int32
	ByteSize          int32
	LastOffsetDelta   int32
	BatchMaxTimestamp int64
	TimestampType     int8
	ProducerID        int64
	ProducerEpoch     int16
	BaseSequence      int32
	LastSequence      int32
	// Txn (tagged field 0, written when not 0) is what the batch is to
	// transactions (diskless.TxnData, TxnCommit, TxnAbort); TxnSeq
	// (tagged field 1, written when not 0) the transaction guard's token
	// (diskless.CommitBatch.TxnSeq).
	Txn    int8
	TxnSeq int64
	// CoordinatorEpoch (tagged field 2, an int32 sent for a marker —
	// Txn 2 or 3 — only; a marker without it reads as −1, another batch
	// as 0 whatever it holds) is the marker's coordinator epoch
	// (diskless.CommitBatch.CoordinatorEpoch). The three are record 102's
	// tags, written and read by tagged.AppendTxn and ReadTxn: a tag 0, 1
	// or 2 of another size than 1, 8 or 4 bytes is malformed.
	CoordinatorEpoch int32
}

// commitFileBatchSize is a CommitFileBatch's encoded size (no tags).
const commitFileBatchSize = 16 + 4 + 1 + 4 + 4 + 4 + 8 + 1 + 8 + 2 + 4 + 4 + 1

// NewCommitFileRequest returns an empty request.
func NewCommitFileRequest() *CommitFileRequest { return &CommitFileRequest{} }

func (*CommitFileRequest) Key() int16        { return KeyCommitFile }
func (*CommitFileRequest) MaxVersion() int16 { return maxVersion }
func (v *CommitFileRequest) ResponseKind() kmsg.Response {
	return &CommitFileResponse{Header: v.Header}
}

func (v *CommitFileRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.TimeoutMs)
	dst = kbin.AppendInt32(dst, v.ShardID)
	dst = kbin.AppendCompactString(dst, v.ObjectKey)
	dst = kbin.AppendInt8(dst, v.ObjectFormat)
	dst = kbin.AppendInt64(dst, v.FileSize)
	dst = kbin.AppendInt32(dst, v.UploaderBrokerID)
	dst = appendInt32s(dst, v.OwnerIDs)
	dst = kbin.AppendCompactArrayLen(dst, len(v.Batches))
	for i := range v.Batches {
		b := &v.Batches[i]
		dst = kbin.AppendUuid(dst, b.TopicID)
		dst = kbin.AppendInt32(dst, b.Partition)
		dst = kbin.AppendInt8(dst, b.Magic)
		dst = kbin.AppendInt32(dst, b.ByteOffset)
		dst = kbin.AppendInt32(dst, b.ByteSize)
		dst = kbin.AppendInt32(dst, b.LastOffsetDelta)
		dst = kbin.AppendInt64(dst, b.BatchMaxTimestamp)
		dst = kbin.AppendInt8(dst, b.TimestampType)
		dst = kbin.AppendInt64(dst, b.ProducerID)
		dst = kbin.AppendInt16(dst, b.ProducerEpoch)
		dst = kbin.AppendInt32(dst, b.BaseSequence)
		dst = kbin.AppendInt32(dst, b.LastSequence)
		dst = tagged.AppendTxn(dst, b.Txn, b.TxnSeq, b.CoordinatorEpoch)
	}
	return tagged.AppendNone(dst)
}

func (v *CommitFileRequest) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.TimeoutMs = r.Int32()
	v.ShardID = r.Int32()
	v.ObjectKey = r.string("ObjectKey")
	v.ObjectFormat = r.Int8()
	v.FileSize = r.Int64()
	v.UploaderBrokerID = r.Int32()
	v.OwnerIDs = r.int32s("OwnerIds")
	n := r.arrayLen("Batches", commitFileBatchSize)
	v.Batches = nil
	if r.ok() {
		v.Batches = make([]CommitFileBatch, n)
	}
	for i := range v.Batches {
		b := &v.Batches[i]
		b.TopicID = r.Uuid()
		b.Partition = r.Int32()
		b.Magic = r.Int8()
		b.ByteOffset = r.Int32()
		b.ByteSize = r.Int32()
		b.LastOffsetDelta = r.Int32()
		b.BatchMaxTimestamp = r.Int64()
		b.TimestampType = r.Int8()
		b.ProducerID = r.Int64()
		b.ProducerEpoch = r.Int16()
		b.BaseSequence = r.Int32()
		b.LastSequence = r.Int32()
		var err error
		if b.Txn, b.TxnSeq, b.CoordinatorEpoch, err = tagged.ReadTxn(&r.Reader); err != nil {
			r.fail("%v", err)
		}
	}
	r.noTags()
	return r.done()
}

// CommitFileResponse answers CommitFileRequest.
type CommitFileResponse struct {
	Header
	ThrottleTimeMs int32
	// ErrorCode is the shard's answer as a whole (NOT_COORDINATOR, …);
	// Batches is empty unless it is 0.
	ErrorCode    int16
	ErrorMessage *string
	// Batches holds one result per request batch, in order.
	Batches []CommitFileResult
}

// CommitFileResult is one batch's answer (diskless.CommitBatchResult).
type CommitFileResult struct {
	ErrorCode      int16
	BaseOffset     int64
	LogAppendTime  int64
	LogStartOffset int64
	Duplicate      bool
}

const commitFileResultSize = 2 + 8 + 8 + 8 + 1 + 1

func (*CommitFileResponse) Key() int16        { return KeyCommitFile }
func (*CommitFileResponse) MaxVersion() int16 { return maxVersion }
func (v *CommitFileResponse) RequestKind() kmsg.Request {
	return &CommitFileRequest{Header: v.Header}
}

func (v *CommitFileResponse) AppendTo(dst []byte) []byte {
	dst = appendTop(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage)
	dst = kbin.AppendCompactArrayLen(dst, len(v.Batches))
	for i := range v.Batches {
		b := &v.Batches[i]
		dst = kbin.AppendInt16(dst, b.ErrorCode)
		dst = kbin.AppendInt64(dst, b.BaseOffset)
		dst = kbin.AppendInt64(dst, b.LogAppendTime)
		dst = kbin.AppendInt64(dst, b.LogStartOffset)
		dst = kbin.AppendBool(dst, b.Duplicate)
		dst = tagged.AppendNone(dst)
	}
	return tagged.AppendNone(dst)
}

func (v *CommitFileResponse) ReadFrom(b []byte) error {
	if err := checkVersion(v.Key(), v.Version); err != nil {
		return err
	}
	r := newReader(b)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage = r.top()
	n := r.arrayLen("Batches", commitFileResultSize)
	v.Batches = nil
	if r.ok() {
		v.Batches = make([]CommitFileResult, n)
	}
	for i := range v.Batches {
		b := &v.Batches[i]
		b.ErrorCode = r.Int16()
		b.BaseOffset = r.Int64()
		b.LogAppendTime = r.Int64()
		b.LogStartOffset = r.Int64()
		b.Duplicate = r.Bool()
		r.noTags()
	}
	r.noTags()
	return r.done()
}
