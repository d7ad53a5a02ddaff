package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/rpcmsg"
)

// handleDisklessDeleteTopics answers DisklessDeleteTopics (API key 106,
// SPEC §9): Shards.DeleteTopicsIn on the shard.
func (s *Server) handleDisklessDeleteTopics(ctx context.Context, req *rpcmsg.DeleteTopicsRequest) kmsg.Response {
	resp := req.ResponseKind().(*rpcmsg.DeleteTopicsResponse)
	ctx, cancel := rpcTimeout(ctx, req.TimeoutMs)
	defer cancel()
	if err := s.serving(req.ShardID); err != nil {
		resp.ErrorCode, resp.ErrorMessage = rpcCode(err)
		return resp
	}
	ids := make([]diskless.TopicID, len(req.TopicIDs))
	for i, id := range req.TopicIDs {
		ids[i] = id
	}
	resp.ErrorCode, resp.ErrorMessage = rpcCode(s.cfg.Shards.DeleteTopicsIn(ctx, req.ShardID, ids))
	return resp
}
