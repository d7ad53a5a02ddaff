package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/rpcmsg"
)

// handleListOffsets answers DisklessListOffsets (API key 103, SPEC §9):
// Shards.ListOffsets (From −1) or ListOffsetsFrom on each of the shard's
// partitions, from the shard's current state.
func (s *Server) handleDisklessListOffsets(ctx context.Context, req *rpcmsg.ListOffsetsRequest) kmsg.Response {
	resp := req.ResponseKind().(*rpcmsg.ListOffsetsResponse)
	ctx, cancel := rpcTimeout(ctx, req.TimeoutMs)
	defer cancel()
	if err := s.serving(req.ShardID); err != nil {
		resp.ErrorCode, resp.ErrorMessage = rpcCode(err)
		return resp
	}
	resp.Partitions = make([]rpcmsg.ListOffsetsResult, len(req.Partitions))
	for i := range req.Partitions {
		p, out := &req.Partitions[i], &resp.Partitions[i]
		if s.cfg.Shards.ShardFor(p.TopicID, p.Partition) != req.ShardID {
			*out = rpcmsg.ListOffsetsResult{ErrorCode: kerr.InvalidRequest.Code, LogStartOffset: -1, HighWatermark: -1,
				Offset: -1, Timestamp: -1, Candidates: []rpcmsg.Candidate{}}
			continue
		}
		tp := diskless.TopicPartition{TopicID: p.TopicID, Partition: p.Partition}
		var r diskless.ListOffsetsResult
		if p.From < 0 {
			r = s.cfg.Shards.ListOffsets(ctx, tp, p.Timestamp)
		} else {
			r = s.cfg.Shards.ListOffsetsFrom(ctx, tp, p.Timestamp, p.From)
		}
		*out = rpcmsg.ListOffsetsResult{ErrorCode: codeOf(r.Err), LogStartOffset: r.LogStartOffset, HighWatermark: r.HighWatermark,
			Offset: r.Offset, Timestamp: r.Timestamp, Candidates: []rpcmsg.Candidate{}}
		if c := r.Candidate; c != nil {
			out.Candidates = append(out.Candidates, rpcmsg.Candidate{ObjectKey: c.ObjectKey, FileSize: c.FileSize, ObjectFormat: c.ObjectFormat,
				ByteOffset: c.ByteOffset, ByteSize: c.ByteSize, BaseOffset: c.BaseOffset, LastOffset: c.LastOffset,
				TimestampType: c.TimestampType, LogAppendTime: c.LogAppendTime, BatchMaxTimestamp: c.BatchMaxTimestamp})
		}
	}
	return resp
}
