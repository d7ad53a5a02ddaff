package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// envelopeVersions: Envelope 0, Kafka's one version (KIP-590).
var envelopeVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 58, MinVersion: 0, MaxVersion: 0}

// forwardedKeys are the requests a sidecar forwards to the controller,
// each in an Envelope (forwardAdmin), and the only ones an Envelope may
// carry.
var forwardedKeys = []int16{
	createTopicsVersions.ApiKey, deleteTopicsVersions.ApiKey, createPartitionsVersions.ApiKey,
	alterConfigsVersions.ApiKey, incrementalAlterConfigsVersions.ApiKey,
	alterUserScramCredentialsVersions.ApiKey, createACLsVersions.ApiKey, deleteACLsVersions.ApiKey,
}

// innerRoute is routeFor, set by init: routes holds handleEnvelope, which
// routes what an Envelope carries.
var innerRoute func(key int16) (route, bool)

func init() { innerRoute = routeFor }

// envelopedKey marks the context of a request an Envelope carried: it is
// never forwarded again.
type envelopedKey struct{}

// handleEnvelope answers Envelope (KIP-590; SPEC §14, Inter-sidecar
// traffic): a request another sidecar forwards to this one, the
// controller, with the principal and address of the client that sent it.
// The gate has checked CLUSTER_ACTION on the cluster for the sender (the
// forwarding sidecar's principal); the request inside is then checked and
// answered as the client's — its principal, its host, its client id —
// through the same gate and handler as on a connection of its own, and
// its answer (header and body) returned in ResponseData. An Envelope whose
// principal or request does not decode, or carries a request no sidecar
// forwards or of a version this server does not serve, is answered
// INVALID_REQUEST.
func (s *Server) handleEnvelope(ctx context.Context, req *kmsg.EnvelopeRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.EnvelopeResponse)
	inner, corr, clientID, err := decodeEnveloped(req.RequestData)
	if err == nil && !slices.Contains(forwardedKeys, inner.Key()) {
		err = fmt.Errorf("%s is not forwarded", nameForKey(inner.Key()))
	}
	if err == nil {
		if lo, hi, _ := s.versionRange(inner.Key()); inner.GetVersion() < lo || inner.GetVersion() > hi {
			err = fmt.Errorf("%s v%d is not served", nameForKey(inner.Key()), inner.GetVersion())
		}
	}
	var principal kmsg.DefaultPrincipalData
	if err == nil {
		if err = principal.ReadFrom(req.RequestPrincipal); err == nil && (principal.Type == "" || principal.Name == "") {
			err = fmt.Errorf("empty principal")
		}
	}
	host, ok := netip.AddrFromSlice(req.ClientHostAddress)
	if err == nil && !ok {
		err = fmt.Errorf("client host address of %d bytes", len(req.ClientHostAddress))
	}
	if err != nil {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	ictx := context.WithValue(ctx, principalKey{}, &principalBox{name: principal.Type + ":" + principal.Name})
	ictx = context.WithValue(ictx, clientKey{}, client{id: clientID, host: "/" + host.Unmap().String()})
	ictx = context.WithValue(ictx, envelopedKey{}, true)
	rt, _ := innerRoute(inner.Key())
	out := rt.async(s, ictx, inner)
	if out == nil {
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp
	}
	out.SetVersion(inner.GetVersion())
	data, err := appendResponse(nil, corr, inner.IsFlexible(), out)
	if err != nil {
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp
	}
	resp.ResponseData = data[4:] // without the frame's size
	return resp
}

// enveloped reports whether the request of ctx came in an Envelope.
func enveloped(ctx context.Context) bool {
	v, _ := ctx.Value(envelopedKey{}).(bool)
	return v
}

// decodeEnveloped reads an Envelope's RequestData: a request header (v1,
// or v2 for a flexible version) and body, of a version this server
// serves.
func decodeEnveloped(data []byte) (req kmsg.Request, corr int32, clientID string, err error) {
	if len(data) < minRequestFrame {
		return nil, 0, "", fmt.Errorf("request data of %d bytes", len(data))
	}
	h := parseFixedHeader(data)
	req = requestForKey(h.key)
	if req == nil || h.version < 0 || h.version > req.MaxVersion() {
		return nil, 0, "", fmt.Errorf("api key %d v%d", h.key, h.version)
	}
	req.SetVersion(h.version)
	id, body, err := parseHeaderRest(data, req.IsFlexible())
	if err != nil {
		return nil, 0, "", err
	}
	if err := req.ReadFrom(body); err != nil {
		return nil, 0, "", err
	}
	if id != nil {
		clientID = *id
	}
	return req, h.correlationID, clientID, nil
}

// envelope wraps req, sent by the client of ctx, for the controller: its
// header (the client's client id) and body, the principal of ctx as Kafka
// serializes it (DefaultPrincipalData v0, version-prefixed), the client's
// IP address (4 or 16 bytes).
func envelope(ctx context.Context, req kmsg.Request) *kmsg.EnvelopeRequest {
	data := kbin.AppendInt16(nil, req.Key())
	data = kbin.AppendInt16(data, req.GetVersion())
	data = kbin.AppendInt32(data, 0)
	c := clientOf(ctx)
	data = kbin.AppendNullableString(data, &c.id)
	if req.IsFlexible() {
		data = append(data, 0)
	}
	data = req.AppendTo(data)

	p := PrincipalOf(ctx)
	if p == "" {
		p = AnonymousPrincipal
	}
	typ, name, _ := strings.Cut(p, ":")
	pd := kmsg.DefaultPrincipalData{Type: typ, Name: name}
	env := kmsg.NewPtrEnvelopeRequest()
	env.RequestData, env.RequestPrincipal = data, pd.AppendTo(nil)
	if a, err := netip.ParseAddr(strings.TrimPrefix(c.host, "/")); err == nil {
		env.ClientHostAddress = a.AsSlice()
	} else {
		env.ClientHostAddress = []byte{0, 0, 0, 0}
	}
	return env
}

// unwrapEnvelope reads the answer to req from an Envelope's answer: the
// envelope's own error (for the whole of req, as Kafka's forwarding
// answers it), or the response header and body of ResponseData.
func unwrapEnvelope(req kmsg.Request, env *kmsg.EnvelopeResponse) (kmsg.Response, error) {
	if env.ErrorCode != 0 {
		return nil, kerr.ErrorForCode(env.ErrorCode)
	}
	b := env.ResponseData
	if len(b) < 4 {
		return nil, fmt.Errorf("envelope answer of %d bytes", len(b))
	}
	_ = binary.BigEndian.Uint32(b) // correlation id
	rd := kbin.Reader{Src: b[4:]}
	if req.IsFlexible() {
		kmsg.SkipTags(&rd)
	}
	if err := rd.Complete(); err != nil {
		return nil, fmt.Errorf("envelope answer: bad header")
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(rd.Src); err != nil {
		return nil, fmt.Errorf("envelope answer: %w", err)
	}
	return resp, nil
}
