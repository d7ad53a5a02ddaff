package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/rpcmsg"
)

// handleDisklessFindBatches answers DisklessFindBatches (API key 102, SPEC §9):
// Shards.FindBatches for the shard's partitions, each object key sent
// once. A partition of another shard gets INVALID_REQUEST (the sender
// computed its shard with another shard count).
func (s *Server) handleDisklessFindBatches(ctx context.Context, req *rpcmsg.FindBatchesRequest) kmsg.Response {
	resp := req.ResponseKind().(*rpcmsg.FindBatchesResponse)
	ctx, cancel := rpcTimeout(ctx, req.TimeoutMs)
	defer cancel()
	if err := s.serving(req.ShardID); err != nil {
		resp.ErrorCode, resp.ErrorMessage = rpcCode(err)
		return resp
	}
	resp.Partitions = make([]rpcmsg.FindBatchesResult, len(req.Partitions))
	reqs := make([]diskless.FindBatchesRequest, 0, len(req.Partitions))
	idx := make([]int, 0, len(req.Partitions))
	for i := range req.Partitions {
		p := &req.Partitions[i]
		if s.cfg.Shards.ShardFor(p.TopicID, p.Partition) != req.ShardID {
			resp.Partitions[i] = rpcmsg.FindBatchesResult{ErrorCode: kerr.InvalidRequest.Code, LogStartOffset: -1,
				HighWatermark: -1, Runs: []rpcmsg.Coordinate{}, Next: rpcmsg.Coordinate{ObjectIndex: -1}}
			continue
		}
		reqs = append(reqs, diskless.FindBatchesRequest{TopicID: p.TopicID, Partition: p.Partition, Offset: p.Offset, MaxBytes: p.MaxBytes})
		idx = append(idx, i)
	}
	objects := make(map[string]int32)
	object := func(key string, size int64, format int8) int32 {
		i, ok := objects[key]
		if !ok {
			i = int32(len(resp.Objects))
			objects[key] = i
			resp.Objects = append(resp.Objects, rpcmsg.FindBatchesObject{ObjectKey: key, FileSize: size, ObjectFormat: format})
		}
		return i
	}
	coordinate := func(b *diskless.RunCoordinate) rpcmsg.Coordinate {
		if b.ObjectKey == "" {
			return rpcmsg.Coordinate{ObjectIndex: -1}
		}
		return rpcmsg.Coordinate{ObjectIndex: object(b.ObjectKey, b.FileSize, b.ObjectFormat), ByteOffset: b.ByteOffset, ByteSize: b.ByteSize,
			BaseOffset: b.BaseOffset, LastOffset: b.LastOffset, TimestampType: b.TimestampType,
			LogAppendTime: b.LogAppendTime, BatchMaxTimestamp: b.BatchMaxTimestamp}
	}
	results := s.cfg.Shards.FindBatches(ctx, reqs)
	if len(results) != len(reqs) {
		resp.ErrorCode, resp.ErrorMessage = rpcCode(errWrongAnswerCount)
		resp.Partitions, resp.Objects = nil, nil
		return resp
	}
	for j := range results {
		r := &results[j]
		out := &resp.Partitions[idx[j]]
		out.ErrorCode, out.LogStartOffset, out.HighWatermark = codeOf(r.Err), r.LogStartOffset, r.HighWatermark
		out.Runs = make([]rpcmsg.Coordinate, len(r.Runs))
		for k := range r.Runs {
			out.Runs[k] = coordinate(&r.Runs[k])
		}
		out.Next = coordinate(&r.Next)
	}
	return resp
}
