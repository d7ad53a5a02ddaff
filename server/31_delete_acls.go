package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/acl"
)

// deleteACLsVersions: DeleteAcls 1–3, Kafka 4.x's (KIP-896 removed v0).
var deleteACLsVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 31, MinVersion: 1, MaxVersion: 3}

// handleDeleteAcls answers DeleteAcls (KIP-11, KIP-290; SPEC §14, ACLs),
// at the controller in a cluster (forwarded, once this sidecar has
// checked the principal): one result per filter, in request order, with
// the entries it selected (an entry two filters select is in both, and
// deleted once) — without an authorizer SECURITY_DISABLED "No Authorizer
// is configured.", without ALTER on the cluster
// CLUSTER_AUTHORIZATION_FAILED, a filter with a code Kafka reads as
// UNKNOWN INVALID_REQUEST. The selected entries are removed together (one
// group of records 117 on shard 0).
func (s *Server) handleDeleteAcls(ctx context.Context, req *kmsg.DeleteACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	results := make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	failAll := func(code int16, msg string) kmsg.Response {
		for i := range results {
			results[i] = kmsg.NewDeleteACLsResponseResult()
			results[i].ErrorCode, results[i].ErrorMessage = code, kmsg.StringPtr(msg)
		}
		resp.Results = results
		return resp
	}
	if s.cfg.Authorizer == nil {
		return failAll(kerr.SecurityDisabled.Code, "No Authorizer is configured.")
	}
	if !s.authorizedCluster(ctx, opAlter) {
		return failAll(kerr.ClusterAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Description)
	}
	if fwd, ok := s.forwardAdmin(ctx, req); ok {
		return fwd // entries are removed at the controller
	}
	var (
		valid []acl.Filter
		at    []int
	)
	for i, f := range req.Filters {
		results[i] = kmsg.NewDeleteACLsResponseResult()
		af := acl.Filter{ResourceType: f.ResourceType, ResourceName: f.ResourceName, PatternType: f.ResourcePatternType,
			Principal: f.Principal, Host: f.Host, Operation: f.Operation, Permission: f.PermissionType}
		if why := af.Refusal(); why != "" {
			results[i].ErrorCode, results[i].ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(why)
			continue
		}
		valid = append(valid, af)
		at = append(at, i)
	}
	if len(valid) > 0 {
		matched, err := s.cfg.ACLs.DeleteACLs(ctx, valid)
		for j, i := range at {
			if err != nil {
				code, msg := s.adminStoreError("deleting ACLs", err)
				results[i].ErrorCode, results[i].ErrorMessage = code, kmsg.StringPtr(msg)
				continue
			}
			for _, b := range matched[j] {
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName, m.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
				m.Principal, m.Host, m.Operation, m.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
				results[i].MatchingACLs = append(results[i].MatchingACLs, m)
			}
		}
	}
	resp.Results = results
	return resp
}
