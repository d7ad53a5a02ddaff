// Package membership lets the sidecars of one cluster find each other
// through the Kafka cluster they run next to (DESIGN §Membership): each is
// a member of one Kafka group, with Kafka's classic group membership
// protocol and a protocol type of its own — as Kafka Connect's workers
// are — announcing its node id, advertised listener and rack in its member
// metadata. For each generation the member Kafka makes the leader gives
// every member the same list of members, so all hold the same view of the
// cluster, numbered by the generation. A sidecar that dies stops
// heartbeating and Kafka removes it after its session timeout; one that
// stops gracefully leaves at once. Byte formats: docs/format/membership.md.
//
// Goroutines: Join starts one, which joins, syncs and heartbeats; Close
// leaves the group, stops it and waits for it.
package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/backoff"
)

// Protocol identifiers of the group (docs/format/membership.md).
const (
	ProtocolType = "diskless-sidecar"
	protocolName = "diskless-members-v0"
)

// Defaults of Config's zero fields.
const (
	// DefaultSessionTimeout is how long Kafka waits for a silent member
	// before it removes it (diskless.cluster.session.timeout.ms): a dead
	// sidecar is out of every view within it and the heartbeat interval
	// and rebalance that follow, under 10 s. Kafka refuses a session
	// timeout below its group.min.session.timeout.ms (6 s by default).
	DefaultSessionTimeout = 8 * time.Second
	// DefaultHeartbeatInterval is how often a member heartbeats
	// (diskless.cluster.heartbeat.interval.ms), which is also how soon it
	// learns of a rebalance.
	DefaultHeartbeatInterval = time.Second
)

// Config configures a member.
type Config struct {
	// Client reaches the Kafka cluster; required. The Group does not
	// close it.
	Client *kgo.Client
	// GroupID is the group of the cluster's sidecars
	// (diskless.cluster.group.id); required.
	GroupID string
	// Self is what this sidecar announces; NodeID ≥ 0, Host and Port
	// required.
	Self diskless.Sidecar
	// SessionTimeout and HeartbeatInterval: see their Default
	// constants. HeartbeatInterval must be below SessionTimeout.
	SessionTimeout, HeartbeatInterval time.Duration
	// Logger receives view changes (info) and failures; default
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock of StartTimeMs; default time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports every invalid field, naming its configuration key.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("membership: Config.Client is required"))
	}
	if c.GroupID == "" {
		errs = append(errs, errors.New("diskless.cluster.group.id: must not be empty"))
	}
	if c.Self.NodeID < 0 || c.Self.Host == "" || c.Self.Port < 1 || c.Self.Port > 65535 {
		errs = append(errs, fmt.Errorf("node.id %d, advertised listener %q:%d: a member needs a node id ≥ 0 and a host:port",
			c.Self.NodeID, c.Self.Host, c.Self.Port))
	}
	if c.SessionTimeout < time.Second || c.SessionTimeout > 30*time.Minute {
		errs = append(errs, fmt.Errorf("diskless.cluster.session.timeout.ms %d: must be in [1000, 1800000]", c.SessionTimeout.Milliseconds()))
	}
	if c.HeartbeatInterval <= 0 || c.HeartbeatInterval >= c.SessionTimeout {
		errs = append(errs, fmt.Errorf("diskless.cluster.heartbeat.interval.ms %d: must be above 0 and below the session timeout (%d)",
			c.HeartbeatInterval.Milliseconds(), c.SessionTimeout.Milliseconds()))
	}
	return errors.Join(errs...)
}

// View is the cluster as one generation of the group sees it.
//
// A view outlives the moments this sidecar cannot confirm it — a
// rebalance in progress, the group's Kafka coordinator failing over, a
// network cut — instead of being dropped: Member stays as the generation
// left it and Current says whether it is confirmed (DESIGN §Membership,
// "Through a coordinator failover").
type View struct {
	// Generation is the group's generation that made this view; −1 for
	// the view before the first one (this sidecar alone).
	Generation int32
	// Sidecars are the live sidecars by node id, one per node id (the one
	// started last), this one included while it is in the view.
	Sidecars []diskless.Sidecar
	// Member reports whether this sidecar is in the view: it was in the
	// generation's assignment and Kafka has not said since that it no
	// longer knows it. False before its first generation, after Kafka
	// answered UNKNOWN_MEMBER_ID (its session expired: the others no
	// longer see it), while another process of its node id is preferred,
	// and after it left (Close).
	Member bool
	// Current reports whether the view is confirmed as the group's
	// current generation: its SyncGroup succeeded and, since, a heartbeat
	// was answered within every session timeout and no rebalance began
	// (a member left out of the view by the generation's assignment has
	// a current view too). False before the first generation, while a
	// rebalance this sidecar takes part in has not finished, while no
	// heartbeat has been answered for a session timeout (the coordinator
	// is failing over, or this sidecar is cut off and the others may have
	// moved on without it), after UNKNOWN_MEMBER_ID until it joined
	// again, and after it left.
	Current bool
	// Lapsed reports whether Kafka has answered none of this member's
	// heartbeats or joins for a session timeout (Current is then false):
	// Kafka may have removed it and the others moved on without it — a
	// network cut, or the group's Kafka coordinator failing over; this
	// sidecar cannot tell which. Kafka fences a broker whose heartbeats
	// to the controller lapse for broker.session.timeout.ms and moves its
	// leaderships off it; a lapsed sidecar likewise stops naming itself
	// to clients (DESIGN §Membership, "Seen by clients while
	// unconfirmed"). False again at the next answer.
	Lapsed bool
}

