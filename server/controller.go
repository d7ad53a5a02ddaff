package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// Controller is where a cluster's topic catalog is written: the sidecar
// hosting coordinator shard 0 (DESIGN §Shard placement), which Metadata
// names as the controller. The admin requests that change the catalog —
// CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
// IncrementalAlterConfigs, and a Metadata request's auto-creation — and
// AlterUserScramCredentials (the credentials are shard 0's too) are
// answered there: another sidecar forwards them as they are and relays
// the answer, as a Kafka broker forwards them to its controller (KIP-590),
// so clients need not find it.
type Controller interface {
	// Local reports whether this sidecar writes the catalog.
	Local() bool
	// ID returns the node id of the sidecar that does, −1 while none is
	// known.
	ID() int32
	// Forward sends req to that sidecar and returns its answer.
	Forward(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// PeerClientID is the client id of the requests one sidecar sends
// another (package peer's default).
const PeerClientID = "diskless-sidecar"

// forwardAdmin forwards req to the controller when another sidecar is it
// and returns its answer, or, when that fails, req's answer with
// NOT_CONTROLLER (41) for every topic or resource — retriable: clients
// refresh their metadata, which names the controller, and send again.
// ok is false when this sidecar answers req itself.
func (s *Server) forwardAdmin(ctx context.Context, req kmsg.Request) (resp kmsg.Response, ok bool) {
	c := s.cfg.Controller
	if c == nil || c.Local() {
		return nil, false
	}
	if enveloped(ctx) || clientOf(ctx).id == PeerClientID {
		// Forwarded by another sidecar that takes this one for the
		// controller: no second hop (two that disagree would pass it
		// back and forth); it retries once the placement settles.
		return notController(req), true
	}
	resp, err := s.forward(ctx, req)
	var kErr *kerr.Error
	switch {
	case err == nil:
		return resp, true
	case errors.As(err, &kErr) && kErr != kerr.NotController:
		// The controller refused the envelope (the forwarding sidecar
		// lacks CLUSTER_ACTION): the client gets that error, as
		// Kafka's forwarding answers it.
		s.rl.Log(ctx, slog.LevelWarn, "controller", "the controller refused a forwarded admin request",
			slog.String("api", nameForKey(req.Key())), slog.Int("controller", int(c.ID())), slog.Any("err", err))
		return adminError(req, kErr), true
	}
	s.rl.Log(ctx, slog.LevelWarn, "controller", "forwarding an admin request to the controller failed; answering NOT_CONTROLLER",
		slog.String("api", nameForKey(req.Key())), slog.Int("controller", int(c.ID())), slog.Any("err", err))
	return notController(req), true
}

// forward sends req, from the client of ctx, to the controller in an
// Envelope carrying the client's principal and address (58_envelope.go),
// so that the controller checks the client, not this sidecar, and returns
// the answer inside.
func (s *Server) forward(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	raw, err := s.cfg.Controller.Forward(ctx, envelope(ctx, req))
	if err != nil {
		return nil, err
	}
	env, ok := raw.(*kmsg.EnvelopeResponse)
	if !ok {
		return nil, fmt.Errorf("a %s answer to an Envelope", nameForKey(raw.Key()))
	}
	return unwrapEnvelope(req, env)
}

// notController is req's answer with NOT_CONTROLLER for everything it
// names.
func notController(req kmsg.Request) kmsg.Response { return adminError(req, kerr.NotController) }

// adminError is req's answer with err for everything it names.
func adminError(req kmsg.Request, err *kerr.Error) kmsg.Response {
	code := err.Code
	msg := kmsg.StringPtr(err.Description)
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, msg
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.DeleteTopicsRequest:
		resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
		for _, n := range r.TopicNames {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = kmsg.StringPtr(n), code, msg
			resp.Topics = append(resp.Topics, rt)
		}
		for _, t := range r.Topics {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode, rt.ErrorMessage = t.Topic, t.TopicID, code, msg
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.CreatePartitionsRequest:
		resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, msg
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.AlterConfigsRequest:
		resp := r.ResponseKind().(*kmsg.AlterConfigsResponse)
		for _, rs := range r.Resources {
			rr := kmsg.NewAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = rs.ResourceType, rs.ResourceName, code, msg
			resp.Resources = append(resp.Resources, rr)
		}
		return resp
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
		seen := map[string]bool{}
		for _, n := range slices.Concat(namesOf(r.Deletions, func(d kmsg.AlterUserSCRAMCredentialsRequestDeletion) string { return d.Name }),
			namesOf(r.Upsertions, func(u kmsg.AlterUserSCRAMCredentialsRequestUpsertion) string { return u.Name })) {
			if !seen[n] {
				seen[n] = true
				rr := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
				rr.User, rr.ErrorCode, rr.ErrorMessage = n, code, msg
				resp.Results = append(resp.Results, rr)
			}
		}
		return resp
	case *kmsg.CreateACLsRequest:
		resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
		for range r.Creations {
			rr := kmsg.NewCreateACLsResponseResult()
			rr.ErrorCode, rr.ErrorMessage = code, msg
			resp.Results = append(resp.Results, rr)
		}
		return resp
	case *kmsg.DeleteACLsRequest:
		resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
		for range r.Filters {
			rr := kmsg.NewDeleteACLsResponseResult()
			rr.ErrorCode, rr.ErrorMessage = code, msg
			resp.Results = append(resp.Results, rr)
		}
		return resp
	case *kmsg.IncrementalAlterConfigsRequest:
		resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		for _, rs := range r.Resources {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = rs.ResourceType, rs.ResourceName, code, msg
			resp.Resources = append(resp.Resources, rr)
		}
		return resp
	}
	return nil
}

// namesOf maps each element of xs to its name.
func namesOf[T any](xs []T, name func(T) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = name(x)
	}
	return out
}

// controllerID is the controller Metadata and DescribeCluster name: this
// sidecar alone, else the Controller's (this one while none is known).
func (s *Server) controllerID() int32 {
	if c := s.cfg.Controller; c != nil {
		if id := c.ID(); id >= 0 {
			return id
		}
	}
	return s.cfg.NodeID
}

// controllerAmong is controllerID as Metadata and DescribeCluster name it
// to a client told of brokers: while this sidecar's membership has lapsed
// (Cluster.Lapsed), when it is this sidecar, which the brokers then leave
// out, the first of them — Kafka names a live broker, and any sidecar
// forwards what only the controller does (SPEC §6).
func (s *Server) controllerAmong(brokers []diskless.Sidecar) int32 {
	id := s.controllerID()
	if s.cfg.Cluster == nil || !s.cfg.Cluster.Lapsed() {
		return id
	}
	if len(brokers) > 0 && !slices.ContainsFunc(brokers, func(sc diskless.Sidecar) bool { return sc.NodeID == id }) {
		return brokers[0].NodeID
	}
	return id
}

// forwardAutoCreate asks the controller to create topic name for a
// Metadata request's auto-creation (num.partitions, default configs, as
// the controller's CreateTopics with −1 partitions does). It reports
// whether the request was answered without error, topic already existing
// included.
func (s *Server) forwardAutoCreate(ctx context.Context, name string) bool {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
	req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	resp, err := s.forward(ctx, req)
	if err != nil {
		return false
	}
	cr, ok := resp.(*kmsg.CreateTopicsResponse)
	if !ok || len(cr.Topics) != 1 {
		return false
	}
	code := cr.Topics[0].ErrorCode
	return code == 0 || code == kerr.TopicAlreadyExists.Code
}
