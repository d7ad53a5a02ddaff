package server

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/group"
)

// Groups is the consumer-group coordinator (the coordinator shards, each
// hosting the groups that hash to it: DESIGN §Consumer groups). Its
// methods take one group's request (topics named: the handlers resolve
// topic ids) and return its answer; an error means the shard could not
// answer: diskless.ErrClosed (the coordinator is stopping) and
// diskless.ErrShardFenced (another sidecar took the shard over) and
// diskless.ErrNotConfirmed (its log could not confirm it had not), answered
// NOT_COORDINATOR so the client looks it up again; diskless.ErrShardLoading
// (the shard is loading its state), COORDINATOR_LOAD_IN_PROGRESS, which
// the client retries on the same coordinator; anything else
// COORDINATOR_NOT_AVAILABLE (retriable). The methods taking code answer
// the groups of a shard that failed with code(err). All are safe for
// concurrent use.
type Groups interface {
	JoinGroup(ctx context.Context, req *kmsg.JoinGroupRequest, clientID, clientHost string) (*kmsg.JoinGroupResponse, error)
	SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) (*kmsg.SyncGroupResponse, error)
	Heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) (*kmsg.HeartbeatResponse, error)
	LeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) (*kmsg.LeaveGroupResponse, error)
	// CommitOffsets returns the answer and nil once the offsets are
	// durable; the answer with an error when their write failed; nil and
	// an error when the shard did not take the request.
	CommitOffsets(ctx context.Context, req *kmsg.OffsetCommitRequest) (*kmsg.OffsetCommitResponse, error)
	FetchOffsets(ctx context.Context, req group.FetchRequest, requireStable bool) (kmsg.OffsetFetchResponseGroup, error)
	DeleteOffsets(ctx context.Context, req *kmsg.OffsetDeleteRequest) (*kmsg.OffsetDeleteResponse, error)
	DeleteGroups(ctx context.Context, groups []string, code func(error) int16) []kmsg.DeleteGroupsResponseGroup
	// ListGroups returns every group of every shard that could answer,
	// and the first error of one that could not.
	ListGroups(ctx context.Context, req *kmsg.ListGroupsRequest) ([]kmsg.ListGroupsResponseGroup, error)
	DescribeGroups(ctx context.Context, version int16, groups []string, code func(error) int16) []kmsg.DescribeGroupsResponseGroup
	ConsumerGroupHeartbeat(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest, clientID, clientHost string) (*kmsg.ConsumerGroupHeartbeatResponse, error)
	ConsumerGroupDescribe(ctx context.Context, groups []string, code func(error) int16) []kmsg.ConsumerGroupDescribeResponseGroup
	// HasGroups reports whether any group holds committed offsets
	// (Metadata then lists __consumer_offsets).
	HasGroups() bool
	// NumShards is the number of coordinator shards, the partitions
	// Metadata gives __consumer_offsets (one per shard, as Kafka's
	// partitions of it are its group coordinators).
	NumShards() int32
}

// offsetsTopic is the internal topic Kafka keeps committed offsets in.
// The sidecar keeps them in the coordinator shards' metadata logs, but
// lists the topic in Metadata once a group committed offsets, as Kafka
// does once the topic exists (tools expect it): internal, one partition
// per shard, led by this node, with no data of its own.
const offsetsTopic = "__consumer_offsets"

// offsetsTopicMetadata returns __consumer_offsets' Metadata entry, or
// false while no group holds offsets (or there is no group coordinator).
func (s *Server) offsetsTopicMetadata(ctx context.Context, req *kmsg.MetadataRequest, l leaders) (kmsg.MetadataResponseTopic, bool) {
	if s.cfg.Groups == nil || !s.cfg.Groups.HasGroups() {
		return kmsg.MetadataResponseTopic{}, false
	}
	mt := s.metadataTopic(ctx, req, diskless.Topic{Name: offsetsTopic, Partitions: s.cfg.Groups.NumShards()}, l)
	mt.IsInternal = true
	return mt, true
}

// groupErrCode is the code a group request gets when the coordinator
// could not answer it (Groups).
func groupErrCode(err error) int16 {
	switch {
	case errors.Is(err, diskless.ErrClosed), errors.Is(err, diskless.ErrShardFenced), errors.Is(err, diskless.ErrNotCoordinator),
		errors.Is(err, diskless.ErrNotConfirmed):
		// Stopping, or the shard is hosted by another sidecar (it moved,
		// or another took it over), or its log could not confirm that it
		// was not (cut off from Kafka): the client looks the coordinator
		// up again, as from a Kafka broker that lost its partition of
		// __consumer_offsets.
		return kerr.NotCoordinator.Code
	case errors.Is(err, diskless.ErrShardLoading):
		// The shard is being taken over here, or rebuilds its state after
		// a failed write: retriable, same coordinator.
		return kerr.CoordinatorLoadInProgress.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}

// clientKey is the context key of the requesting client's identity.
type clientKey struct{}

// client is what JoinGroup and ConsumerGroupHeartbeat record of a member:
// its client id and host as Kafka reports them ("/" and the address).
type client struct{ id, host string }

func withClient(ctx context.Context, id, remote string) context.Context {
	return context.WithValue(ctx, clientKey{}, client{id: id, host: "/" + hostOf(remote)})
}

func clientOf(ctx context.Context) client {
	c, _ := ctx.Value(clientKey{}).(client)
	return c
}

// hostOf strips the port of a host:port.
func hostOf(addr string) string {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			h := addr[:i]
			if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
				h = h[1 : len(h)-1]
			}
			return h
		}
	}
	return addr
}

// parkedContext is ctx also cancelled when the server starts draining: a
// JoinGroup or SyncGroup parked in a rebalance is then answered at once
// (NOT_COORDINATOR, as Kafka answers when its coordinator unloads) instead
// of holding Shutdown up to the rebalance timeout.
func (s *Server) parkedContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.draining, cancel)
	return ctx, func() { stop(); cancel() }
}

// parkedErrCode is groupErrCode for a parked call, whose context is
// cancelled by draining.
func (s *Server) parkedErrCode(err error) int16 {
	if s.draining.Err() != nil {
		return kerr.NotCoordinator.Code
	}
	return groupErrCode(err)
}
