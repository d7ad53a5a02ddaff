package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumerGroupHeartbeatVersions: ConsumerGroupHeartbeat 0–1, as Kafka
// 4.x (KIP-848; v1 a member id chosen by the client).
var consumerGroupHeartbeatVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 68, MinVersion: 0, MaxVersion: 1}

// handleConsumerGroupHeartbeat answers a KIP-848 heartbeat on the group's
// shard (group.Coordinator.ConsumerGroupHeartbeat).
func (s *Server) handleConsumerGroupHeartbeat(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest) kmsg.Response {
	var (
		resp *kmsg.ConsumerGroupHeartbeatResponse
		err  error
	)
	if s.cfg.Groups == nil {
		err = errNoGroups
	} else {
		cl := clientOf(ctx)
		resp, err = s.cfg.Groups.ConsumerGroupHeartbeat(ctx, req, cl.id, cl.host)
	}
	if err != nil {
		resp = req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = groupErrCode(err)
	}
	return resp
}
