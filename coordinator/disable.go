package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
)

// Disablement (SPEC §10, KIP-950's pattern; record 111). AlterTopicConfigs
// moves a topic to DISABLING with a new epoch; runDisablement then, for
// each topic in DISABLING:
//
//  1. sends DisklessDisableTopic(topic, epoch, policy) to every sidecar
//     Config.Sidecars knows, and stops there when one did not confirm
//     (the next pass sends again, to all: each send is idempotent); a
//     sidecar confirms only once its catalog holds the disablement
//     (AwaitDisablement), so every commit group a shard it hosts starts
//     after refuses the topic;
//  2. waits until no transaction is open in any of the topic's partitions
//     (stops there until the next pass): while DISABLING a partition still
//     takes the markers that end its open transactions (closesTxnWhileDisabling),
//     which EndTxn or the transaction timeout's abort write, so that
//     read_committed readers see the last stable offset reach the high
//     watermark before the topic leaves diskless (SPEC §10). The shards
//     hosted here are read here; in a cluster the others are read by the
//     sidecars hosting them, whose confirmations of a second
//     DisklessDisableTopic — sent once every sidecar confirmed the first,
//     so no batch of the topic can commit after — answer for each shard
//     of the topic they host (diskless.DisableTopicResult,
//     Coordinator.TopicTxns); a shard none answered for counts as open,
//     and is warned of once it stayed so unansweredWarnAfter (below);
//  3. with policy delete, moves every partition's log start to its high
//     watermark (record 103 on each owning shard, skipped where it is
//     there already) — no commit of the topic can come after: every
//     owner's catalog held DISABLING when it confirmed (or answered for
//     its shards), an owner taking a shard over later reads the catalog
//     current first (syncCatalog), so every group a shard starts after
//     refuses the topic's batches, and the 103 is a deferred request,
//     decided after every group started before it;
//  4. writes record 111 DISABLED on shard 0 (nothing, when the topic left
//     DISABLING at that epoch meanwhile).
//
// A coordinator that opens with a topic in DISABLING starts again from 1.

// Sidecars reaches the sidecars that may take produce for a topic
// (DisklessDisableTopic, SPEC §9 API key 109). Today the one sidecar is
// this process (cmd/sidecar implements it in-process); a cluster of
// sidecars implements it with the RPC.
type Sidecars interface {
	// Nodes returns the node ids of every sidecar the coordinator knows.
	Nodes() []int32
	// DisableTopic asks sidecar node to stop taking produce for the
	// topic, end its fetch long-polls on it and drop its cached data,
	// and returns nil once it did (it confirmed: its catalog holds the
	// disablement at req's epoch, AwaitDisablement), with the open
	// transactions of the topic's shards it hosts (Coordinator.TopicTxns
	// there; nothing from this sidecar's own node, whose shards the
	// coordinator reads itself). It must be safe to repeat; an error
	// means "not confirmed": it is sent again.
	DisableTopic(ctx context.Context, node int32, req diskless.DisableTopicRequest) (diskless.DisableTopicResult, error)
}

// errTxnsOpen is driveDisablement's answer while a transaction is open in
// one of the topic's partitions: not a failure, the next pass looks again.
var errTxnsOpen = errors.New("a transaction is open in one of its partitions")

// unansweredError is driveDisablement's answer while no sidecar answered
// for some of the topic's shards (txnsClosedElsewhere): they count as
// holding an open transaction, and the next pass looks again.
type unansweredError struct {
	topic  string
	shards []int32
}

func (e *unansweredError) Error() string {
	return fmt.Sprintf("%s, shards %v: no sidecar answered whether a transaction is open there", e.topic, e.shards)
}

// unansweredKey names one disablement: a topic at a disablement epoch.
type unansweredKey struct {
	topic diskless.TopicID
	epoch int32
}

// unansweredWarnAfter is how long a disablement's shards may stay
// unanswered before it is warned of. A shard loading (a takeover's
// replay) or a catalog a moment behind the epoch is transient and quiet;
// one that no sidecar hosts, or whose owner runs a version without
// DisklessDisableTopic's TxnShards, holds the disablement until an
// operator acts, and is warned of under a message of its own, so that
// its rate limit cannot silence the "did not confirm" lines of the
// retry warning (DESIGN §Logging).
const unansweredWarnAfter = time.Minute

