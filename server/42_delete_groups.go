package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// deleteGroupsVersions: DeleteGroups 0–2, as Kafka 4.x.
var deleteGroupsVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 42, MinVersion: 0, MaxVersion: 2}

// handleDeleteGroups deletes groups without members and their offsets
// (records 109, answered once durable). Per group: GROUP_ID_NOT_FOUND,
// NON_EMPTY_GROUP, INVALID_GROUP_ID, or COORDINATOR_NOT_AVAILABLE when its
// shard cannot answer.
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
