package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/rpcmsg"
)

// handleDisklessDeleteRecords answers DisklessDeleteRecords (API key 104,
// SPEC §5, §9): Shards.DeleteRecords on each of the shard's partitions,
// each partition's error and message its own.
func (s *Server) handleDisklessDeleteRecords(ctx context.Context, req *rpcmsg.DeleteRecordsRequest) kmsg.Response {
	resp := req.ResponseKind().(*rpcmsg.DeleteRecordsResponse)
	ctx, cancel := rpcTimeout(ctx, req.TimeoutMs)
	defer cancel()
	if err := s.serving(req.ShardID); err != nil {
		resp.ErrorCode, resp.ErrorMessage = rpcCode(err)
		return resp
	}
	resp.Partitions = make([]rpcmsg.DeleteRecordsResult, len(req.Partitions))
	for i := range req.Partitions {
		p, out := &req.Partitions[i], &resp.Partitions[i]
		out.LogStartOffset = -1
		if s.cfg.Shards.ShardFor(p.TopicID, p.Partition) != req.ShardID {
			out.ErrorCode = kerr.InvalidRequest.Code
			continue
		}
		low, err := s.cfg.Shards.DeleteRecords(ctx, diskless.TopicPartition{TopicID: p.TopicID, Partition: p.Partition}, p.Offset)
		if err != nil {
			out.ErrorCode, out.ErrorMessage = rpcCode(err)
			continue
		}
		out.LogStartOffset = low
	}
	return resp
}
