package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/rpcmsg"
)

// handleDisklessDescribeFiles answers DisklessDescribeFiles (API key 100,
// KIP-1164; SPEC §9): what the shard knows of each object, in request
// order. A shard not served here, or no ShardId (KIP-1164's request
// alone), answers every file with the error.
func (s *Server) handleDisklessDescribeFiles(ctx context.Context, req *rpcmsg.DescribeFilesRequest) kmsg.Response {
	resp := req.ResponseKind().(*rpcmsg.DescribeFilesResponse)
	ctx, cancel := rpcTimeout(ctx, req.TimeoutMs)
	defer cancel()
	resp.Files = make([]rpcmsg.DescribeFilesFile, len(req.ObjectKeys))
	for i, k := range req.ObjectKeys {
		resp.Files[i].ObjectKey = k
	}
	fail := func(code int16) kmsg.Response {
		for i := range resp.Files {
			resp.Files[i].ErrorCode = code
		}
		return resp
	}
	if req.ShardID < 0 {
		return fail(kerr.InvalidRequest.Code)
	}
	if err := s.serving(req.ShardID); err != nil {
		code, _ := rpcCode(err)
		return fail(code)
	}
	states, err := s.cfg.Shards.DescribeFiles(ctx, req.ShardID, req.ObjectKeys)
	if err == nil && len(states) != len(req.ObjectKeys) {
		err = errWrongAnswerCount
	}
	if err != nil {
		code, _ := rpcCode(err)
		return fail(code)
	}
	for i, st := range states {
		f := &resp.Files[i]
		f.State = int8(st)
		f.HasLiveBatches = st == 1 // diskless.FileLive
	}
	return resp
}
