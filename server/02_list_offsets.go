package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleListOffsets delegates to the Fetcher (SPEC §5).
// With an authorizer the partitions of topics the principal may not
// DESCRIBE are answered TOPIC_AUTHORIZATION_FAILED without it (SPEC §14,
// ACLs).
func (s *Server) handleListOffsets(ctx context.Context, req *kmsg.ListOffsetsRequest) kmsg.Response {
	allowed, refused := s.authorizeListOffsets(ctx, req)
	if allowed == nil {
		resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
		resp.Topics = refused
		return resp
	}
	resp := s.fetcher.ListOffsets(ctx, allowed)
	if resp == nil {
		return nil
	}
	resp.Topics = append(resp.Topics, refused...)
	return resp
}
