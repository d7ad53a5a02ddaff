package peer

import (
	"context"
	"fmt"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// Members is the cluster's live sidecars (DESIGN §Membership).
type Members interface {
	// Members returns every live sidecar, this one included, by node id.
	Members() []diskless.Sidecar
}

// TopicDisabler is this sidecar's own part of a topic's disablement
// (SPEC §10).
type TopicDisabler interface {
	DisableTopic(ctx context.Context, req diskless.DisableTopicRequest) error
}

// Sidecars reaches every live sidecar for a topic's disablement
// (coordinator.Sidecars): DisklessDisableTopic (API key 109) to each
// other member, the local call for this one.
type Sidecars struct {
	self    int32
	members Members
	local   TopicDisabler
	client  *Client
}

// NewSidecars returns the Sidecars of the sidecar with node id self.
func NewSidecars(self int32, members Members, local TopicDisabler, client *Client) *Sidecars {
	return &Sidecars{self: self, members: members, local: local, client: client}
}

// Nodes returns the node ids of the live sidecars.
func (s *Sidecars) Nodes() []int32 {
	ms := s.members.Members()
	out := make([]int32, len(ms))
	for i, m := range ms {
		out[i] = m.NodeID
	}
	return out
}

// DisableTopic asks sidecar node to take its part of the disablement and
// returns nil once it confirmed, with its answer for the topic's shards
// it hosts (none for this sidecar: its coordinator reads its own). A node
// that is no longer a member is an error: the caller sends again on its
// next pass, to the members then.
func (s *Sidecars) DisableTopic(ctx context.Context, node int32, req diskless.DisableTopicRequest) (diskless.DisableTopicResult, error) {
	if node == s.self {
		return diskless.DisableTopicResult{}, s.local.DisableTopic(ctx, req)
	}
	for _, m := range s.members.Members() {
		if m.NodeID == node {
			return s.client.disableTopic(ctx, m.Addr(), req)
		}
	}
	return diskless.DisableTopicResult{}, fmt.Errorf("peer: sidecar %d is not a member of the cluster", node)
}
