package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// deleteGroupsVersions: DeleteGroups 0–3, as Kafka 4.4 (SPEC §6). v3 only
// adds a per-group error message, which Kafka 4.4 leaves null for every
// code it answers (observed), and so does the sidecar.
var deleteGroupsVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 42, MinVersion: 0, MaxVersion: 3}

// handleDeleteGroups deletes groups without members and their offsets
// (records 109, answered once durable). Per group: GROUP_ID_NOT_FOUND
// (also for an empty group id, as Kafka 4.4), NON_EMPTY_GROUP, or
// COORDINATOR_NOT_AVAILABLE when its shard cannot answer.
func (s *Server) handleDeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	if s.cfg.Groups == nil {
		for _, g := range req.Groups {
			resp.Groups = append(resp.Groups, kmsg.DeleteGroupsResponseGroup{Group: g, ErrorCode: groupErrCode(errNoGroups)})
		}
		return resp
	}
	resp.Groups = s.cfg.Groups.DeleteGroups(ctx, req.Groups, groupErrCode)
	return resp
}
