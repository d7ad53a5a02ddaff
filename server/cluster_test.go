package server

import (
	"net/netip"
	"reflect"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
)

func TestParseZoneCIDRs(t *testing.T) {
	got, err := ParseZoneCIDRs(" a=10.0.0.0/24, a=10.0.1.7/24,b=10.1.0.0/16 ,c=fd00::/8,")
	want := []ZoneCIDR{
		{"a", netip.MustParsePrefix("10.0.0.0/24")}, {"a", netip.MustParsePrefix("10.0.1.0/24")},
		{"b", netip.MustParsePrefix("10.1.0.0/16")}, {"c", netip.MustParsePrefix("fd00::/8")},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v %v, want %v", got, err, want)
	}
	if got, err := ParseZoneCIDRs(""); err != nil || got != nil {
		t.Fatalf("empty: %v %v", got, err)
	}
	for _, bad := range []string{"a", "=10.0.0.0/8", "a=10.0.0.0", "a=10.0.0.0/33", "a=x/8"} {
		if _, err := ParseZoneCIDRs(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestZoneOf(t *testing.T) {
	zones, _ := ParseZoneCIDRs("a=10.0.0.0/8,b=10.1.0.0/16,c=fd00::/8")
	s := &Server{cfg: Config{ClientZones: zones}}
	for _, tc := range []struct {
		id, host, want string
	}{
		{"app,diskless_az=west-1a", "/10.1.2.3", "west-1a"}, // the hint wins over the address
		{"diskless_az=b;x", "/192.168.0.1", "b"},
		{"x diskless_az=q&y=1", "/192.168.0.1", "q"},
		{"diskless_az=", "/10.1.2.3", "b"}, // an empty hint: the address
		{"app", "/10.1.2.3", "b"},          // the longest prefix
		{"app", "/10.2.0.1", "a"},
		{"app", "/::ffff:10.1.0.9", "b"}, // an IPv4-mapped address
		{"app", "/fd00::1", "c"},
		{"app", "/192.168.0.1", ""},
		{"", "/not-an-ip", ""},
	} {
		if got := s.zoneOf(client{id: tc.id, host: tc.host}); got != tc.want {
			t.Errorf("%q from %s: zone %q, want %q", tc.id, tc.host, got, tc.want)
		}
	}
}

// fakeCluster is a Cluster the test sets.
type fakeCluster struct {
	mu       sync.Mutex
	sidecars []diskless.Sidecar
	owners   map[int32]diskless.Sidecar
	lapsed   bool
}

func (f *fakeCluster) Lapsed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lapsed
}

func (f *fakeCluster) Sidecars() []diskless.Sidecar {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sidecars
}

func (f *fakeCluster) Owner(shard int32) (diskless.Sidecar, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.owners[shard]
	return o, ok
}

// stubGroups is a Groups with four shards and no group (the FindCoordinator
// test calls nothing else).
type stubGroups struct{ Groups }

func (stubGroups) NumShards() int32 { return 4 }
func (stubGroups) HasGroups() bool  { return false }

// metadataAs sends Metadata for topic t with clientID.
func metadataAs(t *testing.T, ts *testServer, clientID string, topic string) *kmsg.MetadataResponse {
	t.Helper()
	c := dialRaw(t, ts.Addr())
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	c.write(f.AppendRequest(nil, req, 1))
	_, resp := c.recv(req)
	return resp.(*kmsg.MetadataResponse)
}

// TestMetadataByZone: every live sidecar is a broker; a client of a zone
// that has sidecars is told only of them as leaders, spread over them; a
// client of another zone, or of none, over all of them; a sidecar out of
// the cluster's view names itself alone.
func TestMetadataByZone(t *testing.T) {
	fc := &fakeCluster{sidecars: []diskless.Sidecar{
		{NodeID: 1, Host: "h1", Port: 1, Rack: "a"}, {NodeID: 2, Host: "h2", Port: 2, Rack: "a"},
		{NodeID: 3, Host: "h3", Port: 3, Rack: "b"},
	}}
	ts := startServer(t, func(c *Config, _ *testServer) { c.Cluster, c.NodeID, c.Rack = fc, 2, "a" })
	ts.cat.CreateTopic(t.Context(), "t", 64, nil)
	leadersOf := func(r *kmsg.MetadataResponse) map[int32]int {
		if len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 {
			t.Fatalf("topics %+v", r.Topics)
		}
		out := map[int32]int{}
		for _, p := range r.Topics[0].Partitions {
			out[p.Leader]++
			if !reflect.DeepEqual(p.Replicas, []int32{p.Leader}) || !reflect.DeepEqual(p.ISR, []int32{p.Leader}) {
				t.Fatalf("partition %d: replicas %v isr %v, leader %d", p.Partition, p.Replicas, p.ISR, p.Leader)
			}
		}
		return out
	}
	r := metadataAs(t, ts, "app,diskless_az=a", "t")
	if len(r.Brokers) != 3 || r.Brokers[2].NodeID != 3 || r.Brokers[2].Rack == nil || *r.Brokers[2].Rack != "b" {
		t.Fatalf("brokers %+v", r.Brokers)
	}
	if got := leadersOf(r); len(got) != 2 || got[1] == 0 || got[2] == 0 {
		t.Fatalf("zone a: leaders %v, want nodes 1 and 2 only, both", got)
	}
	if again := leadersOf(metadataAs(t, ts, "other,diskless_az=a", "t")); !reflect.DeepEqual(again, leadersOf(r)) {
		t.Fatalf("two zone-a clients told different leaders")
	}
	if got := leadersOf(metadataAs(t, ts, "diskless_az=b", "t")); len(got) != 1 || got[3] != 64 {
		t.Fatalf("zone b: leaders %v, want node 3 only", got)
	}
	for _, id := range []string{"diskless_az=c", "plain"} {
		if got := leadersOf(metadataAs(t, ts, id, "t")); len(got) != 3 {
			t.Fatalf("%q: leaders %v, want all three", id, got)
		}
	}

	// Out of the view: this sidecar alone, its own rack.
	fc.mu.Lock()
	fc.sidecars = nil
	fc.mu.Unlock()
	r = metadataAs(t, ts, "diskless_az=b", "t")
	if len(r.Brokers) != 1 || r.Brokers[0].NodeID != 2 || *r.Brokers[0].Rack != "a" {
		t.Fatalf("out of the view: brokers %+v", r.Brokers)
	}
	if got := leadersOf(r); len(got) != 1 || got[2] != 64 {
		t.Fatalf("out of the view: leaders %v", got)
	}
}

// TestMetadataLapsed: a sidecar whose membership lapsed (Kafka answered
// nothing for a session timeout: it may be cut off) names the others of
// its last view as brokers and leaders, never itself — by zone as usual
// among them — and one of them as the controller; alone in its view it
// names itself. Without the rule it named itself leader of a third of
// the partitions (DESIGN §Membership).
func TestMetadataLapsed(t *testing.T) {
	fc := &fakeCluster{lapsed: true, sidecars: []diskless.Sidecar{
		{NodeID: 1, Host: "h1", Port: 1, Rack: "a"}, {NodeID: 2, Host: "h2", Port: 2, Rack: "a"},
		{NodeID: 3, Host: "h3", Port: 3, Rack: "b"},
	}}
	ts := startServer(t, func(c *Config, _ *testServer) { c.Cluster, c.NodeID, c.Rack = fc, 2, "a" })
	ts.cat.CreateTopic(t.Context(), "t", 64, nil)
	leadersOf := func(r *kmsg.MetadataResponse) map[int32]int {
		t.Helper()
		if len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 {
			t.Fatalf("topics %+v", r.Topics)
		}
		out := map[int32]int{}
		for _, p := range r.Topics[0].Partitions {
			out[p.Leader]++
		}
		return out
	}
	brokersOf := func(r *kmsg.MetadataResponse) []int32 {
		var ids []int32
		for _, b := range r.Brokers {
			ids = append(ids, b.NodeID)
		}
		return ids
	}
	for _, tc := range []struct {
		clientID string
		leaders  []int32
	}{
		{"app,diskless_az=a", []int32{1}}, // its zone's other sidecar only
		{"diskless_az=b", []int32{3}},
		{"plain", []int32{1, 3}},
	} {
		r := metadataAs(t, ts, tc.clientID, "t")
		if got := brokersOf(r); !reflect.DeepEqual(got, []int32{1, 3}) {
			t.Errorf("%q: brokers %v, want [1 3]", tc.clientID, got)
		}
		if r.ControllerID != 1 {
			t.Errorf("%q: controller %d, want 1 (the first broker named)", tc.clientID, r.ControllerID)
		}
		got := leadersOf(r)
		if got[2] != 0 || len(got) != len(tc.leaders) {
			t.Errorf("%q: leaders %v, want %v only", tc.clientID, got, tc.leaders)
		}
		for _, id := range tc.leaders {
			if got[id] == 0 {
				t.Errorf("%q: leaders %v, want %v, each", tc.clientID, got, tc.leaders)
			}
		}
	}
	c := dialRaw(t, ts.Addr())
	dc := c.roundTrip(kmsg.NewPtrDescribeClusterRequest()).(*kmsg.DescribeClusterResponse)
	if len(dc.Brokers) != 2 || dc.Brokers[0].NodeID != 1 || dc.Brokers[1].NodeID != 3 || dc.ControllerID != 1 {
		t.Errorf("DescribeCluster: brokers %+v, controller %d; want 1 and 3, controller 1", dc.Brokers, dc.ControllerID)
	}

	// Alone in its last view: itself (there is no one else to name).
	fc.mu.Lock()
	fc.sidecars = fc.sidecars[1:2]
	fc.mu.Unlock()
	r := metadataAs(t, ts, "plain", "t")
	if got := leadersOf(r); !reflect.DeepEqual(brokersOf(r), []int32{2}) || got[2] != 64 || r.ControllerID != 2 {
		t.Fatalf("alone: brokers %v, leaders %v, controller %d", brokersOf(r), got, r.ControllerID)
	}

	// Kafka answers again: itself among the leaders.
	fc.mu.Lock()
	fc.sidecars, fc.lapsed = []diskless.Sidecar{{NodeID: 1, Host: "h1", Port: 1}, {NodeID: 2, Host: "h2", Port: 2}}, false
	fc.mu.Unlock()
	if got := leadersOf(metadataAs(t, ts, "plain", "t")); got[2] == 0 || got[1] == 0 {
		t.Fatalf("confirmed again: leaders %v, want 1 and 2", got)
	}
}

// TestFindCoordinatorOwner: a group's coordinator is the owner of its
// shard; COORDINATOR_NOT_AVAILABLE while the shard has none.
func TestFindCoordinatorOwner(t *testing.T) {
	owner := diskless.Sidecar{NodeID: 5, Host: "h5", Port: 5}
	fc := &fakeCluster{owners: map[int32]diskless.Sidecar{}}
	const group = "g1"
	fc.owners[diskless.GroupShardFor(group, 4)] = owner
	ts := startServer(t, func(c *Config, _ *testServer) { c.Cluster, c.Groups = fc, stubGroups{} })
	c := dialRaw(t, ts.Addr())
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version = 4
	other := "g2"
	for diskless.GroupShardFor(other, 4) == diskless.GroupShardFor(group, 4) {
		other += "x"
	}
	req.CoordinatorKeys = []string{group, other}
	r := c.roundTrip(req).(*kmsg.FindCoordinatorResponse)
	if got := r.Coordinators[0]; got.ErrorCode != 0 || got.NodeID != 5 || got.Host != "h5" || got.Port != 5 {
		t.Fatalf("%s: %+v", group, got)
	}
	if got := r.Coordinators[1]; got.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("%s (no owner): %+v", other, got)
	}
}

// TestFindCoordinatorLapsed: a sidecar whose membership lapsed does not
// name itself coordinator while its last view names others — a shard its
// view places on itself answers COORDINATOR_NOT_AVAILABLE, one placed on
// another sidecar names that one, as Metadata leaves it out; alone in its
// view, or confirmed again, it names itself. Without the rule a client's
// group and transaction coordinator stayed on a sidecar cut off from
// Kafka (DESIGN §Membership).
func TestFindCoordinatorLapsed(t *testing.T) {
	self := diskless.Sidecar{NodeID: 2, Host: "h2", Port: 2}
	other := diskless.Sidecar{NodeID: 1, Host: "h1", Port: 1}
	mine, theirs := "g-mine", "g-theirs"
	for diskless.GroupShardFor(theirs, 4) == diskless.GroupShardFor(mine, 4) {
		theirs += "x"
	}
	fc := &fakeCluster{lapsed: true, sidecars: []diskless.Sidecar{other, self}, owners: map[int32]diskless.Sidecar{
		diskless.GroupShardFor(mine, 4): self, diskless.GroupShardFor(theirs, 4): other,
	}}
	ts := startServer(t, func(c *Config, _ *testServer) { c.Cluster, c.Groups, c.NodeID = fc, stubGroups{}, 2 })
	c := dialRaw(t, ts.Addr())
	find := func(version int16) []kmsg.FindCoordinatorResponseCoordinator {
		t.Helper()
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version = version
		if version >= 4 {
			req.CoordinatorKeys = []string{mine, theirs}
			return c.roundTrip(req).(*kmsg.FindCoordinatorResponse).Coordinators
		}
		var out []kmsg.FindCoordinatorResponseCoordinator
		for _, k := range []string{mine, theirs} {
			req.CoordinatorKey = k
			r := c.roundTrip(req).(*kmsg.FindCoordinatorResponse)
			out = append(out, kmsg.FindCoordinatorResponseCoordinator{Key: k, NodeID: r.NodeID, ErrorCode: r.ErrorCode})
		}
		return out
	}
	for _, v := range []int16{3, 4} {
		got := find(v)
		if got[0].ErrorCode != kerr.CoordinatorNotAvailable.Code || got[0].NodeID != -1 {
			t.Errorf("v%d, lapsed, shard placed here: %+v, want COORDINATOR_NOT_AVAILABLE", v, got[0])
		}
		if got[1].ErrorCode != 0 || got[1].NodeID != 1 {
			t.Errorf("v%d, lapsed, shard placed on node 1: %+v, want node 1", v, got[1])
		}
	}

	// Alone in its last view: itself (there is no one else to name).
	fc.mu.Lock()
	fc.sidecars = []diskless.Sidecar{self}
	fc.mu.Unlock()
	if got := find(4); got[0].ErrorCode != 0 || got[0].NodeID != 2 {
		t.Errorf("lapsed, alone: %+v, want node 2", got[0])
	}

	// Kafka answers again: itself.
	fc.mu.Lock()
	fc.sidecars, fc.lapsed = []diskless.Sidecar{other, self}, false
	fc.mu.Unlock()
	if got := find(4); got[0].ErrorCode != 0 || got[0].NodeID != 2 {
		t.Errorf("confirmed again: %+v, want node 2", got[0])
	}
}
