// Package placement decides which sidecar of a cluster hosts each
// coordinator shard, and makes this sidecar host the shards that fall to
// it (DESIGN §Shard placement): shard i is hosted by the sidecar whose
// node id is the leader of metadata partition i — KIP-1164's coordinator
// follows its partition's leader, so the shard's writes go to a local
// broker — and, when that broker has no live sidecar, by the live sidecar
// a rendezvous hash of the shard picks. Every sidecar computes the same
// answer from the same membership view and partition leaders; while two
// disagree (one saw a change first) both may try to host a shard, and the
// metadata log's fencing lets only one write. While this sidecar's view is
// not confirmed (membership.View.Current: a rebalance, the group's Kafka
// coordinator failing over, a network cut) the placement stays as it was:
// the shards hosted are kept — released only when their log writes are
// fenced, or all of them when Kafka says it removed this sidecar — and
// none is taken (DESIGN §Shard placement).
//
// Goroutines: Start starts one loop, which reads the leaders every
// Config.Refresh and at every view change, publishes the placement and
// hosts and releases shards; Close stops it and waits for it.
package placement

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/ratelog"
	"github.com/diskless-sidecar/sidecar/membership"
)

// DefaultRefresh is how often the metadata partitions' leaders are read
// (diskless.cluster.placement.refresh.ms): a leader change moves its
// shard within it (plus Kafka's own detection of a dead broker).
const DefaultRefresh = time.Second

// DefaultLeadersTimeout bounds one read of the leaders
// (Config.LeadersTimeout): a Metadata request answers in milliseconds on
// a live cluster; past this the last leaders are kept.
const DefaultLeadersTimeout = 5 * time.Second

// Membership is the cluster's view (membership.Group).
type Membership interface {
	View() membership.View
	Changed() <-chan struct{}
}

// Leaders reads the leaders of the metadata topic's partitions: partition
// → the node id of its leader, −1 or absent for none.
type Leaders interface {
	Leaders(ctx context.Context) (map[int32]int32, error)
}

// Hoster is the local coordinator's hosting (coordinator.Coordinator).
type Hoster interface {
	Host(ctx context.Context, shard int32) error
	Release(shard int32) error
	Hosted(shard int32) bool
	// Serving is nil when the shard is hosted and serving; a fenced
	// shard (another sidecar took it over) is released and hosted again
	// if it still falls to this sidecar.
	Serving(shard int32) error
}

// Config configures the placement of one sidecar.
type Config struct {
	// Self is this sidecar's node.id.
	Self int32
	// NumShards is the number of coordinator shards (metadata
	// partitions), ≥ 1.
	NumShards  int32
	Membership Membership
	Leaders    Leaders
	Hoster     Hoster
	// Refresh: see DefaultRefresh; 0 selects it.
	Refresh time.Duration
	// HostTimeout bounds one Host (a takeover's replay); default 1 min.
	HostTimeout time.Duration
	// LeadersTimeout bounds one Leaders call; default
	// DefaultLeadersTimeout. A Metadata request to a broker behind a cut
	// network waits for kgo's request timeout, and the loop must go on
	// reacting to view changes meanwhile.
	LeadersTimeout time.Duration
	Logger         *slog.Logger
}

// Placement is one sidecar's placement of the shards. It implements
// peer.Placement (Owner, Changed), peer.Members and server.Cluster
// (Sidecars, Owner); its methods are safe for concurrent use.
type Placement struct {
	cfg    Config
	cancel context.CancelFunc
	done   chan struct{}
	// retryLog rate-limits the warnings of a shard's failed Host and
	// Release (retried at every turn of the loop while they fail), per
	// shard.
	retryLog *ratelog.Limiter

	mu struct {
		sync.Mutex
		owners   []diskless.Sidecar // by shard; NodeID −1: none
		sidecars []diskless.Sidecar // the view's, nil while not a member
		changed  chan struct{}
	}
}

// Start starts placing shards.
func Start(cfg Config) (*Placement, error) {
	if cfg.NumShards < 1 || cfg.Membership == nil || cfg.Leaders == nil || cfg.Hoster == nil {
		return nil, errors.New("placement: Config needs NumShards ≥ 1, Membership, Leaders and Hoster")
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = DefaultRefresh
	}
	if cfg.HostTimeout == 0 {
		cfg.HostTimeout = time.Minute
	}
	if cfg.LeadersTimeout == 0 {
		cfg.LeadersTimeout = DefaultLeadersTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &Placement{cfg: cfg, done: make(chan struct{}), retryLog: ratelog.New(cfg.Logger, ratelog.Config{})}
	p.mu.owners = make([]diskless.Sidecar, cfg.NumShards)
	for i := range p.mu.owners {
		p.mu.owners[i].NodeID = -1
	}
	p.mu.changed = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go p.run(ctx)
	return p, nil
}

// Close stops placing and waits for the loop; the shards hosted stay so
// (the coordinator's Close stops them).
func (p *Placement) Close() {
	p.cancel()
	<-p.done
	p.retryLog.Close()
}

// Owner returns the sidecar that hosts shard, as this sidecar sees it.
func (p *Placement) Owner(shard int32) (diskless.Sidecar, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if shard < 0 || int(shard) >= len(p.mu.owners) || p.mu.owners[shard].NodeID < 0 {
		return diskless.Sidecar{}, false
	}
	return p.mu.owners[shard], true
}

// Changed returns a channel closed at the next change of the placement
// or of the live sidecars.
func (p *Placement) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.changed
}

