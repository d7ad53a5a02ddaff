package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/rpcmsg"
)

// handleDisklessCreatePartitions answers DisklessCreatePartitions (API
// key 105, SPEC §9): Shards.CreatePartitionsIn on the shard.
func (s *Server) handleDisklessCreatePartitions(ctx context.Context, req *rpcmsg.CreatePartitionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*rpcmsg.CreatePartitionsResponse)
	ctx, cancel := rpcTimeout(ctx, req.TimeoutMs)
	defer cancel()
	if err := s.serving(req.ShardID); err != nil {
		resp.ErrorCode, resp.ErrorMessage = rpcCode(err)
		return resp
	}
	topics := make([]diskless.TopicPartitions, len(req.Topics))
	for i, t := range req.Topics {
		topics[i] = diskless.TopicPartitions{ID: t.TopicID, Name: t.TopicName, Partitions: t.Partitions}
	}
	resp.ErrorCode, resp.ErrorMessage = rpcCode(s.cfg.Shards.CreatePartitionsIn(ctx, req.ShardID, topics))
	return resp
}
