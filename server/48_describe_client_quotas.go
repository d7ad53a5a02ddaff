package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeClientQuotasVersions: DescribeClientQuotas 0–1, all of Kafka
// 4.x's (KIP-546; v1 is flexible).
var describeClientQuotasVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 48, MinVersion: 0, MaxVersion: 1}

// handleDescribeClientQuotas answers DescribeClientQuotas with no
// entries: the sidecar enforces no client quotas (SPEC §6). It is served
// because kafka-configs.sh --describe --entity-type users asks it beside
// DescribeUserScramCredentials and fails on a broker without it.
func (s *Server) handleDescribeClientQuotas(_ context.Context, req *kmsg.DescribeClientQuotasRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	return resp
}
