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
// Config.Disabler; ErrorCode 0 confirms. Without a Disabler the request
// gets UNSUPPORTED_VERSION (this sidecar takes no produce to stop).
func (s *Server) handleDisklessDisableTopic(ctx context.Context, req *rpcmsg.DisableTopicRequest) kmsg.Response {
	resp := req.ResponseKind().(*rpcmsg.DisableTopicResponse)
	ctx, cancel := rpcTimeout(ctx, req.TimeoutMs)
	defer cancel()
	if s.cfg.Disabler == nil {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return resp
	}
	err := s.cfg.Disabler.DisableTopic(ctx, diskless.DisableTopicRequest{TopicID: req.TopicID, Topic: req.TopicName,
		Epoch: req.Epoch, Policy: diskless.DisablePolicy(req.Policy)})
	resp.ErrorCode, resp.ErrorMessage = rpcCode(err)
	return resp
}
