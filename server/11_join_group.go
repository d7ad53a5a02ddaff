package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// joinGroupVersions: JoinGroup 0–9, all of kmsg's; v4+ MEMBER_ID_REQUIRED
// (KIP-394), v5+ static membership (KIP-345), v9 SkipAssignment.
var joinGroupVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 11, MinVersion: 0, MaxVersion: 9}

// handleJoinGroup answers a classic JoinGroup (group.Coordinator.JoinGroup)
// on the group's shard. The answer may be held back by the rebalance up
// to the rebalance timeout; when the server starts draining it is
// answered NOT_COORDINATOR at once.
func (s *Server) handleJoinGroup(ctx context.Context, req *kmsg.JoinGroupRequest) kmsg.Response {
	fail := func(code int16) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.MemberID = code, -1, req.MemberID
		return resp
	}
	if s.cfg.Groups == nil {
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	cl := clientOf(ctx)
	ctx, cancel := s.parkedContext(ctx)
	defer cancel()
	resp, err := s.cfg.Groups.JoinGroup(ctx, req, cl.id, cl.host)
	if err != nil {
		return fail(s.parkedErrCode(err))
	}
	return resp
}
