package server

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// describeUserScramCredentialsVersions: DescribeUserScramCredentials 0,
// all of Kafka 4.x's (KIP-554).
var describeUserScramCredentialsVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 50, MinVersion: 0, MaxVersion: 0}

// handleDescribeUserScramCredentials answers DescribeUserScramCredentials
// (KIP-554) from the credentials this sidecar holds (shard 0, here or its
// replica; SPEC §14, SCRAM), as Kafka's broker answers it from its
// metadata image: no users named (null or empty) lists every user with a
// credential; a user named twice gets one result, DUPLICATE_RESOURCE
// "Cannot describe SCRAM credentials for the same user twice in a single
// request: <user>"; a user without a credential RESOURCE_NOT_FOUND
// "Attempt to describe a user credential that does not exist: <user>".
// Each result lists mechanisms and iteration counts only, never salts or
// keys. Error messages are empty, not null, where there is no error, as
// Kafka's. Results are sorted by user (Kafka's follow a hash map's order).
func (s *Server) handleDescribeUserScramCredentials(_ context.Context, req *kmsg.DescribeUserSCRAMCredentialsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	resp.ErrorMessage = kmsg.StringPtr("") // Kafka's: empty, not null
	var users map[string][]diskless.ScramCredential
	if s.cfg.Scram != nil {
		users = s.cfg.Scram.ScramUsers()
	}
	named := map[string]bool{} // user → named twice
	if len(req.Users) == 0 {
		for u := range users {
			named[u] = false
		}
	} else {
		for _, u := range req.Users {
			_, seen := named[u.Name]
			named[u.Name] = seen
		}
	}
	names := make([]string, 0, len(named))
	for u := range named {
		names = append(names, u)
	}
	slices.Sort(names)
	for _, u := range names {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorMessage = u, kmsg.StringPtr("")
		switch creds, ok := users[u]; {
		case named[u]:
			r.ErrorCode = kerr.DuplicateResource.Code
			r.ErrorMessage = kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + u)
		case !ok:
			r.ErrorCode = kerr.ResourceNotFound.Code
			r.ErrorMessage = kmsg.StringPtr("Attempt to describe a user credential that does not exist: " + u)
		default:
			for _, c := range creds {
				ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				ci.Mechanism, ci.Iterations = int8(c.Mechanism), c.Iterations
				r.CredentialInfos = append(r.CredentialInfos, ci)
			}
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}
