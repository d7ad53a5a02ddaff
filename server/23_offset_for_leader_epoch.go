package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleOffsetForLeaderEpoch delegates to the Fetcher (SPEC §4); with an
// authorizer the partitions of topics the principal may not DESCRIBE are
// answered TOPIC_AUTHORIZATION_FAILED without it (SPEC §14, ACLs).
func (s *Server) handleOffsetForLeaderEpoch(ctx context.Context, req *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	allowed, refused := s.authorizeOffsetForLeaderEpoch(ctx, req)
	if allowed == nil {
		resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
		resp.Topics = refused
		return resp
	}
	resp := s.fetcher.OffsetForLeaderEpoch(ctx, allowed)
	if resp == nil {
		return nil
	}
	resp.Topics = append(resp.Topics, refused...)
	return resp
}
