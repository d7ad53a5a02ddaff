package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/rpcmsg"
)

// handleDisklessCommitFile answers DisklessCommitFile (API key 101, SPEC §9):
// Shards.CommitFile on the shard, answered once the accepted batches are
// durable; the shard's whole-request error (not served here, loading,
// failed, a malformed commit) in ErrorCode.
func (s *Server) handleDisklessCommitFile(ctx context.Context, req *rpcmsg.CommitFileRequest) kmsg.Response {
	resp := req.ResponseKind().(*rpcmsg.CommitFileResponse)
	ctx, cancel := rpcTimeout(ctx, req.TimeoutMs)
	defer cancel()
	if err := s.serving(req.ShardID); err != nil {
		resp.ErrorCode, resp.ErrorMessage = rpcCode(err)
		return resp
	}
	dr := &diskless.CommitFileRequest{
		ObjectKey:        req.ObjectKey,
		ObjectFormat:     req.ObjectFormat,
		FileSize:         req.FileSize,
		UploaderBrokerID: req.UploaderBrokerID,
		OwnerIDs:         req.OwnerIDs,
		Batches:          make([]diskless.CommitBatch, len(req.Batches)),
	}
	for i := range req.Batches {
		b := &req.Batches[i]
		dr.Batches[i] = diskless.CommitBatch{
			TopicID: b.TopicID, Partition: b.Partition, Magic: b.Magic, ByteOffset: b.ByteOffset, ByteSize: b.ByteSize,
			LastOffsetDelta: b.LastOffsetDelta, BatchMaxTimestamp: b.BatchMaxTimestamp, TimestampType: b.TimestampType,
			ProducerID: b.ProducerID, ProducerEpoch: b.ProducerEpoch, BaseSequence: b.BaseSequence, LastSequence: b.LastSequence,
			Txn: b.Txn, TxnSeq: b.TxnSeq, CoordinatorEpoch: b.CoordinatorEpoch,
		}
	}
	rs, err := s.cfg.Shards.CommitFile(ctx, req.ShardID, dr)
	if err == nil && len(rs) != len(dr.Batches) {
		err = errWrongAnswerCount
	}
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = rpcCode(err)
		return resp
	}
	resp.Batches = make([]rpcmsg.CommitFileResult, len(rs))
	for i := range rs {
		r := &rs[i]
		resp.Batches[i] = rpcmsg.CommitFileResult{ErrorCode: codeOf(r.Err), BaseOffset: r.BaseOffset,
			LogAppendTime: r.LogAppendTime, LogStartOffset: r.LogStartOffset, Duplicate: r.Duplicate}
	}
	return resp
}
