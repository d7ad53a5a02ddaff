package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/membership"
	"github.com/diskless-sidecar/sidecar/peer"
	"github.com/diskless-sidecar/sidecar/placement"
	"github.com/diskless-sidecar/sidecar/server"
)

// clusterPart is a sidecar's part of a cluster of sidecars
// (diskless.cluster.enable; DESIGN §Membership, §Shard placement): the
// membership group, the placement of the shards, the RPC client and the
// router, built in the order start needs them — the references first
// (the coordinator and the server are given them before what they point
// to exists), the router once the coordinator is open, the membership
// and the placement once the listener's address is known.
type clusterPart struct {
	log   *slog.Logger
	kcl   *kgo.Client
	peers *peer.Client
	// router, group and place are set by start's later steps.
	router *peer.Router
	group  *membership.Group
	place  *placement.Placement
	// remote is the coordinator's Remote and Files; placed is the
	// placement as the router, the server and the disablement see it.
	remote *remoteRef
	placed *placementRef
}

var (
	_ coordinator.Remote        = (*peer.Router)(nil)
	_ coordinator.FileDescriber = (*peer.Router)(nil)
	_ server.Cluster            = (*placement.Placement)(nil)
	_ peer.Placement            = (*placement.Placement)(nil)
	_ placement.Hoster          = (*coordinator.Coordinator)(nil)
)

// peerClientID is the client id of the requests one sidecar sends
// another; the server never forwards an admin request that came with it
// (controller.go), so two sidecars that disagree on the controller
// cannot pass a request back and forth.
const peerClientID = "diskless-sidecar"

func newClusterPart(cfg Config, log *slog.Logger) (*clusterPart, error) {
	opts, err := kafkaClientOpts(cfg)
	if err != nil {
		return nil, err
	}
	peerTLS, peerSASL, err := peerSecurity(cfg, log)
	if err != nil {
		return nil, err
	}
	kcl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.MetadataKafkaBrokers...), kgo.ClientID("diskless-sidecar-cluster")}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	self := diskless.Sidecar{NodeID: cfg.NodeID, Rack: cfg.Rack}
	return &clusterPart{
		log:    log,
		kcl:    kcl,
		peers:  peer.NewClient(peer.ClientConfig{ClientID: peerClientID, Logger: log, TLS: peerTLS, SASL: peerSASL}),
		remote: &remoteRef{},
		placed: newPlacementRef(self),
	}, nil
}

// startRouter builds the router over the opened coordinator.
func (c *clusterPart) startRouter(cfg Config, coord *coordinator.Coordinator) error {
	r, err := peer.NewRouter(peer.RouterConfig{NodeID: cfg.NodeID, Local: coord, Placement: c.placed, Client: c.peers, Logger: c.log})
	if err != nil {
		return err
	}
	c.router = r
	c.remote.set(r)
	return nil
}

// join joins the membership group as the sidecar whose inter-sidecar
// listener is at host:port, with listeners (advertised.listeners' form)
// for clients, and starts placing shards on coord.
func (c *clusterPart) join(cfg Config, coord *coordinator.Coordinator, host string, port int32, listeners string) error {
	self := diskless.Sidecar{NodeID: cfg.NodeID, Host: host, Port: port, Rack: cfg.Rack, Listeners: listeners}
	group := cfg.ClusterGroupID
	if group == "" {
		group = "diskless-sidecars-" + cfg.MetadataTopic
	}
	g, err := membership.Join(membership.Config{Client: c.kcl, GroupID: group, Self: self,
		SessionTimeout: cfg.ClusterSessionTimeout, HeartbeatInterval: cfg.ClusterHeartbeatInterval,
		Logger: c.log.With(slog.String("component", "membership"))})
	if err != nil {
		return err
	}
	c.group = g
	c.placed.self.Store(&self)
	p, err := placement.Start(placement.Config{Self: cfg.NodeID, NumShards: cfg.MetadataShards, Membership: g,
		Leaders: placement.KafkaLeaders{Client: c.kcl, Topic: cfg.MetadataTopic}, Hoster: coord,
		Refresh: cfg.ClusterPlacementRefresh, Logger: c.log.With(slog.String("component", "placement"))})
	if err != nil {
		return err
	}
	c.place = p
	c.placed.set(p)
	return nil
}

// stopPlacing stops moving shards (the first step of a stop).
func (c *clusterPart) stopPlacing() {
	if c.place != nil {
		c.place.Close()
	}
}

// close leaves the group and closes the clients (after the coordinator
// closed).
func (c *clusterPart) close() {
	if c.group != nil {
		c.group.Close()
	}
	c.peers.Close()
	c.kcl.Close()
}

// remoteRef is the coordinator's Remote and FileDescriber: the router,
// once built (the coordinator calls neither during Open).
type remoteRef struct{ r atomic.Pointer[peer.Router] }

func (r *remoteRef) set(router *peer.Router) { r.r.Store(router) }

