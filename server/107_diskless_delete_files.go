package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/rpcmsg"
)

// handleDisklessDeleteFiles answers DisklessDeleteFiles (API key 107,
// SPEC §9): Shards.CloseFiles on the shard.
func (s *Server) handleDisklessDeleteFiles(ctx context.Context, req *rpcmsg.DeleteFilesRequest) kmsg.Response {
	resp := req.ResponseKind().(*rpcmsg.DeleteFilesResponse)
	ctx, cancel := rpcTimeout(ctx, req.TimeoutMs)
	defer cancel()
	if err := s.serving(req.ShardID); err != nil {
		resp.ErrorCode, resp.ErrorMessage = rpcCode(err)
		return resp
	}
	resp.ErrorCode, resp.ErrorMessage = rpcCode(s.cfg.Shards.CloseFiles(ctx, req.ShardID, req.DeleterShardID, req.ObjectKeys))
	return resp
}
