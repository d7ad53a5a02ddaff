package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// findCoordinatorVersions: FindCoordinator 0–6, as Kafka 4.x; v4+ batch
// keys (KIP-699).
var findCoordinatorVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 10, MinVersion: 0, MaxVersion: 6}

// Coordinator types of FindCoordinator.
const (
	coordinatorTypeGroup       int8 = 0
	coordinatorTypeTransaction int8 = 1
)

// handleFindCoordinator answers FindCoordinator. A group's coordinator is
// the sidecar hosting the group's shard (diskless.GroupShardFor; DESIGN
// §Consumer groups): this node without a Cluster, else the shard's owner
// the Cluster names (COORDINATOR_NOT_AVAILABLE, retriable, while none is
// known). While this sidecar's membership has lapsed (Cluster.Lapsed) and
// its last view names others, it does not name itself: a shard its last
// view places elsewhere is named there, one placed on itself answers
// COORDINATOR_NOT_AVAILABLE — it may be cut off from Kafka, and the
// others may have taken the shard over (as Metadata leaves it out: DESIGN
// §Membership, "Seen by clients while unconfirmed"). A transactional
// id's coordinator is found alike, its shard
// diskless.GroupShardFor of the id (DESIGN §Transactions), when a
// transaction coordinator is configured (Config.Transactions); without
// one COORDINATOR_NOT_AVAILABLE, which clients retry; other key types
// INVALID_REQUEST. With no group coordinator configured every key gets
// COORDINATOR_NOT_AVAILABLE.
func (s *Server) handleFindCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	host, port := s.advertised(ctx)
	answer := func(key string) kmsg.FindCoordinatorResponseCoordinator {
		c := kmsg.FindCoordinatorResponseCoordinator{Key: key, NodeID: -1, Host: "", Port: -1}
		var err *kerr.Error
		switch {
		case req.CoordinatorType == coordinatorTypeTransaction && s.cfg.Transactions == nil:
			err = kerr.CoordinatorNotAvailable
		case req.CoordinatorType != coordinatorTypeGroup && req.CoordinatorType != coordinatorTypeTransaction:
			err = kerr.InvalidRequest
		case s.cfg.Groups == nil:
			err = kerr.CoordinatorNotAvailable
		}
		if err != nil {
			c.ErrorCode = err.Code
			msg := err.Description
			c.ErrorMessage = &msg
			return c
		}
		if s.cfg.Cluster != nil {
			owner, ok := s.cfg.Cluster.Owner(diskless.GroupShardFor(key, s.cfg.Groups.NumShards()))
			if ok && owner.NodeID == s.cfg.NodeID {
				_, lapsed := s.lapsedOthers(s.cfg.Cluster.Sidecars())
				ok = !lapsed
			}
			if !ok {
				c.ErrorCode = kerr.CoordinatorNotAvailable.Code
				msg := kerr.CoordinatorNotAvailable.Description
				c.ErrorMessage = &msg
				return c
			}
			c.Host, c.Port = addrFor(ctx, owner)
			c.NodeID = owner.NodeID
			return c
		}
		c.NodeID, c.Host, c.Port = s.cfg.NodeID, host, port
		return c
	}
	if req.Version >= 4 {
		for _, k := range req.CoordinatorKeys {
			resp.Coordinators = append(resp.Coordinators, answer(k))
		}
		return resp
	}
	c := answer(req.CoordinatorKey)
	resp.ErrorCode, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.NodeID, c.Host, c.Port
	if req.Version >= 1 {
		resp.ErrorMessage = c.ErrorMessage
	}
	return resp
}
