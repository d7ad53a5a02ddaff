package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/group"
	"github.com/diskless-sidecar/sidecar/txn"
)

// Consumer groups (DESIGN §Consumer groups). Every shard hosts the group
// coordinator (package group) of the groups whose ids hash to it
// (diskless.GroupShardFor). The group coordinator is driven by the
// shard's driver only: a group request is a request on the shard's queue
// whose groupOp runs on the driver, in the group commit of the requests
// around it. Membership is soft state in the group coordinator; the
// committed offsets are the shard's state (state.groups), changed only by
// records 107 … 110 and 113 that the driver appends with the group's other
// records and applies once durable, before the answer. Deadlines
// (session and rebalance timeouts) and the periodic offset expiry fire
// from the driver's timer (groupTick).

// groupOp is a consumer-group request's work on the shard's driver: it
// runs against the shard's group coordinator at now and returns the
// records to write (none for most) and reply, called once they are durable
// (err nil) or could not be written (err set) — or not called at all when
// the shard refused the request before running it.
type groupOp func(gc *group.Coordinator, now time.Time) (recs []group.Record, reply func(err error))

// bodyKey returns a record body's key (the body starts with the frame
// version and the key as uvarints), so replay hands it to the package
// that decodes it: group's (107 … 110, 113), txn's (118) or records'.
func bodyKey(body []byte) (int16, bool) {
	r := kbin.Reader{Src: body}
	r.Uvarint()
	key := r.Uvarint()
	if !r.Ok() || key > 1<<15-1 {
		return -1, false
	}
	return int16(key), true
}

// groupTopics is the topic catalog as a shard's group coordinator sees it
// (group.Topics): the published catalog, an immutable snapshot.
type groupTopics struct{ c *Coordinator }

func (t groupTopics) Topic(name string) ([16]byte, int32, bool) {
	tp := t.c.catalog.Load().byName[name]
	if tp == nil {
		return [16]byte{}, 0, false
	}
	return tp.ID, tp.Partitions, true
}

func (t groupTopics) TopicByID(id [16]byte) (string, int32, bool) {
	tp := t.c.catalog.Load().byID[id]
	if tp == nil {
		return "", 0, false
	}
	return tp.Name, tp.Partitions, true
}

func (t groupTopics) Names() []string {
	cat := t.c.catalog.Load()
	names := make([]string, len(cat.sorted))
	for i, tp := range cat.sorted {
		names[i] = tp.Name
	}
	return names
}

func (t groupTopics) Version() uint64 { return t.c.catalog.Load().version }

// openGroups creates the shard's group coordinator over the offsets table
// just replayed, and its timer.
func (s *shard) openGroups() error {
	gc, err := group.New(s.c.cfg.Groups, group.Deps{Topics: groupTopics{s.c}, Logger: s.c.logger.With("shard", s.id)},
		s.mu.st.groups, s.c.cfg.Now())
	if err != nil {
		return fmt.Errorf("coordinator: shard %d: %w", s.id, err)
	}
	s.groups = gc
	tc, err := txn.New(s.c.cfg.Txns, s.mu.st.txns)
	if err != nil {
		return fmt.Errorf("coordinator: shard %d: %w", s.id, err)
	}
	s.txns = tc
	s.txnEpoch.Store(tc.Epoch())
	s.groupTimer = time.NewTimer(time.Hour)
	if every := s.c.cfg.OffsetsRetentionCheckInterval; every > 0 {
		s.nextExpiry = s.c.cfg.Now().Add(every)
	}
	return nil
}

// armGroupTimer sets the group timer to the group coordinator's next
// deadline or the next offset expiry check, whichever is first.
func (s *shard) armGroupTimer() {
	at, ok := s.groups.NextDeadline()
	if !s.nextExpiry.IsZero() && (!ok || s.nextExpiry.Before(at)) {
		at, ok = s.nextExpiry, true
	}
	d := time.Hour
	if ok {
		d = max(at.Sub(s.c.cfg.Now()), 0)
	}
	s.groupTimer.Reset(d)
}

