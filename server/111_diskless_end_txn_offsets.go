package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/rpcmsg"
)

// handleDisklessEndTxnOffsets answers DisklessEndTxnOffsets (API key 111,
// SPEC §9, §15): Shards.EndTxnOffsets, record 110 on the group's shard,
// hosted here, answered once durable — a transaction's end for a
// consumer group whose coordinator is not the transaction's. A shard not
// here, or not the group's, answers NOT_COORDINATOR.
func (s *Server) handleDisklessEndTxnOffsets(ctx context.Context, req *rpcmsg.EndTxnOffsetsRequest) kmsg.Response {
	resp := req.ResponseKind().(*rpcmsg.EndTxnOffsetsResponse)
	ctx, cancel := rpcTimeout(ctx, req.TimeoutMs)
	defer cancel()
	if err := s.serving(req.ShardID); err != nil {
		resp.ErrorCode, resp.ErrorMessage = rpcCode(err)
		return resp
	}
	err := s.cfg.Shards.EndTxnOffsets(ctx, req.ShardID, req.GroupID, req.ProducerID, req.ProducerEpoch, req.TxnSeq, req.Committed)
	resp.ErrorCode, resp.ErrorMessage = rpcCode(err)
	return resp
}
