package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeGroupsVersions: DescribeGroups 0–6, all of kmsg's; v6 answers
// GROUP_ID_NOT_FOUND for a group that does not exist (KIP-1043).
var describeGroupsVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 15, MinVersion: 0, MaxVersion: 6}

// handleDescribeGroups describes classic groups from their shards, in
// request order. Authorized operations are not computed (−2147483648,
// Kafka's "not asked").
func (s *Server) handleDescribeGroups(ctx context.Context, req *kmsg.DescribeGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	if s.cfg.Groups == nil {
		for _, g := range req.Groups {
			d := kmsg.NewDescribeGroupsResponseGroup()
			d.Group, d.ErrorCode = g, groupErrCode(errNoGroups)
			resp.Groups = append(resp.Groups, d)
		}
		return resp
	}
	resp.Groups = s.cfg.Groups.DescribeGroups(ctx, req.Version, req.Groups, groupErrCode)
	return resp
}
