package server

import (
	"context"
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeController is a Controller elsewhere (or here, local) that answers
// forwarded CreateTopics itself, or fails.
type fakeController struct {
	local     bool
	fail      bool
	forwarded atomic.Int32
	principal atomic.Value // of the last Envelope
}

func (f *fakeController) Local() bool { return f.local }
func (f *fakeController) ID() int32   { return 9 }
func (f *fakeController) Forward(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	f.forwarded.Add(1)
	if f.fail {
		return nil, errors.New("controller down")
	}
	env := req.(*kmsg.EnvelopeRequest)
	inner, corr, _, err := decodeEnveloped(env.RequestData)
	if err != nil {
		return nil, err
	}
	var p kmsg.DefaultPrincipalData
	if err := p.ReadFrom(env.RequestPrincipal); err != nil {
		return nil, err
	}
	f.principal.Store(p.Type + ":" + p.Name)
	r := inner.(*kmsg.CreateTopicsRequest)
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.ErrorMessage = t.Topic, kmsg.StringPtr("created at the controller")
		resp.Topics = append(resp.Topics, rt)
	}
	data, err := appendResponse(nil, corr, r.IsFlexible(), resp)
	if err != nil {
		return nil, err
	}
	out := env.ResponseKind().(*kmsg.EnvelopeResponse)
	out.ResponseData = data[4:]
	return out, nil
}

// TestControllerForwarding: a catalog change sent to a sidecar that is not
// the controller is answered by the controller; NOT_CONTROLLER when the
// controller cannot be reached, and for a request another sidecar
// forwarded (no second hop); Metadata names the controller.
func TestControllerForwarding(t *testing.T) {
	fc := &fakeController{}
	ts := startServer(t, func(c *Config, _ *testServer) { c.Controller = fc })
	create := func(clientID string) *kmsg.CreateTopicsResponse {
		c := dialRaw(t, ts.Addr())
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = 5
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t", 1, 1
		req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
		f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
		c.write(f.AppendRequest(nil, req, 1))
		_, resp := c.recv(req)
		return resp.(*kmsg.CreateTopicsResponse)
	}
	r := create("app")
	if fc.forwarded.Load() != 1 || r.Topics[0].ErrorCode != 0 || *r.Topics[0].ErrorMessage != "created at the controller" {
		t.Fatalf("forwarded %d, answer %+v", fc.forwarded.Load(), r.Topics)
	}
	if p := fc.principal.Load(); p != AnonymousPrincipal {
		t.Fatalf("the envelope carries principal %v, want the client's, %s", p, AnonymousPrincipal)
	}
	if _, ok := ts.cat.Topic("t"); ok {
		t.Fatal("created locally too")
	}
	if r := create(PeerClientID); r.Topics[0].ErrorCode != kerr.NotController.Code || fc.forwarded.Load() != 1 {
		t.Fatalf("a forwarded request forwarded again: %+v (%d forwards)", r.Topics, fc.forwarded.Load())
	}
	fc.fail = true
	if r := create("app"); r.Topics[0].ErrorCode != kerr.NotController.Code {
		t.Fatalf("controller unreachable: %+v", r.Topics)
	}
	m := metadataAs(t, ts, "app", "t")
	if m.ControllerID != 9 {
		t.Fatalf("Metadata names controller %d, want 9", m.ControllerID)
	}
	fc.local = true
	if r := create("app"); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("at the controller: %+v", r.Topics)
	}
	if _, ok := ts.cat.Topic("t"); !ok {
		t.Fatal("the controller did not create the topic")
	}
}

// TestEnvelope: the controller answers a CreateTopics an Envelope carries
// as the client's (here without an authorizer: created, the answer
// inside with the inner request's correlation id); an Envelope carrying a
// request no sidecar forwards, a principal that does not decode or a
// client address of 5 bytes is INVALID_REQUEST, and nothing is created.
func TestEnvelope(t *testing.T) {
	ts := startServer(t, nil)
	c := dialRaw(t, ts.Addr())
	send := func(inner kmsg.Request, principal []byte, host []byte) *kmsg.EnvelopeResponse {
		t.Helper()
		env := kmsg.NewPtrEnvelopeRequest()
		if inner != nil {
			env.RequestData = kmsg.NewRequestFormatter(kmsg.FormatterClientID("app")).AppendRequest(nil, inner, 42)[4:]
		}
		env.RequestPrincipal, env.ClientHostAddress = principal, host
		c.write(kmsg.NewRequestFormatter().AppendRequest(nil, env, 1))
		_, resp := c.recv(env)
		return resp.(*kmsg.EnvelopeResponse)
	}
	create := func(topic string) *kmsg.CreateTopicsRequest {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = 7
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, -1
		req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
		return req
	}
	alice := (&kmsg.DefaultPrincipalData{Type: "User", Name: "alice"}).AppendTo(nil)
	localhost := []byte{127, 0, 0, 1}
	resp := send(create("enveloped"), alice, localhost)
	if resp.ErrorCode != 0 || len(resp.ResponseData) < 5 {
		t.Fatalf("envelope: %+v", resp)
	}
	inner := kmsg.NewPtrCreateTopicsResponse()
	inner.Version = 7
	if corr := int32(binary.BigEndian.Uint32(resp.ResponseData)); corr != 42 {
		t.Fatalf("inner correlation id %d, want 42", corr)
	}
	if err := inner.ReadFrom(resp.ResponseData[5:]); err != nil || inner.Topics[0].ErrorCode != 0 {
		t.Fatalf("inner answer %+v %v", inner, err)
	}
	if _, ok := ts.cat.Topic("enveloped"); !ok {
		t.Fatal("the enveloped CreateTopics created nothing")
	}
	for name, c := range map[string]struct {
		inner           kmsg.Request
		principal, host []byte
	}{
		"not forwarded":        {kmsg.NewPtrMetadataRequest(), alice, localhost},
		"a version not served": {&kmsg.CreateACLsRequest{Version: 0}, alice, localhost},
		"no request":           {nil, alice, localhost},
		"bad principal":        {create("bad-principal"), []byte{0, 0, 5}, localhost},
		"bad address":          {create("bad-address"), alice, []byte{1, 2, 3, 4, 5}},
	} {
		if r := send(c.inner, c.principal, c.host); r.ErrorCode != kerr.InvalidRequest.Code || r.ResponseData != nil {
			t.Errorf("%s: %+v, want INVALID_REQUEST", name, r)
		}
	}
	for _, n := range []string{"bad-principal", "bad-address"} {
		if _, ok := ts.cat.Topic(n); ok {
			t.Errorf("topic %s created", n)
		}
	}
}