// msgUnanswered is the rate-limited warning of a lasting unanswered
// stall (subject: the topic).
const msgUnanswered = "coordinator: disablement held: no sidecar answers for some of the topic's shards (none hosts them, or their owner runs a version without the answer); waiting"

// disableSendTimeout bounds one DisklessDisableTopic.
const disableSendTimeout = 30 * time.Second

// runDisablement drives every topic in DISABLING one step further (see
// above). The error joins the topics' failures; the next pass retries.
func (c *Coordinator) runDisablement(ctx context.Context) error {
	c.jobs.disable.Lock()
	defer c.jobs.disable.Unlock()
	if !c.owns(c.shards[0]) {
		return nil // the catalog's owner drives disablements
	}
	var errs []error
	stalled := c.jobs.unanswered
	c.jobs.unanswered = nil
	for _, t := range c.Topics() {
		if t.Disablement.State != diskless.TopicDisabling {
			continue
		}
		err := c.driveDisablement(ctx, t)
		if errors.Is(err, errTxnsOpen) {
			c.logger.Debug("coordinator: disablement waits for open transactions", "topic", t.Name, "epoch", t.Disablement.Epoch)
			continue
		}
		if ue := (*unansweredError)(nil); errors.As(err, &ue) {
			c.unanswered(ctx, t, ue, stalled)
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("coordinator: disablement of topic %q (epoch %d): %w", t.Name, t.Disablement.Epoch, err))
			if errors.Is(err, diskless.ErrClosed) || ctx.Err() != nil {
				break
			}
		}
	}
	return errors.Join(errs...)
}

// unanswered notes that a pass found shards of t no sidecar answered for
// (ue), keeping when a pass first found it so from stalled (the last
// pass's), and warns of it (rate-limited) once that is unansweredWarnAfter
// ago; until then it writes a Debug line. A disablement absent from a pass — it went
// on, or failed otherwise — starts again from its next finding. Called
// with jobs.disable held.
func (c *Coordinator) unanswered(ctx context.Context, t diskless.Topic, ue *unansweredError, stalled map[unansweredKey]time.Time) {
	k := unansweredKey{t.ID, t.Disablement.Epoch}
	now := c.cfg.Now()
	since, ok := stalled[k]
	if !ok {
		since = now
	}
	if c.jobs.unanswered == nil {
		c.jobs.unanswered = make(map[unansweredKey]time.Time)
	}
	c.jobs.unanswered[k] = since
	if now.Sub(since) < unansweredWarnAfter {
		c.logger.Debug("coordinator: disablement waits for an answer for some shards", "topic", t.Name, "epoch", t.Disablement.Epoch, "shards", ue.shards)
		return
	}
	c.retryLog.Log(ctx, slog.LevelWarn, t.Name, msgUnanswered, slog.Int("epoch", int(t.Disablement.Epoch)),
		slog.Any("shards", ue.shards), slog.Duration("for", now.Sub(since).Round(time.Second)))
}

