package server

import (
	"context"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// Cluster is the sidecars of this one's cluster, as Metadata,
// DescribeCluster and FindCoordinator name them to clients (DESIGN
// §Membership). The membership implements it.
type Cluster interface {
	// Sidecars returns the live sidecars by node id, this one included
	// (those of the last view while it is unconfirmed: DESIGN
	// §Membership), or nil while this sidecar is not in the cluster's
	// view (then it names itself alone: a sidecar it cannot see may be
	// gone).
	Sidecars() []diskless.Sidecar
	// Owner returns the sidecar hosting a coordinator shard, and whether
	// one is known (FindCoordinator answers the owner of the group's
	// shard).
	Owner(shard int32) (diskless.Sidecar, bool)
	// Lapsed reports whether Kafka has answered nothing of this
	// sidecar's membership for a session timeout
	// (membership.View.Lapsed): it may be cut off, and the others may
	// have moved on without it. Metadata and DescribeCluster then leave
	// it out while its last view names others, as Kafka leaves out a
	// broker fenced for lapsed heartbeats to the controller (DESIGN
	// §Membership, "Seen by clients while unconfirmed").
	Lapsed() bool
}

// ZoneCIDR maps client addresses to a zone: one entry of
// diskless.client.zone.cidrs.
type ZoneCIDR struct {
	Zone   string
	Prefix netip.Prefix
}

// ParseZoneCIDRs parses diskless.client.zone.cidrs: a comma-separated
// list of zone=CIDR pairs (a zone may come several times, e.g.
// "a=10.0.0.0/24,a=10.0.1.0/24,b=10.1.0.0/16"); "" is none. Errors name
// the pair.
func ParseZoneCIDRs(s string) ([]ZoneCIDR, error) {
	var out []ZoneCIDR
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		zone, cidr, ok := strings.Cut(pair, "=")
		zone, cidr = strings.TrimSpace(zone), strings.TrimSpace(cidr)
		if !ok || zone == "" {
			return nil, fmt.Errorf("%q: want zone=CIDR", pair)
		}
		p, err := netip.ParsePrefix(cidr)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", pair, err)
		}
		out = append(out, ZoneCIDR{Zone: zone, Prefix: p.Masked()})
	}
	return out, nil
}

// zoneHint is the client.id marker naming a client's zone, as
// client.rack names it to a broker (SPEC §6, Metadata).
const zoneHint = "diskless_az="

// zoneOf returns a client's zone: the value after diskless_az= in its
// client id (up to a ',', ';', '&' or space), else the zone of the
// longest prefix of diskless.client.zone.cidrs holding its address, else
// "" (unknown).
func (s *Server) zoneOf(c client) string {
	if i := strings.Index(c.id, zoneHint); i >= 0 {
		z := c.id[i+len(zoneHint):]
		if j := strings.IndexAny(z, ",;& "); j >= 0 {
			z = z[:j]
		}
		if z != "" {
			return z
		}
	}
	if len(s.cfg.ClientZones) == 0 {
		return ""
	}
	addr, err := netip.ParseAddr(strings.TrimPrefix(c.host, "/"))
	if err != nil {
		return ""
	}
	addr = addr.Unmap()
	best, zone := -1, ""
	for _, zc := range s.cfg.ClientZones {
		if zc.Prefix.Contains(addr) && zc.Prefix.Bits() > best {
			best, zone = zc.Prefix.Bits(), zc.Zone
		}
	}
	return zone
}

// sidecars returns the sidecars Metadata names: the cluster's live ones,
// or this one alone (without a cluster, or while it is not a member),
// each at the address of the listener the client of ctx connected to.
// While this sidecar's membership has lapsed (Cluster.Lapsed) it names
// the others of its last view without itself, when there are any: a
// client that still reaches it is sent to a sidecar that may still
// commit, rather than to one that may be cut off from Kafka (its
// Produce would wait for its request's timeout).
func (s *Server) sidecars(ctx context.Context) []diskless.Sidecar {
	if s.cfg.Cluster != nil {
		if ss := s.cfg.Cluster.Sidecars(); len(ss) > 0 {
			if others, ok := s.lapsedOthers(ss); ok {
				ss = others
			}
			if l := listenerOf(ctx); l != nil {
				ss = slices.Clone(ss)
				for i := range ss {
					ss[i].Host, ss[i].Port = ss[i].Listener(l.Name)
				}
			}
			return ss
		}
	}
	host, port := s.advertised(ctx)
	return []diskless.Sidecar{{NodeID: s.cfg.NodeID, Host: host, Port: port, Rack: s.cfg.Rack}}
}

// lapsedOthers returns the sidecars of ss other than this one, and true,
// while this sidecar's membership has lapsed (Cluster.Lapsed) and ss
// names others: Metadata, DescribeCluster and FindCoordinator then do not
// name it. Otherwise it returns nil, false.
func (s *Server) lapsedOthers(ss []diskless.Sidecar) ([]diskless.Sidecar, bool) {
	if s.cfg.Cluster == nil || !s.cfg.Cluster.Lapsed() {
		return nil, false
	}
	others := slices.DeleteFunc(slices.Clone(ss), func(sc diskless.Sidecar) bool { return sc.NodeID == s.cfg.NodeID })
	return others, len(others) > 0
}

// addrFor is where the client of ctx reaches sc: the advertised address
// of sc's listener of the name the client connected to.
func addrFor(ctx context.Context, sc diskless.Sidecar) (string, int32) {
	if l := listenerOf(ctx); l != nil {
		return sc.Listener(l.Name)
	}
	return sc.Host, sc.Port
}

// leaders chooses partition leaders for a client in zone among ss: the
// sidecars of the zone when there are any, else all of them (SPEC §6,
// Metadata).
type leaders struct{ among []diskless.Sidecar }

func newLeaders(ss []diskless.Sidecar, zone string) leaders {
	if zone != "" {
		var in []diskless.Sidecar
		for _, sc := range ss {
			if sc.Rack == zone {
				in = append(in, sc)
			}
		}
		if len(in) > 0 {
			return leaders{in}
		}
	}
	return leaders{ss}
}

// of returns the node id leading a partition: spread over the
// candidates by a hash of the topic id plus the partition, so a topic's
// partitions go round the candidates and every client of one zone is
// told the same.
func (l leaders) of(id diskless.TopicID, partition int32) int32 {
	if len(l.among) == 1 {
		return l.among[0].NodeID
	}
	h := fnv.New32a()
	h.Write(id[:])
	return l.among[(uint64(h.Sum32())+uint64(max(partition, 0)))%uint64(len(l.among))].NodeID
}
