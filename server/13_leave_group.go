package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// leaveGroupVersions: LeaveGroup 0–5, all of kmsg's; v3+ a batch of
// members (KIP-345), v5 a reason (KIP-800).
var leaveGroupVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 13, MinVersion: 0, MaxVersion: 5}

// handleLeaveGroup answers LeaveGroup on the group's shard.
func (s *Server) handleLeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) kmsg.Response {
	var (
		resp *kmsg.LeaveGroupResponse
		err  error
	)
	if s.cfg.Groups == nil {
		err = errNoGroups
	} else {
		resp, err = s.cfg.Groups.LeaveGroup(ctx, req)
	}
	if err != nil {
		resp = req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = groupErrCode(err)
	}
	return resp
}