// Group is this sidecar's membership of the cluster's group. Its methods
// are safe for concurrent use.
type Group struct {
	cfg     Config
	meta    []byte
	startMs int64
	cancel  context.CancelFunc
	done    chan struct{}

	mu struct {
		sync.Mutex
		view    View
		changed chan struct{}
	}
	// memberID, generation and lastAnswer (when Kafka last answered a
	// heartbeat, join or sync of this member) are the loop's own.
	memberID   string
	generation int32
	lastAnswer time.Time
	// noLeave makes the loop stop without LeaveGroup, as a process that
	// dies (tests).
	noLeave atomic.Bool
}

// Join validates cfg and starts taking part in the group; the first view
// comes once the first rebalance finished (WaitMember, Changed). Until
// then View holds this sidecar alone, not a member.
func Join(cfg Config) (*Group, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	g := &Group{cfg: cfg, done: make(chan struct{}), startMs: cfg.Now().UnixMilli(), generation: -1}
	g.meta = appendMetadata(nil, cfg.Self, g.startMs)
	g.mu.view = View{Generation: -1, Sidecars: []diskless.Sidecar{cfg.Self}}
	g.mu.changed = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	go g.run(ctx)
	return g, nil
}

// View returns the current view. Its Sidecars must not be modified.
func (g *Group) View() View {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.view
}

// Changed returns a channel closed at the next change of the view. Take
// it before reading View, then wait on it.
func (g *Group) Changed() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.changed
}

// WaitMember waits until this sidecar is a member of a generation (or
// ctx ends) and returns the view.
func (g *Group) WaitMember(ctx context.Context) (View, error) {
	for {
		ch := g.Changed()
		if v := g.View(); v.Member {
			return v, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return g.View(), ctx.Err()
		}
	}
}

// Close leaves the group (the others see this sidecar gone at once, not
// after its session timeout), stops the goroutine and waits for it.
func (g *Group) Close() {
	g.cancel()
	<-g.done
}

// setView publishes v if it differs from the current view.
func (g *Group) setView(v View) {
	g.mu.Lock()
	old := g.mu.view
	if old.Generation == v.Generation && old.Member == v.Member && old.Current == v.Current && old.Lapsed == v.Lapsed &&
		slices.Equal(old.Sidecars, v.Sidecars) {
		g.mu.Unlock()
		return
	}
	g.mu.view = v
	close(g.mu.changed)
	g.mu.changed = make(chan struct{})
	g.mu.Unlock()
	ids := make([]int32, len(v.Sidecars))
	for i, s := range v.Sidecars {
		ids[i] = s.NodeID
	}
	g.cfg.Logger.Info("membership: view changed", slog.Int("generation", int(v.Generation)),
		slog.Any("sidecars", ids), slog.Bool("member", v.Member), slog.Bool("current", v.Current), slog.Bool("lapsed", v.Lapsed))
}

// outOfGroup marks this sidecar out of the view (Kafka no longer knows
// it, or it left), keeping the others as last seen.
func (g *Group) outOfGroup() {
	v := g.View()
	v.Member, v.Current = false, false
	g.setView(v)
}

// setCurrent marks the view confirmed or not, keeping it otherwise; a
// confirmed view is not lapsed.
func (g *Group) setCurrent(current bool) {
	v := g.View()
	if current && v.Generation < 0 {
		return // only a generation's view is ever confirmed
	}
	v.Current = current
	if current {
		v.Lapsed = false
	}
	g.setView(v)
}

