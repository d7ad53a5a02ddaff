package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/acl"
)

// describeACLsVersions: DescribeAcls 1–3, Kafka 4.x's (v0, without
// pattern types, was removed in 4.0: KIP-896).
var describeACLsVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 29, MinVersion: 1, MaxVersion: 3}

// handleDescribeAcls answers DescribeAcls (KIP-11, KIP-290; SPEC §14,
// ACLs) from the entries this sidecar holds (shard 0, here or its
// replica): without an authorizer SECURITY_DISABLED "No Authorizer is
// configured."; a principal without DESCRIBE on the cluster
// CLUSTER_AUTHORIZATION_FAILED; a filter with a code Kafka reads as
// UNKNOWN INVALID_REQUEST. The entries the filter selects are grouped by
// resource pattern, sorted (Kafka's follow a hash map's order).
func (s *Server) handleDescribeAcls(ctx context.Context, req *kmsg.DescribeACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	fail := func(err *kerr.Error, msg string) kmsg.Response {
		resp.ErrorCode, resp.ErrorMessage = err.Code, kmsg.StringPtr(msg)
		return resp
	}
	if s.cfg.Authorizer == nil {
		return fail(kerr.SecurityDisabled, "No Authorizer is configured.")
	}
	if !s.authorizedCluster(ctx, opDescribe) {
		return fail(kerr.ClusterAuthorizationFailed, kerr.ClusterAuthorizationFailed.Description)
	}
	f := acl.Filter{ResourceType: req.ResourceType, ResourceName: req.ResourceName, PatternType: req.ResourcePatternType,
		Principal: req.Principal, Host: req.Host, Operation: req.Operation, Permission: req.PermissionType}
	if why := f.Refusal(); why != "" {
		return fail(kerr.InvalidRequest, why)
	}
	var last *kmsg.DescribeACLsResponseResource
	for _, b := range s.cfg.ACLs.ACLs() {
		if !f.Matches(b) {
			continue
		}
		if last == nil || last.ResourceType != b.ResourceType || last.ResourceName != b.ResourceName || last.ResourcePatternType != b.PatternType {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
			resp.Resources = append(resp.Resources, r)
			last = &resp.Resources[len(resp.Resources)-1]
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		last.ACLs = append(last.ACLs, a)
	}
	return resp
}
