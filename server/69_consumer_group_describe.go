package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumerGroupDescribeVersions: ConsumerGroupDescribe 0–1, as Kafka 4.x
// (KIP-848).
var consumerGroupDescribeVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 69, MinVersion: 0, MaxVersion: 1}

// handleConsumerGroupDescribe describes KIP-848 groups from their shards,
// in request order.
func (s *Server) handleConsumerGroupDescribe(ctx context.Context, req *kmsg.ConsumerGroupDescribeRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	if s.cfg.Groups == nil {
		for _, g := range req.Groups {
			d := kmsg.NewConsumerGroupDescribeResponseGroup()
			d.Group, d.ErrorCode = g, groupErrCode(errNoGroups)
			resp.Groups = append(resp.Groups, d)
		}
		return resp
	}
	resp.Groups = s.cfg.Groups.ConsumerGroupDescribe(ctx, req.Groups, groupErrCode)
	return resp
}
