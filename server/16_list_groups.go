package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// listGroupsVersions: ListGroups 0–5, all of kmsg's; v4 a state filter
// (KIP-518), v5 a type filter (KIP-848).
var listGroupsVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 16, MinVersion: 0, MaxVersion: 5}

// handleListGroups lists the groups of every shard. If a shard cannot
// answer, the answer's error is COORDINATOR_NOT_AVAILABLE (or
// NOT_COORDINATOR) with the groups of the others, as Kafka answers for
// partitions of __consumer_offsets still loading.
func (s *Server) handleListGroups(ctx context.Context, req *kmsg.ListGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	if s.cfg.Groups == nil {
		resp.ErrorCode = groupErrCode(errNoGroups)
		return resp
	}
	groups, err := s.cfg.Groups.ListGroups(ctx, req)
	if err != nil {
		resp.ErrorCode = groupErrCode(err)
	}
	resp.Groups = groups
	return resp
}
