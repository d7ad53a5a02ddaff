package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/rpcmsg"
)

// handleDisklessAllocateProducerIDs answers DisklessAllocateProducerIds (API key
// 108, SPEC §3, §9): a block of producer ids from shard 0, which holds
// them (record 105).
func (s *Server) handleDisklessAllocateProducerIDs(ctx context.Context, req *rpcmsg.AllocateProducerIDsRequest) kmsg.Response {
	resp := req.ResponseKind().(*rpcmsg.AllocateProducerIDsResponse)
	resp.ProducerIDStart = -1
	ctx, cancel := rpcTimeout(ctx, req.TimeoutMs)
	defer cancel()
	if req.ShardID != 0 {
		resp.ErrorCode, resp.ErrorMessage = rpcCode(errNotShardZero)
		return resp
	}
	if err := s.serving(0); err != nil {
		resp.ErrorCode, resp.ErrorMessage = rpcCode(err)
		return resp
	}
	first, n, err := s.cfg.Shards.AllocateProducerIDBlock(ctx, req.BrokerID)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = rpcCode(err)
		return resp
	}
	resp.ProducerIDStart, resp.ProducerIDLen = first, n
	return resp
}
