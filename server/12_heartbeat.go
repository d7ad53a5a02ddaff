package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// heartbeatVersions: Heartbeat 0–4, all of kmsg's.
var heartbeatVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 12, MinVersion: 0, MaxVersion: 4}

// handleHeartbeat answers a classic Heartbeat on the group's shard.
func (s *Server) handleHeartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) kmsg.Response {
	var (
		resp *kmsg.HeartbeatResponse
		err  error
	)
	if s.cfg.Groups == nil {
		err = errNoGroups
	} else {
		resp, err = s.cfg.Groups.Heartbeat(ctx, req)
	}
	if err != nil {
		resp = req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = groupErrCode(err)
	}
	return resp
}

// errNoGroups stands for a server without a group coordinator: answered
// COORDINATOR_NOT_AVAILABLE.
var errNoGroups = kerr.CoordinatorNotAvailable
