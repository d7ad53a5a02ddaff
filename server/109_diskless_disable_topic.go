package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/rpcmsg"
)

// handleDisklessDisableTopic answers DisklessDisableTopic (API key 109, SPEC
// §10): this sidecar's part of a topic's disablement, through
// Config.Disabler; ErrorCode 0 confirms, with TxnShards the open
// transactions of the topic's shards hosted here (Shards.TopicTxns, when
// Config.Shards is set). Without a Disabler the request gets
// UNSUPPORTED_VERSION (this sidecar takes no produce to stop).
func (s *Server) handleDisklessDisableTopic(ctx context.Context, req *rpcmsg.DisableTopicRequest) kmsg.Response {
	resp := req.ResponseKind().(*rpcmsg.DisableTopicResponse)
	ctx, cancel := rpcTimeout(ctx, req.TimeoutMs)
	defer cancel()
	if s.cfg.Disabler == nil {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return resp
	}
	dreq := diskless.DisableTopicRequest{TopicID: req.TopicID, Topic: req.TopicName,
		Epoch: req.Epoch, Policy: diskless.DisablePolicy(req.Policy)}
	err := s.cfg.Disabler.DisableTopic(ctx, dreq)
	resp.ErrorCode, resp.ErrorMessage = rpcCode(err)
	if err == nil && s.cfg.Shards != nil {
		for _, st := range s.cfg.Shards.TopicTxns(ctx, dreq) {
			resp.TxnShards = append(resp.TxnShards, rpcmsg.DisableTopicShard{ShardID: st.Shard, TxnsOpen: st.Open})
		}
	}
	return resp
}
