package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// saslHandshakeVersions: SaslHandshake 0–1, as Kafka 4.x; v0 is followed
// by bare mechanism messages, v1 by SaslAuthenticate (KIP-152).
var saslHandshakeVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 17, MinVersion: 0, MaxVersion: 1}

// handleSaslHandshake answers a SaslHandshake that no SASL authentication
// takes (sasl.go takes those of SASL listeners while authenticating or to
// re-authenticate): on a PLAINTEXT or SSL listener, or a v0 after
// authentication, ILLEGAL_SASL_STATE, as Kafka's KafkaApis answers it.
func (s *Server) handleSaslHandshake(_ context.Context, req *kmsg.SASLHandshakeRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	return resp
}
