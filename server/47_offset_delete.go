package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetDeleteVersions: OffsetDelete 0, the only version (KIP-496).
var offsetDeleteVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 47, MinVersion: 0, MaxVersion: 0}

// handleOffsetDelete deletes a group's offsets of topics it does not
// consume (record 108, answered once durable): GROUP_ID_NOT_FOUND,
// NON_EMPTY_GROUP, per partition GROUP_SUBSCRIBED_TO_TOPIC.
func (s *Server) handleOffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) kmsg.Response {
	var (
		resp *kmsg.OffsetDeleteResponse
		err  error
	)
	if s.cfg.Groups == nil {
		err = errNoGroups
	} else {
		resp, err = s.cfg.Groups.DeleteOffsets(ctx, req)
	}
	if err != nil {
		resp = req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = groupErrCode(err)
	}
	return resp
}