func (c *Coordinator) driveDisablement(ctx context.Context, t diskless.Topic) error {
	d := t.Disablement
	req := diskless.DisableTopicRequest{TopicID: t.ID, Topic: t.Name, Epoch: d.Epoch, Policy: d.Policy}
	if sc := c.cfg.Sidecars; sc != nil {
		var errs []error
		for _, n := range sc.Nodes() {
			if _, err := c.sendDisable(ctx, n, req); err != nil {
				errs = append(errs, err)
			}
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	var elsewhere []int32
	for s := range c.topicShards(t) {
		err := c.onShard(s, func() error { return c.shards[s].txnsClosed(ctx, t) },
			func() error { elsewhere = append(elsewhere, s); return nil })
		if err != nil {
			return err
		}
	}
	if err := c.txnsClosedElsewhere(ctx, req, elsewhere); err != nil {
		return err
	}
	if d.Policy == diskless.DisableDelete {
		for s := range c.topicShards(t) {
			err := c.onShard(s, func() error { return c.shards[s].releaseTopic(ctx, t) },
				func() error { return c.releaseTopicRemote(ctx, s, t) })
			if err != nil {
				return err
			}
		}
	}
	resp := c.shards[0].do(&request{ctx: ctx, build: func(st *state) ([]records.Record, error) {
		te := st.topics[t.ID]
		if te == nil || te.disable != d {
			return nil, nil // deleted, or moved on meanwhile
		}
		return []records.Record{&records.TopicDisablement{TopicID: t.ID, State: int8(diskless.TopicDisabled), Epoch: d.Epoch, Policy: int8(d.Policy)}}, nil
	}})
	if resp.err != nil {
		return resp.err
	}
	c.logger.Info("coordinator: diskless disabled on a topic", "topic", t.Name, "epoch", d.Epoch, "policy", d.Policy.String())
	return nil
}

// sendDisable sends req to sidecar n through Config.Sidecars, within
// disableSendTimeout, counting the send and its failure.
func (c *Coordinator) sendDisable(ctx context.Context, n int32, req diskless.DisableTopicRequest) (diskless.DisableTopicResult, error) {
	sctx, cancel := context.WithTimeout(ctx, disableSendTimeout)
	defer cancel()
	res, err := c.cfg.Sidecars.DisableTopic(sctx, n, req)
	c.stats.DisableSends.Add(1)
	if err != nil {
		c.stats.DisableSendFailures.Add(1)
		return res, fmt.Errorf("sidecar %d did not confirm: %w", n, err)
	}
	return res, nil
}

// txnsClosedElsewhere returns errTxnsOpen while a transaction is open in
// one of the topic's partitions on one of shards, hosted by other
// sidecars, or an *unansweredError naming the shards none of them
// answered for (not hosted anywhere, loading, or its owner's catalog
// behind req's epoch). It
// sends req again to every other sidecar: every sidecar confirmed it
// once already, so their answers read states no batch of the topic can
// change but a marker (step 2 above). Without Config.Sidecars (tests of
// the coordinator alone) it reads nothing.
func (c *Coordinator) txnsClosedElsewhere(ctx context.Context, req diskless.DisableTopicRequest, shards []int32) error {
	sc := c.cfg.Sidecars
	if len(shards) == 0 || sc == nil {
		return nil
	}
	answered := make(map[int32]bool, len(shards))
	for _, n := range sc.Nodes() {
		if n == c.cfg.NodeID {
			continue
		}
		res, err := c.sendDisable(ctx, n, req)
		if err != nil {
			return err
		}
		for _, st := range res.TxnShards {
			if st.Open {
				return fmt.Errorf("%w: %s, on shard %d at sidecar %d", errTxnsOpen, req.Topic, st.Shard, n)
			}
			answered[st.Shard] = true
		}
	}
	var unanswered []int32
	for _, s := range shards {
		if !answered[s] {
			unanswered = append(unanswered, s)
		}
	}
	if len(unanswered) > 0 {
		return &unansweredError{topic: req.Topic, shards: unanswered}
	}
	return nil
}

// AwaitDisablement returns nil once this sidecar's catalog — shard 0's
// state when shard 0 is hosted here, else its read replica of it — holds
// req's topic at req's disablement epoch or a later one (SPEC §10): from
// then on every commit group a shard hosted here starts refuses the
// topic's batches but the markers closing its open transactions
// (shard.process reads the catalog when it decides a group), and the
// produce path refuses the topic. A confirmation of DisklessDisableTopic
// waits for it (cmd/sidecar's disableSelf): a replica behind the
// disablement would otherwise let a shard owned here commit the topic
// after the driver counted this sidecar confirmed. A topic the catalog
// does not hold is waited for too: the replica may be behind its
// creation. Errors: ctx's, wrapped with the epoch the catalog holds.
func (c *Coordinator) AwaitDisablement(ctx context.Context, req diskless.DisableTopicRequest) error {
	for {
		cat := c.catalog.Load()
		t := cat.byID[req.TopicID]
		if t != nil && t.Disablement.Epoch >= req.Epoch {
			return nil
		}
		select {
		case <-cat.replaced:
		case <-ctx.Done():
			held := "does not hold the topic"
			if t != nil {
				held = fmt.Sprintf("holds it at disablement epoch %d", t.Disablement.Epoch)
			}
			return fmt.Errorf("coordinator: this sidecar's catalog %s, behind the disablement's epoch %d: %w", held, req.Epoch, ctx.Err())
		}
	}
}

// TopicTxns answers, for each shard of req's topic's partitions hosted
// here, whether a transaction is open in one of the topic's partitions
// there (txnsClosed: the durable state, after the log confirmed current),
// for a disablement driven by another sidecar (diskless.DisableTopicResult,
// step 2 above). A shard that cannot answer (loading, fenced, failed) is
// left out, as is every shard while this sidecar's catalog does not hold
// the topic at req's disablement epoch (its partition count may be
// behind).
func (c *Coordinator) TopicTxns(ctx context.Context, req diskless.DisableTopicRequest) []diskless.ShardTxns {
	t, ok := c.TopicByID(req.TopicID)
	if !ok || t.Disablement.Epoch < req.Epoch {
		return nil
	}
	var out []diskless.ShardTxns
	for _, s := range slices.Sorted(maps.Keys(c.topicShards(t))) {
		if c.clustered() && !c.shards[s].hosted() {
			continue
		}
		switch err := c.shards[s].txnsClosed(ctx, t); {
		case err == nil:
			out = append(out, diskless.ShardTxns{Shard: s})
		case errors.Is(err, errTxnsOpen):
			out = append(out, diskless.ShardTxns{Shard: s, Open: true})
		}
	}
	return out
}

// txnsClosed returns errTxnsOpen while a transaction is open in one of s's
// partitions of t, else nil. It is a deferred request: it looks at the
// durable state, after every commit group started before it (a marker
// decided but not yet durable does not count).
func (s *shard) txnsClosed(ctx context.Context, t diskless.Topic) error {
	resp := s.do(&request{ctx: ctx, deferred: true, build: func(st *state) ([]records.Record, error) {
		for p := range t.Partitions {
			part := st.partitions[diskless.TopicPartition{TopicID: t.ID, Partition: p}]
			if part != nil && !part.deleted && part.txns != nil && len(part.txns.open) > 0 {
				return nil, fmt.Errorf("%w: %s/%d, from offset %d", errTxnsOpen, t.Name, p, part.lso())
			}
		}
		return nil, nil
	}})
	return resp.err
}

// releaseTopic moves the log start of each of s's partitions of t to its
// high watermark (record 103 where it is not there already), releasing
// every batch of the topic on s.
func (s *shard) releaseTopic(ctx context.Context, t diskless.Topic) error {
	resp := s.do(&request{ctx: ctx, deferred: true, build: func(st *state) ([]records.Record, error) {
		var recs []records.Record
		for p := range t.Partitions {
			part := st.partitions[diskless.TopicPartition{TopicID: t.ID, Partition: p}]
			if part == nil || part.deleted || part.logStart == part.hwm || s.c.ShardFor(t.ID, p) != s.id {
				continue
			}
			recs = append(recs, &records.RecordsDeleted{TopicID: t.ID, Partition: p, NewLogStartOffset: part.hwm})
		}
		return recs, nil
	}})
	return resp.err
}

// releaseTopicRemote is releaseTopic at shard's owner: every partition of
// t on shard moved to its high watermark (DeleteRecords −1, which the
// owner writes as a deferred record 103, after every commit group started
// before it).
func (c *Coordinator) releaseTopicRemote(ctx context.Context, shard int32, t diskless.Topic) error {
	for p := range t.Partitions {
		if c.ShardFor(t.ID, p) != shard {
			continue
		}
		if _, err := c.cfg.Remote.DeleteRecords(ctx, diskless.TopicPartition{TopicID: t.ID, Partition: p}, -1); err != nil {
			return err
		}
	}
	return nil
}

// kickLifecycle wakes the lifecycle loop now.
func (c *Coordinator) kickLifecycle() {
	select {
	case c.lifecycleKick <- struct{}{}:
	default:
	}
}

// lifecycleLoop runs the disablements and the purge every
// Config.LifecycleInterval and whenever kicked, until ctx is done.
func (c *Coordinator) lifecycleLoop(ctx context.Context) {
	t := time.NewTicker(c.cfg.LifecycleInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.lifecycleKick:
		}
		c.lifecyclePass(ctx)
	}
}

// lifecyclePass runs the disablements and the purge once. Both fail every
// pass while a sidecar is down or a shard failed: the first line at once,
// then a count a minute (DESIGN §Logging). A fenced shard's refusal is not
// worth even that: the fencing was logged once, and the shard never
// serves again.
func (c *Coordinator) lifecyclePass(ctx context.Context) {
	if err := c.runDisablement(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, diskless.ErrShardFenced) {
		c.retryLog.Log(ctx, slog.LevelWarn, "", "coordinator: disablement not finished; retrying", slog.Any("err", err))
	}
	if err := c.runPurge(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, diskless.ErrShardFenced) {
		c.retryLog.Log(ctx, slog.LevelWarn, "", "coordinator: purge of deleted topics failed; retrying", slog.Any("err", err))
	}
}