// groupTick fires the group coordinator's due deadlines and, when due,
// writes the records of expired offsets: a request of the driver's own,
// processed like any other group.
func (s *shard) groupTick() {
	expire := false
	if now := s.c.cfg.Now(); !s.nextExpiry.IsZero() && !now.Before(s.nextExpiry) {
		expire = true
		s.nextExpiry = now.Add(s.c.cfg.OffsetsRetentionCheckInterval)
	}
	r := &request{ctx: context.Background(), done: make(chan response, 1)}
	r.group = func(gc *group.Coordinator, now time.Time) ([]group.Record, func(error)) {
		gc.Tick(now)
		if !expire {
			return nil, nil
		}
		recs := gc.ExpireOffsets(now)
		return recs, func(err error) {
			if err != nil {
				s.c.logger.Warn("coordinator: writing expired offsets failed; retried at the next check", "shard", s.id, "err", err)
			}
		}
	}
	s.process([]*request{r})
}

// GroupShard returns the shard owning a consumer group:
// diskless.GroupShardFor(group, NumShards()).
func (c *Coordinator) GroupShard(group string) int32 {
	return diskless.GroupShardFor(group, c.cfg.NumShards)
}

// groupDo runs op on shard's driver and returns once its reply (if any)
// was called. Errors: ErrShardLoading while the shard rebuilds its state
// or is being taken over (op not run), ErrNotCoordinator when another
// sidecar hosts it, ErrClosed, ctx's error before the shard took it,
// ErrShardFailed, the log write's error.
func (c *Coordinator) groupDo(ctx context.Context, shard int32, op groupOp) error {
	s := c.shards[shard]
	if s.rebuilding.Load() {
		return fmt.Errorf("%w (shard %d, %w)", diskless.ErrShardLoading, shard, kerr.CoordinatorLoadInProgress)
	}
	return s.do(&request{ctx: ctx, group: op}).err
}

// awaitParked waits for a parked JoinGroup or SyncGroup answer: until ch
// delivers, ctx is done or the coordinator closes (ErrClosed).
func awaitParked[T any](ctx context.Context, s *shard, ch <-chan T) (T, error) {
	var zero T
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-s.stopChan():
		return zero, diskless.ErrClosed
	}
}

// offer sends r on ch unless it already holds an answer: the group
// coordinator answers a parked call once, and the driver must never block.
func offer[T any](ch chan T, r T) {
	select {
	case ch <- r:
	default:
	}
}