var errNoRouter = fmt.Errorf("%w: the cluster's router is not ready", diskless.ErrNotCoordinator)

func (r *remoteRef) router() (*peer.Router, error) {
	if p := r.r.Load(); p != nil {
		return p, nil
	}
	return nil, errNoRouter
}

func (r *remoteRef) CreatePartitionsIn(ctx context.Context, shard int32, topics []diskless.TopicPartitions) error {
	p, err := r.router()
	if err != nil {
		return err
	}
	return p.CreatePartitionsIn(ctx, shard, topics)
}

func (r *remoteRef) DeleteTopicsIn(ctx context.Context, shard int32, ids []diskless.TopicID) error {
	p, err := r.router()
	if err != nil {
		return err
	}
	return p.DeleteTopicsIn(ctx, shard, ids)
}

func (r *remoteRef) DeleteRecords(ctx context.Context, tp diskless.TopicPartition, offset int64) (int64, error) {
	p, err := r.router()
	if err != nil {
		return -1, err
	}
	return p.DeleteRecords(ctx, tp, offset)
}

func (r *remoteRef) CheckTxn(ctx context.Context, shard int32, req diskless.TxnCheck) (diskless.TxnCheckResult, error) {
	p, err := r.router()
	if err != nil {
		return diskless.TxnCheckResult{}, err
	}
	return p.CheckTxn(ctx, shard, req)
}

func (r *remoteRef) EndTxnOffsets(ctx context.Context, shard int32, group string, pid int64, epoch int16, seq int64, committed bool) error {
	p, err := r.router()
	if err != nil {
		return err
	}
	return p.EndTxnOffsets(ctx, shard, group, pid, epoch, seq, committed)
}

func (r *remoteRef) AllocateProducerIDBlock(ctx context.Context, node int32) (int64, int32, error) {
	p, err := r.router()
	if err != nil {
		return -1, 0, err
	}
	return p.AllocateProducerIDBlock(ctx, node)
}

func (r *remoteRef) DescribeFiles(ctx context.Context, shard int32, keys []string) ([]diskless.FileState, error) {
	p, err := r.router()
	if err != nil {
		return nil, err
	}
	return p.DescribeFiles(ctx, shard, keys)
}

// placementRef is the placement as the router, the server and the
// disablement see it, before and after it starts: until then no shard
// has a known owner, Metadata names this sidecar alone and a disablement
// is this sidecar's to confirm.
type placementRef struct {
	p     atomic.Pointer[placement.Placement]
	self  atomic.Pointer[diskless.Sidecar]
	ready chan struct{}
	once  sync.Once
}

func newPlacementRef(self diskless.Sidecar) *placementRef {
	r := &placementRef{ready: make(chan struct{})}
	r.self.Store(&self)
	return r
}

func (r *placementRef) set(p *placement.Placement) {
	r.p.Store(p)
	r.once.Do(func() { close(r.ready) })
}

func (r *placementRef) Owner(shard int32) (diskless.Sidecar, bool) {
	if p := r.p.Load(); p != nil {
		return p.Owner(shard)
	}
	return diskless.Sidecar{}, false
}

func (r *placementRef) Changed() <-chan struct{} {
	if p := r.p.Load(); p != nil {
		return p.Changed()
	}
	return r.ready
}

func (r *placementRef) Sidecars() []diskless.Sidecar {
	if p := r.p.Load(); p != nil {
		return p.Sidecars()
	}
	return nil
}

func (r *placementRef) Lapsed() bool {
	if p := r.p.Load(); p != nil {
		return p.Lapsed()
	}
	return false
}

func (r *placementRef) Members() []diskless.Sidecar {
	if p := r.p.Load(); p != nil {
		return p.Members()
	}
	return []diskless.Sidecar{*r.self.Load()}
}

// controller is server.Controller in a cluster: the catalog is written
// where shard 0 is hosted.
type controller struct {
	coord *coordinator.Coordinator
	place *placementRef
	peers *peer.Client
}

func (c controller) Local() bool { return c.coord.Hosted(0) }

func (c controller) ID() int32 {
	if o, ok := c.place.Owner(0); ok {
		return o.NodeID
	}
	return -1
}

func (c controller) Forward(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	o, ok := c.place.Owner(0)
	if !ok {
		return nil, errors.New("no sidecar hosts the catalog (shard 0)")
	}
	if o.NodeID == c.coord.NodeID() {
		return nil, errors.New("this sidecar is named the controller but does not host shard 0 yet")
	}
	return c.peers.Request(ctx, o.Addr(), req)
}

// clusterCatalog is the server's Catalog in a cluster: the coordinator's,
// DeleteRecords at the partition's owner.
type clusterCatalog struct {
	*coordinator.Coordinator
	router *peer.Router
}

func (c clusterCatalog) DeleteRecords(ctx context.Context, tp diskless.TopicPartition, offset int64) (int64, error) {
	return c.router.DeleteRecords(ctx, tp, offset)
}
