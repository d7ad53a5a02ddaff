package server

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
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
//
// From v3 the request names the client's software (KIP-511); a name or
// version outside softwareNameOK's pattern gets INVALID_REQUEST and no API
// keys, as Kafka 4.4 answers (e2e.TestApiVersionsClientSoftwareMatchesKafka),
// and the connection goes on.
func (s *Server) handleApiVersions(_ context.Context, req *kmsg.ApiVersionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if req.Version >= 3 && (!softwareNameOK(req.ClientSoftwareName) || !softwareNameOK(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	resp.ApiKeys = slices.Clone(s.apis)
	return resp
}

// softwareNameOK reports whether s matches KIP-511's pattern for a client
// software name or version, [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?:
// ASCII letters, digits, '-' and '.', starting and ending with a letter or
// digit, not empty.
func softwareNameOK(s string) bool {
	if s == "" {
		return false
	}
	alnum := func(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' }
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && ((c != '-' && c != '.') || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}