// JoinGroup handles a classic JoinGroup request (group.Coordinator.JoinGroup)
// on the group's shard and waits for its answer, which a rebalance may
// hold back up to the rebalance timeout. Errors (the caller answers
// them): ErrClosed (also when the coordinator closes meanwhile), ctx's
// error, ErrShardFailed.
func (c *Coordinator) JoinGroup(ctx context.Context, req *kmsg.JoinGroupRequest, clientID, clientHost string) (*kmsg.JoinGroupResponse, error) {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	shard := c.GroupShard(req.Group)
	err := c.groupDo(ctx, shard, func(gc *group.Coordinator, now time.Time) ([]group.Record, func(error)) {
		gc.JoinGroup(now, req, clientID, clientHost, func(r *kmsg.JoinGroupResponse) { offer(ch, r) })
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	return awaitParked(ctx, c.shards[shard], ch)
}

// SyncGroup handles a classic SyncGroup request on the group's shard and
// waits for its answer (a follower's waits for the leader's
// assignment). Errors as JoinGroup's.
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) (*kmsg.SyncGroupResponse, error) {
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	shard := c.GroupShard(req.Group)
	err := c.groupDo(ctx, shard, func(gc *group.Coordinator, now time.Time) ([]group.Record, func(error)) {
		gc.SyncGroup(now, req, func(r *kmsg.SyncGroupResponse) { offer(ch, r) })
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	return awaitParked(ctx, c.shards[shard], ch)
}

// Heartbeat handles a classic Heartbeat request. Errors as JoinGroup's.
func (c *Coordinator) Heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) (*kmsg.HeartbeatResponse, error) {
	var resp *kmsg.HeartbeatResponse
	err := c.groupDo(ctx, c.GroupShard(req.Group), func(gc *group.Coordinator, now time.Time) ([]group.Record, func(error)) {
		resp = gc.Heartbeat(now, req)
		return nil, nil
	})
	return resp, err
}

// LeaveGroup handles a LeaveGroup request (v3+: a batch of members).
// Errors as JoinGroup's.
func (c *Coordinator) LeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) (*kmsg.LeaveGroupResponse, error) {
	var resp *kmsg.LeaveGroupResponse
	err := c.groupDo(ctx, c.GroupShard(req.Group), func(gc *group.Coordinator, now time.Time) ([]group.Record, func(error)) {
		resp = gc.LeaveGroup(now, req)
		return nil, nil
	})
	return resp, err
}

// CommitOffsets handles an OffsetCommit request (topics named; the caller
// resolves v10 topic ids) on the group's shard: the offsets are written
// as one record 107 with the shard's group commit and answered once
// durable. Errors as JoinGroup's, and the log write's error (nothing was
// committed, or the shard rebuilt its state from what was).
func (c *Coordinator) CommitOffsets(ctx context.Context, req *kmsg.OffsetCommitRequest) (*kmsg.OffsetCommitResponse, error) {
	var resp *kmsg.OffsetCommitResponse
	err := c.groupDo(ctx, c.GroupShard(req.Group), func(gc *group.Coordinator, now time.Time) ([]group.Record, func(error)) {
		r, rec := gc.CommitOffsets(now, req)
		resp = r
		if rec == nil {
			return nil, nil
		}
		return []group.Record{rec}, nil
	})
	return resp, err
}

// FetchOffsets answers one group of an OffsetFetch request
// (group.Coordinator.FetchOffsets) from the committed offsets the group's
// shard holds after every commit answered before the call. Errors as
// JoinGroup's.
func (c *Coordinator) FetchOffsets(ctx context.Context, req group.FetchRequest, requireStable bool) (kmsg.OffsetFetchResponseGroup, error) {
	var out kmsg.OffsetFetchResponseGroup
	err := c.groupDo(ctx, c.GroupShard(req.Group), func(gc *group.Coordinator, now time.Time) ([]group.Record, func(error)) {
		out = gc.FetchOffsets(req, requireStable)
		return nil, nil
	})
	return out, err
}

// DeleteOffsets handles an OffsetDelete request: record 108, answered once
// durable. Errors as CommitOffsets'.
func (c *Coordinator) DeleteOffsets(ctx context.Context, req *kmsg.OffsetDeleteRequest) (*kmsg.OffsetDeleteResponse, error) {
	var resp *kmsg.OffsetDeleteResponse
	err := c.groupDo(ctx, c.GroupShard(req.Group), func(gc *group.Coordinator, now time.Time) ([]group.Record, func(error)) {
		r, rec := gc.DeleteOffsets(req)
		resp = r
		if rec == nil {
			return nil, nil
		}
		return []group.Record{rec}, nil
	})
	return resp, err
}

// DeleteGroups deletes the groups (DeleteGroups): records 109, each on its
// group's shard, answered once durable, in request order. A shard that
// cannot answer gives its groups code (the caller's answer for err, which
// it gets back with the first such error).
func (c *Coordinator) DeleteGroups(ctx context.Context, groups []string, code func(error) int16) []kmsg.DeleteGroupsResponseGroup {
	out := make([]kmsg.DeleteGroupsResponseGroup, len(groups))
	for shard, idx := range c.byShard(groups) {
		ids := make([]string, len(idx))
		for i, j := range idx {
			ids[i] = groups[j]
		}
		var res []kmsg.DeleteGroupsResponseGroup
		err := c.groupDo(ctx, shard, func(gc *group.Coordinator, now time.Time) ([]group.Record, func(error)) {
			var recs []group.Record
			res, recs = gc.DeleteGroups(ids)
			return recs, nil
		})
		for i, j := range idx {
			if err != nil {
				out[j] = kmsg.DeleteGroupsResponseGroup{Group: groups[j], ErrorCode: code(err)}
				continue
			}
			out[j] = res[i]
		}
	}
	return out
}

// byShard groups the indexes of ids by owning shard.
func (c *Coordinator) byShard(ids []string) map[int32][]int {
	m := make(map[int32][]int)
	for i, id := range ids {
		s := c.GroupShard(id)
		m[s] = append(m[s], i)
	}
	return m
}

// ListGroups answers ListGroups from every shard this sidecar hosts (as a
// Kafka broker lists the groups it coordinates), sorted by group id.
// Errors: the first shard's that could not answer (the others' groups are
// still returned).
func (c *Coordinator) ListGroups(ctx context.Context, req *kmsg.ListGroupsRequest) ([]kmsg.ListGroupsResponseGroup, error) {
	var (
		out   []kmsg.ListGroupsResponseGroup
		first error
	)
	for i := range c.shards {
		if c.clustered() && !c.shards[i].hosted() {
			continue
		}
		var part []kmsg.ListGroupsResponseGroup
		err := c.groupDo(ctx, int32(i), func(gc *group.Coordinator, now time.Time) ([]group.Record, func(error)) {
			part = gc.ListGroups(req)
			return nil, nil
		})
		if err != nil && first == nil {
			first = err
		}
		out = append(out, part...)
	}
	slices.SortFunc(out, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
	return out, first
}

// DescribeGroups answers DescribeGroups for classic groups, in request
// order; a shard that cannot answer gives its groups code(err).
func (c *Coordinator) DescribeGroups(ctx context.Context, version int16, groups []string, code func(error) int16) []kmsg.DescribeGroupsResponseGroup {
	out := make([]kmsg.DescribeGroupsResponseGroup, len(groups))
	for shard, idx := range c.byShard(groups) {
		ids := make([]string, len(idx))
		for i, j := range idx {
			ids[i] = groups[j]
		}
		var res []kmsg.DescribeGroupsResponseGroup
		err := c.groupDo(ctx, shard, func(gc *group.Coordinator, now time.Time) ([]group.Record, func(error)) {
			res = gc.DescribeGroups(version, ids)
			return nil, nil
		})
		for i, j := range idx {
			if err != nil {
				d := kmsg.NewDescribeGroupsResponseGroup()
				d.Group, d.ErrorCode = groups[j], code(err)
				out[j] = d
				continue
			}
			out[j] = res[i]
		}
	}
	return out
}

// ConsumerGroupHeartbeat handles a KIP-848 ConsumerGroupHeartbeat request
// on the group's shard. Errors as JoinGroup's.
func (c *Coordinator) ConsumerGroupHeartbeat(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest, clientID, clientHost string) (*kmsg.ConsumerGroupHeartbeatResponse, error) {
	var resp *kmsg.ConsumerGroupHeartbeatResponse
	err := c.groupDo(ctx, c.GroupShard(req.Group), func(gc *group.Coordinator, now time.Time) ([]group.Record, func(error)) {
		resp = gc.ConsumerGroupHeartbeat(now, req, clientID, clientHost)
		return nil, nil
	})
	return resp, err
}

// ConsumerGroupDescribe answers ConsumerGroupDescribe in request order; a
// shard that cannot answer gives its groups code(err).
func (c *Coordinator) ConsumerGroupDescribe(ctx context.Context, groups []string, code func(error) int16) []kmsg.ConsumerGroupDescribeResponseGroup {
	out := make([]kmsg.ConsumerGroupDescribeResponseGroup, len(groups))
	for shard, idx := range c.byShard(groups) {
		ids := make([]string, len(idx))
		for i, j := range idx {
			ids[i] = groups[j]
		}
		var res []kmsg.ConsumerGroupDescribeResponseGroup
		err := c.groupDo(ctx, shard, func(gc *group.Coordinator, now time.Time) ([]group.Record, func(error)) {
			res = gc.ConsumerGroupDescribe(ids)
			return nil, nil
		})
		for i, j := range idx {
			if err != nil {
				d := kmsg.NewConsumerGroupDescribeResponseGroup()
				d.Group, d.ErrorCode = groups[j], code(err)
				out[j] = d
				continue
			}
			out[j] = res[i]
		}
	}
	return out
}

// HasGroups reports whether any shard holds offsets, committed or pending
// (Metadata then lists __consumer_offsets, as Kafka does once it exists);
// the offsets' guard a transaction's end leaves is not offsets. It reads
// each shard's state under its read lock.
func (c *Coordinator) HasGroups() bool {
	for _, s := range c.shards {
		s.mu.RLock()
		empty := s.mu.failed != nil || !s.mu.st.groups.HoldsOffsets()
		s.mu.RUnlock()
		if !empty {
			return true
		}
	}
	return false
}

// GroupOffsets returns a copy of the committed offsets of every group of
// every shard: group → topic → partition → offset (tests, /v1/groups).
func (c *Coordinator) GroupOffsets() map[string]map[string]map[int32]group.OffsetAndMetadata {
	out := make(map[string]map[string]map[int32]group.OffsetAndMetadata)
	for _, s := range c.shards {
		s.mu.RLock()
		if s.mu.failed == nil {
			o := s.mu.st.groups
			for _, g := range o.Groups() {
				tm := make(map[string]map[int32]group.OffsetAndMetadata)
				for _, t := range o.Topics(g) {
					pm := make(map[int32]group.OffsetAndMetadata)
					for _, p := range o.Partitions(g, t) {
						pm[p], _ = o.Get(g, t, p)
					}
					tm[t] = pm
				}
				out[g] = tm
			}
		}
		s.mu.RUnlock()
	}
	return out
}

// Offsets of deleted topics (SPEC §6: Kafka's group coordinator drops
// every group's offsets of a topic when it is deleted). A commit of a
// topic the catalog does not hold is refused on the driver
// (group.Coordinator.CommitOffsets), so offsets held of a name the catalog
// does not hold are a deleted topic's: DeleteTopic removes them, after its
// commit point, with one record 113 per shard that holds any; what a
// failure or a crash leaves is found by the purge pass (purgeTopicOffsets)
// and, for its name, by CreateTopic before it creates the topic again.
// All three run under createMu, so no topic of that name is created
// meanwhile.

// removeTopicOffsets writes record 113 for topic name on shard s if its
// groups hold offsets of it and the catalog does not hold the name (id:
// the deleted topic's, or zero). It returns whether it wrote one.
func (c *Coordinator) removeTopicOffsets(ctx context.Context, s int32, name string, id diskless.TopicID) (bool, error) {
	wrote := false
	err := c.groupDo(ctx, s, func(gc *group.Coordinator, now time.Time) ([]group.Record, func(error)) {
		if c.catalog.Load().byName[name] != nil {
			return nil, nil
		}
		rec := gc.DeleteTopicOffsets(name, id)
		if rec == nil {
			return nil, nil
		}
		return []group.Record{rec}, func(err error) { wrote = err == nil }
	})
	return wrote, err
}

// holdsTopicOffsets reports whether a group of s holds offsets of
// topic name (under s's read lock).
func (s *shard) holdsTopicOffsets(name string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.failed == nil && s.mu.st.groups.HasTopic(name)
}

// dropTopicOffsets removes every shard's offsets of the deleted topic
// (name, id) and returns the shards' failures joined; createMu is held.
func (c *Coordinator) dropTopicOffsets(ctx context.Context, name string, id diskless.TopicID) error {
	var errs []error
	for _, s := range c.shards {
		if !s.holdsTopicOffsets(name) {
			continue
		}
		if _, err := c.removeTopicOffsets(ctx, s.id, name, id); err != nil {
			errs = append(errs, fmt.Errorf("coordinator: shard %d: remove offsets of deleted topic %q: %w", s.id, name, err))
		}
	}
	return errors.Join(errs...)
}

// purgeTopicOffsets removes the offsets groups hold of topics the catalog
// does not hold (left by a DeleteTopic that failed or crashed after its
// commit point): a step of the purge pass.
func (c *Coordinator) purgeTopicOffsets(ctx context.Context) error {
	c.createMu.Lock()
	defer c.createMu.Unlock()
	cat := c.catalog.Load()
	var errs []error
	for _, s := range c.shards {
		s.mu.RLock()
		var names []string
		if s.mu.failed == nil {
			for _, n := range s.mu.st.groups.TopicNames() {
				if cat.byName[n] == nil {
					names = append(names, n)
				}
			}
		}
		s.mu.RUnlock()
		for _, n := range names {
			wrote, err := c.removeTopicOffsets(ctx, s.id, n, diskless.TopicID{})
			if err != nil {
				errs = append(errs, fmt.Errorf("coordinator: shard %d: remove offsets of deleted topic %q: %w", s.id, n, err))
				continue
			}
			if wrote {
				c.logger.Info("coordinator: removed consumer-group offsets of a topic the catalog does not hold", "shard", s.id, "topic", n)
			}
		}
	}
	return errors.Join(errs...)
}