// answered records that Kafka answered this member (a heartbeat, a join
// or a sync, whatever the error code): the view is no longer lapsed.
func (g *Group) answered() {
	g.lastAnswer = time.Now()
	if v := g.View(); v.Lapsed {
		v.Lapsed = false
		g.setView(v)
	}
}

// lapse marks the view lapsed, unconfirmed, once Kafka has answered
// nothing for a session timeout (View.Lapsed); it reports whether it
// did.
func (g *Group) lapse() bool {
	v := g.View()
	if v.Generation < 0 || time.Since(g.lastAnswer) < g.cfg.SessionTimeout {
		return false
	}
	v.Current, v.Lapsed = false, true
	g.setView(v)
	return true
}

// run is the member loop: join and sync, then heartbeat until a
// rebalance asks to join again; on exit, leave.
func (g *Group) run(ctx context.Context) {
	defer close(g.done)
	defer g.leave()
	for attempt := 1; ctx.Err() == nil; {
		if err := g.joinAndSync(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			g.cfg.Logger.Warn("membership: joining the group failed; retrying", slog.String("group", g.cfg.GroupID), slog.Any("err", err))
			g.lapse()
			if backoff.Sleep(ctx, backoff.Wait(100*time.Millisecond, g.cfg.HeartbeatInterval, attempt)) != nil {
				return
			}
			attempt++
			continue
		}
		attempt = 1
		g.heartbeat(ctx)
	}
}

// errRejoin asks the loop to join again at once (a rebalance, a new
// member id).
var errRejoin = errors.New("membership: rejoin")

// joinAndSync takes part in one rebalance: JoinGroup until Kafka gives a
// member id and a generation, then SyncGroup — as the leader with every
// member's assignment — and publishes the view it gets.
func (g *Group) joinAndSync(ctx context.Context) error {
	for {
		err := g.joinAndSyncOnce(ctx)
		if !errors.Is(err, errRejoin) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

func (g *Group) joinAndSyncOnce(ctx context.Context) error {
	// The view of the last generation stays until the next one is
	// known, unconfirmed meanwhile (DESIGN §Membership).
	g.setCurrent(false)
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group = g.cfg.GroupID
	join.SessionTimeoutMillis = int32(g.cfg.SessionTimeout.Milliseconds())
	join.RebalanceTimeoutMillis = join.SessionTimeoutMillis
	join.MemberID = g.memberID
	join.ProtocolType = ProtocolType
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: protocolName, Metadata: g.meta}}
	join.Reason = kmsg.StringPtr("sidecar joining")
	jr, err := join.RequestWith(ctx, g.cfg.Client)
	if err != nil {
		return fmt.Errorf("JoinGroup: %w", err)
	}
	g.answered()
	switch err := kerr.ErrorForCode(jr.ErrorCode); {
	case err == nil:
	case errors.Is(err, kerr.MemberIDRequired):
		// KIP-394: join again with the id Kafka gave.
		g.memberID = jr.MemberID
		return errRejoin
	case errors.Is(err, kerr.UnknownMemberID):
		g.memberID = ""
		g.outOfGroup()
		return errRejoin
	case errors.Is(err, kerr.RebalanceInProgress):
		return errRejoin
	default:
		// INCONSISTENT_GROUP_PROTOCOL (the group id is used by other
		// kinds of members), GROUP_MAX_SIZE_REACHED, coordinator errors.
		return fmt.Errorf("JoinGroup: %w", err)
	}
	g.memberID, g.generation = jr.MemberID, jr.Generation

	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.Generation, sync.MemberID = g.cfg.GroupID, jr.Generation, jr.MemberID
	sync.ProtocolType, sync.Protocol = kmsg.StringPtr(ProtocolType), kmsg.StringPtr(protocolName)
	if jr.LeaderID == jr.MemberID {
		assignment := g.assign(jr.Members)
		for _, m := range jr.Members {
			sync.GroupAssignment = append(sync.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m.MemberID, MemberAssignment: assignment})
		}
	}
	sr, err := sync.RequestWith(ctx, g.cfg.Client)
	if err != nil {
		return fmt.Errorf("SyncGroup: %w", err)
	}
	g.answered()
	switch err := kerr.ErrorForCode(sr.ErrorCode); {
	case err == nil:
	case errors.Is(err, kerr.UnknownMemberID):
		g.memberID = ""
		g.outOfGroup()
		return errRejoin
	case errors.Is(err, kerr.RebalanceInProgress), errors.Is(err, kerr.IllegalGeneration):
		return errRejoin
	default:
		return fmt.Errorf("SyncGroup: %w", err)
	}
	members, err := decodeAssignment(sr.MemberAssignment)
	if err != nil {
		return fmt.Errorf("SyncGroup: the leader's assignment: %w", err)
	}
	view, left := sidecars(members)
	member := true
	for _, m := range left {
		if m.MemberID == g.memberID {
			member = false
			g.cfg.Logger.Error("membership: another sidecar announces this node id and started later; this one is left out of the view",
				slog.Int("node.id", int(g.cfg.Self.NodeID)))
		}
	}
	if member && !slices.ContainsFunc(members, func(m Member) bool { return m.MemberID == g.memberID }) {
		// The leader could not read this member's metadata.
		member = false
		g.cfg.Logger.Error("membership: the group's leader left this sidecar out of the view", slog.String("member", g.memberID))
	}
	g.setView(View{Generation: jr.Generation, Sidecars: view, Member: member, Current: true})
	return nil
}

