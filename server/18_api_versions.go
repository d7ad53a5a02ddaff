package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleApiVersions answers an ApiVersions request of a supported version
// with supportedAPIs. Versions this server does not know never get here:
// the reader answers them with apiVersionsUnsupported. No features are
// advertised: the APIs served need none (KIP-584).
func (s *Server) handleApiVersions(_ context.Context, req *kmsg.ApiVersionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = append([]kmsg.ApiVersionsResponseApiKey(nil), supportedAPIs...)
	return resp
}