// Sidecars returns the live sidecars — the last view's while it is
// unconfirmed — or nil while this sidecar is not in the view
// (server.Cluster).
func (p *Placement) Sidecars() []diskless.Sidecar {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.sidecars
}

// Lapsed reports whether Kafka has answered nothing of this sidecar's
// membership for a session timeout (membership.View.Lapsed; read from
// the view at once, not at the loop's next turn, which a cut network
// holds for LeadersTimeout): its clients are then told of the others
// (server.Cluster).
func (p *Placement) Lapsed() bool {
	return p.cfg.Membership.View().Lapsed
}

// Members returns the live sidecars (peer.Members): the view's, this one
// alone while it is not a member.
func (p *Placement) Members() []diskless.Sidecar {
	v := p.cfg.Membership.View()
	return v.Sidecars
}

// run is the placement loop.
func (p *Placement) run(ctx context.Context) {
	defer close(p.done)
	t := time.NewTicker(p.cfg.Refresh)
	defer t.Stop()
	var leaders map[int32]int32
	for {
		viewChanged := p.cfg.Membership.Changed()
		lctx, cancel := context.WithTimeout(ctx, p.cfg.LeadersTimeout)
		l, err := p.cfg.Leaders.Leaders(lctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.cfg.Logger.Debug("placement: reading the metadata partitions' leaders failed; keeping the last ones", slog.Any("err", err))
		} else {
			leaders = l
		}
		view := p.cfg.Membership.View()
		switch {
		case view.Current:
			owners := Assign(p.cfg.NumShards, view, leaders)
			p.publish(view, owners)
			p.reconcile(ctx, view, owners, viewChanged)
		case !view.Member && view.Generation >= 0:
			// Kafka removed this sidecar (UNKNOWN_MEMBER_ID): the
			// others' confirmed views name other owners for its shards,
			// which may have taken them over. Its state of them may be
			// behind, and not every answer waits for a write that would
			// find the fencing (an idempotent producer's sequence check
			// does not): let them all go; a confirmed view brings the
			// ones that fall to it back with a takeover and a replay.
			p.publish(view, p.owners())
			p.release(func(int32) bool { return true })
		default:
			// Unconfirmed: keep the owners last placed (they are what
			// the hosting still is) and only let go of what was fenced
			// (another sidecar took it over): fencing is final whatever
			// the view says.
			p.publish(view, p.owners())
			p.release(func(i int32) bool {
				if !errors.Is(p.cfg.Hoster.Serving(i), diskless.ErrShardFenced) {
					return false
				}
				p.cfg.Logger.Warn("placement: a shard hosted here was taken over by another sidecar; releasing it (the view is unconfirmed)",
					slog.Int("shard", int(i)))
				return true
			})
		}
		select {
		case <-ctx.Done():
			return
		case <-viewChanged:
		case <-t.C:
		}
	}
}

// owners returns the owners last published.
func (p *Placement) owners() []diskless.Sidecar {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.mu.owners)
}

// release releases each hosted shard drop reports true for.
func (p *Placement) release(drop func(shard int32) bool) {
	h := p.cfg.Hoster
	for i := range p.cfg.NumShards {
		if h.Hosted(i) && drop(i) {
			if err := h.Release(i); err != nil {
				p.retryLog.Log(context.Background(), slog.LevelWarn, fmt.Sprint(i), "placement: releasing a shard failed",
					slog.Int("shard", int(i)), slog.Any("err", err))
			}
		}
	}
}

