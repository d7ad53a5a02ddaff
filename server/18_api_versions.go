package server

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiVersionsVersions: ApiVersions 0–4. v5 (KIP-1242) adds cluster and
// node checks, not implemented; clients asking v5 get UNSUPPORTED_VERSION
// with this range (apiVersionsUnsupported) and retry at 4.
var apiVersionsVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: apiVersionsKey, MinVersion: 0, MaxVersion: 4}

// handleApiVersions answers an ApiVersions request of a supported version
// with the table New derived (Server.apis). Versions this server does not
// know never get here:
// the reader answers them with apiVersionsUnsupported. No features are
// advertised: the APIs served need none (KIP-584).
func (s *Server) handleApiVersions(_ context.Context, req *kmsg.ApiVersionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = slices.Clone(s.apis)
	return resp
}
