package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// alterConfigsVersions: AlterConfigs 0–2, all of kmsg's versions (as
// Kafka 4.x).
var alterConfigsVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 33, MinVersion: 0, MaxVersion: 2}

// handleAlterConfigs answers the legacy AlterConfigs: per topic resource,
// the configs given become the topic's whole set (those not named are
// removed, as Kafka's AlterConfigs replaces a resource's dynamic configs),
// with the refusals of IncrementalAlterConfigs (handleIncrementalAlterConfigs).
func (s *Server) handleAlterConfigs(ctx context.Context, req *kmsg.AlterConfigsRequest) kmsg.Response {
	if fwd, ok := s.forwardAdmin(ctx, req); ok {
		return fwd // the catalog is written at the controller
	}
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		out := kmsg.NewAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		ops := make([]configOp, len(rr.Configs))
		for i, c := range rr.Configs {
			ops[i] = configOp{name: c.Name, value: c.Value}
		}
		out.ErrorCode, out.ErrorMessage = s.alterTopic(ctx, rr.ResourceType, rr.ResourceName, ops, true, req.ValidateOnly)
		resp.Resources = append(resp.Resources, out)
	}
	return resp
}
