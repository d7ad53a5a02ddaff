package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// saslAuthenticateVersions: SaslAuthenticate 0–2, as Kafka 4.x (v1 adds
// the session lifetime, KIP-368; v2 is flexible).
var saslAuthenticateVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 36, MinVersion: 0, MaxVersion: 2}

// handleSaslAuthenticate answers a SaslAuthenticate outside an
// authentication (sasl.go takes those): ILLEGAL_SASL_STATE with Kafka's
// message.
func (s *Server) handleSaslAuthenticate(_ context.Context, req *kmsg.SASLAuthenticateRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate request received after successful authentication")
	return resp
}