// assign builds the assignment the leader gives every member: the
// members whose metadata it can read.
func (g *Group) assign(jm []kmsg.JoinGroupResponseMember) []byte {
	members := make([]Member, 0, len(jm))
	for _, m := range jm {
		s, start, err := decodeMetadata(m.ProtocolMetadata)
		if err != nil {
			g.cfg.Logger.Warn("membership: a member's metadata does not decode; it is left out of the view",
				slog.String("member", m.MemberID), slog.Any("err", err))
			continue
		}
		members = append(members, Member{MemberID: m.MemberID, Sidecar: s, StartTimeMs: start})
	}
	return appendAssignment(nil, members)
}

// heartbeat heartbeats every interval until a rebalance (or an error that
// needs a new join) comes, or ctx ends. A member that cannot heartbeat
// for a session timeout goes on heartbeating with the same member id and
// generation, its view unconfirmed (View.Current) but kept: when the
// group's coordinator failed over, the new one loads the group from
// __consumer_offsets with every member of the generation and starts
// their sessions anew, so the next answered heartbeat confirms the view
// again without a rebalance; when Kafka did remove this member (it was
// cut off), the answer is UNKNOWN_MEMBER_ID and it joins again.
func (g *Group) heartbeat(ctx context.Context) {
	t := time.NewTicker(g.cfg.HeartbeatInterval)
	defer t.Stop()
	lastOK := time.Now()
	unconfirmed := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Group, hb.Generation, hb.MemberID = g.cfg.GroupID, g.generation, g.memberID
		hctx, cancel := context.WithTimeout(ctx, g.cfg.SessionTimeout)
		resp, err := hb.RequestWith(hctx, g.cfg.Client)
		cancel()
		if err == nil {
			g.answered()
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		switch {
		case err == nil:
			lastOK = time.Now()
			if unconfirmed {
				unconfirmed = false
				g.cfg.Logger.Info("membership: a heartbeat answered again; the view is confirmed",
					slog.Int("generation", int(g.generation)))
				g.setCurrent(true)
			}
		case errors.Is(err, kerr.RebalanceInProgress), errors.Is(err, kerr.IllegalGeneration):
			return
		case errors.Is(err, kerr.UnknownMemberID), errors.Is(err, kerr.FencedInstanceID):
			g.memberID = ""
			g.outOfGroup()
			return
		default:
			if ctx.Err() != nil {
				return
			}
			if !unconfirmed && time.Since(lastOK) >= g.cfg.SessionTimeout {
				unconfirmed = true
				g.cfg.Logger.Warn("membership: no heartbeat answered for a session timeout; keeping the view, unconfirmed, and heartbeating on",
					slog.Any("err", err))
				if !g.lapse() {
					g.setCurrent(false)
				}
			} else if unconfirmed {
				g.lapse()
			}
		}
	}
}

// abandon stops the loop as a process that dies would: no LeaveGroup,
// no more heartbeats (tests).
func (g *Group) abandon() {
	g.noLeave.Store(true)
	g.Close()
}

// leave sends LeaveGroup (bounded), so the others see this sidecar gone
// at once.
func (g *Group) leave() {
	if g.memberID == "" || g.noLeave.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lg := kmsg.NewPtrLeaveGroupRequest()
	lg.Group, lg.MemberID = g.cfg.GroupID, g.memberID
	lg.Members = []kmsg.LeaveGroupRequestMember{{MemberID: g.memberID, Reason: kmsg.StringPtr("sidecar stopping")}}
	if _, err := lg.RequestWith(ctx, g.cfg.Client); err != nil {
		g.cfg.Logger.Debug("membership: LeaveGroup failed; the others see this sidecar gone after its session timeout", slog.Any("err", err))
	}
	g.outOfGroup()
}