// publish stores owners and the view's sidecars (those of the last
// generation while it is unconfirmed; none while this sidecar is not in
// it), waking Changed's waiters when they differ.
func (p *Placement) publish(view membership.View, owners []diskless.Sidecar) {
	var sidecars []diskless.Sidecar
	if view.Member {
		sidecars = view.Sidecars
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if slices.Equal(p.mu.owners, owners) && slices.Equal(p.mu.sidecars, sidecars) {
		return
	}
	moved := 0
	for i := range owners {
		if owners[i].NodeID != p.mu.owners[i].NodeID {
			moved++
		}
	}
	p.mu.owners, p.mu.sidecars = owners, sidecars
	close(p.mu.changed)
	p.mu.changed = make(chan struct{})
	if moved > 0 {
		ids := make([]int32, len(owners))
		for i, o := range owners {
			ids[i] = o.NodeID
		}
		p.cfg.Logger.Info("placement: shard owners changed", slog.Any("owners", ids), slog.Int("moved", moved),
			slog.Int("generation", int(view.Generation)))
	}
}

// reconcile, for a confirmed view, releases the shards that no longer fall
// to this sidecar (another live sidecar is named: it hosts them), then
// hosts those that do (taking a fenced one over again). A takeover takes
// a while (a claim, a replay): when the view changes meanwhile it stops,
// so that the owners are computed again before it hosts a shard that may
// no longer fall to it (a sidecar alone in its first view would otherwise
// take every shard, one after the other, from the sidecars that joined
// since).
func (p *Placement) reconcile(ctx context.Context, view membership.View, owners []diskless.Sidecar, viewChanged <-chan struct{}) {
	h := p.cfg.Hoster
	mine := func(i int32) bool { return view.Member && owners[i].NodeID == p.cfg.Self }
	p.release(func(i int32) bool { return !mine(i) })
	for i := range p.cfg.NumShards {
		if !mine(i) || ctx.Err() != nil {
			continue
		}
		select {
		case <-viewChanged:
			return
		default:
		}
		if h.Hosted(i) {
			if err := h.Serving(i); errors.Is(err, diskless.ErrShardFenced) {
				p.cfg.Logger.Warn("placement: a shard this sidecar should host was taken over by another; taking it back",
					slog.Int("shard", int(i)))
				if err := h.Release(i); err != nil {
					continue
				}
			} else {
				continue
			}
		}
		hctx, cancel := context.WithTimeout(ctx, p.cfg.HostTimeout)
		err := h.Host(hctx, i)
		cancel()
		if err != nil && ctx.Err() == nil {
			p.retryLog.Log(context.Background(), slog.LevelWarn, fmt.Sprint(i), "placement: hosting a shard failed; retrying",
				slog.Int("shard", int(i)), slog.Any("err", err))
		}
	}
}

// Assign returns the owner of each of numShards shards among the view's
// sidecars: the one whose node id leads the shard's metadata partition,
// else the one of the highest rendezvous hash of (shard, node id); NodeID
// −1 for none (the view names no sidecar). A view this sidecar is not in
// (another process of its node id is preferred) names the others.
func Assign(numShards int32, view membership.View, leaders map[int32]int32) []diskless.Sidecar {
	owners := make([]diskless.Sidecar, numShards)
	for i := range owners {
		owners[i].NodeID = -1
		if len(view.Sidecars) == 0 {
			continue
		}
		if l, ok := leaders[int32(i)]; ok && l >= 0 {
			if j := slices.IndexFunc(view.Sidecars, func(s diskless.Sidecar) bool { return s.NodeID == l }); j >= 0 {
				owners[i] = view.Sidecars[j]
				continue
			}
		}
		best, bestHash := -1, uint64(0)
		for j, s := range view.Sidecars {
			if h := rendezvous(int32(i), s.NodeID); best < 0 || h > bestHash {
				best, bestHash = j, h
			}
		}
		owners[i] = view.Sidecars[best]
	}
	return owners
}

// rendezvous is the highest-random-weight hash of a shard on a node: the
// fallback owner of a shard is the live sidecar with the greatest, so a
// sidecar leaving moves only its own shards.
func rendezvous(shard, node int32) uint64 {
	h := fnv.New64a()
	var b [8]byte
	b[0], b[1], b[2], b[3] = byte(shard>>24), byte(shard>>16), byte(shard>>8), byte(shard)
	b[4], b[5], b[6], b[7] = byte(node>>24), byte(node>>16), byte(node>>8), byte(node)
	h.Write(b[:])
	return h.Sum64()
}

// KafkaLeaders reads the metadata topic's partition leaders from Kafka
// with a Metadata request for the topic.
type KafkaLeaders struct {
	Client *kgo.Client
	Topic  string
}

// Leaders implements Leaders.
func (k KafkaLeaders) Leaders(ctx context.Context) (map[int32]int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(k.Topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	resp, err := req.RequestWith(ctx, k.Client)
	if err != nil {
		return nil, err
	}
	if len(resp.Topics) != 1 {
		return nil, fmt.Errorf("placement: Metadata for %s answered %d topics", k.Topic, len(resp.Topics))
	}
	t := resp.Topics[0]
	if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
		return nil, fmt.Errorf("placement: Metadata for %s: %w", k.Topic, err)
	}
	out := make(map[int32]int32, len(t.Partitions))
	for _, p := range t.Partitions {
		if p.ErrorCode != 0 {
			out[p.Partition] = -1 // LEADER_NOT_AVAILABLE and the like
			continue
		}
		out[p.Partition] = p.Leader
	}
	return out, nil
}
