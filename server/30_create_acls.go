package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/acl"
)

// createACLsVersions: CreateAcls 1–3, Kafka 4.x's (KIP-896 removed v0).
var createACLsVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 30, MinVersion: 1, MaxVersion: 3}

// handleCreateAcls answers CreateAcls (KIP-11, KIP-290; SPEC §14, ACLs),
// at the controller in a cluster (forwarded, once this sidecar has
// checked the principal): one result per creation, in request order —
// without an authorizer SECURITY_DISABLED "No Authorizer is configured.",
// without ALTER on the cluster CLUSTER_AUTHORIZATION_FAILED, an entry
// Kafka refuses INVALID_REQUEST with Kafka's message (acl.Binding.Validate).
// The valid entries are written together (one group of records 117 on
// shard 0); one held already is kept, not written again.
func (s *Server) handleCreateAcls(ctx context.Context, req *kmsg.CreateACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	results := make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	failAll := func(code int16, msg string) kmsg.Response {
		for i := range results {
			results[i] = kmsg.NewCreateACLsResponseResult()
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
		return fwd // entries are written at the controller
	}
	var (
		valid []acl.Binding
		at    []int // the creation of each valid binding
	)
	for i, c := range req.Creations {
		results[i] = kmsg.NewCreateACLsResponseResult()
		b := acl.Binding{ResourceType: c.ResourceType, ResourceName: c.ResourceName, PatternType: c.ResourcePatternType,
			Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType}
		if why := b.Refusal(); why != "" {
			results[i].ErrorCode, results[i].ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(why)
			continue
		}
		valid = append(valid, b)
		at = append(at, i)
	}
	if len(valid) > 0 {
		if err := s.cfg.ACLs.CreateACLs(ctx, valid); err != nil {
			code, msg := s.adminStoreError("creating ACLs", err)
			for _, i := range at {
				results[i].ErrorCode, results[i].ErrorMessage = code, kmsg.StringPtr(msg)
			}
		}
	}
	resp.Results = results
	return resp
}
