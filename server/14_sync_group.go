package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// syncGroupVersions: SyncGroup 0–5, all of kmsg's; v5 protocol type and
// name (KIP-559).
var syncGroupVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 14, MinVersion: 0, MaxVersion: 5}

// handleSyncGroup answers a classic SyncGroup on the group's shard; a
// follower's answer waits for the leader's assignment (NOT_COORDINATOR
// when the server starts draining meanwhile).
func (s *Server) handleSyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) kmsg.Response {
	fail := func(code int16) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode, resp.MemberAssignment = code, []byte{}
		return resp
	}
	if s.cfg.Groups == nil {
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	ctx, cancel := s.parkedContext(ctx)
	defer cancel()
	resp, err := s.cfg.Groups.SyncGroup(ctx, req)
	if err != nil {
		return fail(s.parkedErrCode(err))
	}
	return resp
}
