package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/metalog"
)

// gate holds heldFollower's Wait back while held.
type gate struct {
	mu   sync.Mutex
	open chan struct{} // nil: not held
}

func (g *gate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open == nil {
		g.open = make(chan struct{})
	}
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open != nil {
		close(g.open)
		g.open = nil
	}
}

func (g *gate) pass(ctx context.Context) error {
	g.mu.Lock()
	ch := g.open
	g.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// heldFollower is a follower whose Wait does not return while its gate is
// held — a Kafka log's follower whose long-poll has not answered yet — so
// its replica stays behind the log; a Replay asked for anyway
// (replica.sync) reads what is there.
type heldFollower struct {
	metalog.Follower
	g *gate
}

func (f heldFollower) Wait(ctx context.Context, next int64) error {
	if err := f.Follower.Wait(ctx, next); err != nil {
		return err
	}
	return f.g.pass(ctx)
}

// holdFollowers makes node's followers of shards held back by g (every
// shard when shards is empty).
func holdFollowers(node int32, g *gate, shards ...int32) func(*Config) {
	return func(c *Config) {
		if c.NodeID != node {
			return
		}
		follow := c.OpenFollower
		c.OpenFollower = func(s int32) (metalog.Follower, error) {
			f, err := follow(s)
			if err != nil || (len(shards) > 0 && !slices.Contains(shards, s)) {
				return f, err
			}
			return heldFollower{Follower: f, g: g}, nil
		}
	}
}

// splitThree splits topic "t" (8 partitions) over A (shards 0–1) and B
// (2–3) of a three-node cluster and waits until C's catalog has it; it
// returns the topic and a partition on one of B's shards, and that shard.
func splitThree(t *testing.T, cl *cluster) (diskless.Topic, int32, int32) {
	t.Helper()
	top := cl.split("t", 8)
	part := partitionOn(t, cl.nodes[0], top, 2, 4)
	c := cl.nodes[2]
	waitFor(t, c, "the topic in C's catalog", func() bool { _, ok := c.Topic("t"); return ok })
	return top, part, c.ShardFor(top.ID, part)
}

// partitionOn returns a partition of t whose shard is in [lo, hi).
func partitionOn(t *testing.T, c *Coordinator, top diskless.Topic, lo, hi int32) int32 {
	t.Helper()
	for p := range top.Partitions {
		if s := c.ShardFor(top.ID, p); s >= lo && s < hi {
			return p
		}
	}
	t.Fatalf("no partition of %s on shards [%d, %d)", top.Name, lo, hi)
	return -1
}

// TestDisablementConfirmedOnceCatalogHoldsIt: B's replica of shard 0's
// catalog is held back, so B's shards still commit the topic after A
// moved it to DISABLING (a replica is a moment behind by design). B's
// confirmation of DisklessDisableTopic waits until its catalog holds the
// disablement (AwaitDisablement, which the handler calls): while held, it
// does not confirm and A's pass stops there, DISABLING; once B's replica
// caught up it confirms, and a commit of the topic at B after the
// confirmation is refused. Before, B confirmed at once, behind, and its
// shard took the topic's batches after the driver counted it confirmed
// (SPEC §10; DESIGN §Decisions: Disablement).
func TestDisablementConfirmedOnceCatalogHoldsIt(t *testing.T) {
	ctx := context.Background()
	var lag gate
	var sc clusterSidecars
	cl := newCluster(t, 2, func(c *Config) { c.Sidecars = &sc }, holdFollowers(2, &lag, 0))
	sc.cl = cl
	top := cl.split("t", 8)
	a, b := cl.nodes[0], cl.nodes[1]
	part := partitionOn(t, a, top, 2, 4) // on a shard B hosts
	shard := b.ShardFor(top.ID, part)
	commitAtB := func() diskless.CommitBatchResult {
		t.Helper()
		rs, err := b.CommitFile(ctx, shard, commitRequest(b, nextKey(), plain(top, part, 1)))
		if err != nil {
			t.Fatalf("commit at B: %v", err)
		}
		return rs[0]
	}

	lag.hold()
	if _, err := a.AlterTopicConfigs(ctx, top.ID, setConfigs("diskless.enable", "false")); err != nil {
		t.Fatal(err)
	}
	cur, _ := a.Topic("t")
	if cur.Disablement.State != diskless.TopicDisabling {
		t.Fatalf("A's catalog: %v, want DISABLING", cur.Disablement.State)
	}
	req := diskless.DisableTopicRequest{TopicID: top.ID, Topic: top.Name, Epoch: cur.Disablement.Epoch}
	if cur, _ := b.Topic("t"); cur.Disablement.State != diskless.TopicEnabled {
		t.Fatalf("B's replica held back, its catalog: %v, want still ENABLED", cur.Disablement.State)
	}
	if r := commitAtB(); r.Err != nil {
		t.Fatalf("B's shard with its catalog behind: %v, want the batch taken (the replica's lag)", r.Err)
	}

	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := b.AwaitDisablement(wctx, req)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "epoch 0, behind the disablement's epoch 1") {
		t.Fatalf("AwaitDisablement with B's catalog behind: %v, want the deadline, naming the epochs", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = a.runDisablement(pctx)
	cancel()
	if err == nil || !strings.Contains(err.Error(), "sidecar 2 did not confirm") {
		t.Fatalf("a pass with B's catalog behind: %v, want B not confirmed", err)
	}
	if cur, _ := a.Topic("t"); cur.Disablement.State != diskless.TopicDisabling {
		t.Fatalf("B not confirmed: %v, want DISABLING", cur.Disablement.State)
	}

	confirmed := make(chan error, 1)
	go func() {
		_, err := sc.DisableTopic(ctx, 2, req)
		confirmed <- err
	}()
	select {
	case err := <-confirmed:
		t.Fatalf("B confirmed with its catalog behind (%v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	lag.release()
	if err := <-confirmed; err != nil {
		t.Fatalf("B's confirmation once its replica caught up: %v", err)
	}
	if r := commitAtB(); r.Err != diskless.ErrDisabling {
		t.Fatalf("a commit of the topic at B after B confirmed: %v, want %v", r.Err, diskless.ErrDisabling)
	}
	if err := a.runDisablement(ctx); err != nil {
		t.Fatal(err)
	}
	if cur, _ := a.Topic("t"); cur.Disablement.State != diskless.TopicDisabled {
		t.Fatalf("every sidecar confirmed: %v, want DISABLED", cur.Disablement.State)
	}
}

// TestTakeoverReadsCatalogCurrent: C, a sidecar outside the driver's view
// (it joined after the sends, say), its replica of shard 0's catalog held
// back, takes a shard of the topic over once the topic is DISABLED. The
// takeover reads the catalog current before the shard serves
// (syncCatalog), so the shard refuses the topic's batches; before, it
// decided them against its stale catalog and took one after DISABLED.
func TestTakeoverReadsCatalogCurrent(t *testing.T) {
	ctx := context.Background()
	var lag gate
	var sc clusterSidecars // the view: A and B
	cl := newCluster(t, 3, func(c *Config) { c.Sidecars = &sc }, holdFollowers(3, &lag, 0))
	sc.cl = cl
	top, part, shard := splitThree(t, cl)
	a, b, c := cl.nodes[0], cl.nodes[1], cl.nodes[2]

	lag.hold()
	if _, err := a.AlterTopicConfigs(ctx, top.ID, setConfigs("diskless.enable", "false")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, b, "DISABLING in B's catalog", func() bool {
		cur, _ := b.Topic("t")
		return cur.Disablement.State == diskless.TopicDisabling
	})
	if err := a.runDisablement(ctx); err != nil {
		t.Fatal(err)
	}
	if cur, _ := a.Topic("t"); cur.Disablement.State != diskless.TopicDisabled {
		t.Fatalf("A and B confirmed: %v, want DISABLED", cur.Disablement.State)
	}
	if cur, _ := c.Topic("t"); cur.Disablement.State != diskless.TopicEnabled {
		t.Fatalf("C's replica held back, its catalog: %v, want still ENABLED", cur.Disablement.State)
	}

	cl.host(2, shard)
	if cur, _ := c.Topic("t"); cur.Disablement.State != diskless.TopicDisabled {
		t.Fatalf("C's catalog once it hosts shard %d: %v, want DISABLED", shard, cur.Disablement.State)
	}
	rs, err := c.CommitFile(ctx, shard, commitRequest(c, nextKey(), plain(top, part, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Err != diskless.ErrDisabled {
		t.Fatalf("a commit of the DISABLED topic at C, which took shard %d over: %+v, want %v", shard, rs[0], diskless.ErrDisabled)
	}
	lag.release()
}

// TestTakeoverFailsWhileCatalogUnread: a takeover whose read of shard 0's
// log fails (its broker gone) fails within the Host's deadline, leaving
// the shard followed from where the takeover's replay got to — before,
// the replica replayed those records again from where it had been ("file
// committed twice", a reload) — and a takeover once the log answers
// serves the shard, its offsets dense after the previous owners'.
func TestTakeoverFailsWhileCatalogUnread(t *testing.T) {
	ctx := context.Background()
	var lag gate
	var down atomic.Bool
	logs := &logBuffer{}
	cl := newCluster(t, 3, holdFollowers(3, &lag), func(c *Config) {
		if c.NodeID != 3 {
			return
		}
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		follow := c.OpenFollower
		c.OpenFollower = func(s int32) (metalog.Follower, error) {
			f, err := follow(s)
			if s != 0 {
				return f, err
			}
			return flakyFollower{Follower: f, down: &down}, err
		}
	})
	top, part, shard := splitThree(t, cl)
	a, b, c := cl.nodes[0], cl.nodes[1], cl.nodes[2]

	// C's replicas stay behind B's commits; the takeover's replay
	// applies them.
	lag.hold()
	for i := range 3 {
		rs, err := b.CommitFile(ctx, shard, commitRequest(b, nextKey(), plain(top, part, 2)))
		if err != nil || rs[0].Err != nil || rs[0].BaseOffset != int64(2*i) {
			t.Fatalf("commit %d at B: %+v %v", i, rs, err)
		}
	}
	down.Store(true)
	hctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := c.Host(hctx, shard)
	cancel()
	if err == nil || !strings.Contains(err.Error(), "reading the catalog current") {
		t.Fatalf("Host with shard 0's log unreadable: %v, want it failed reading the catalog", err)
	}
	if c.Hosted(shard) {
		t.Fatal("C hosts the shard after its takeover failed")
	}
	down.Store(false)
	lag.release()

	// A takes the shard over and commits: C's replica applies that
	// commit after the records its failed takeover applied already,
	// each once.
	cl.host(0, shard)
	rs, err := a.CommitFile(ctx, shard, commitRequest(a, nextKey(), plain(top, part, 1)))
	if err != nil || rs[0].Err != nil || rs[0].BaseOffset != 6 {
		t.Fatalf("commit at A after B's three of two records: %+v %v, want base offset 6", rs, err)
	}
	find := []diskless.FindBatchesRequest{{TopicID: top.ID, Partition: part, MaxBytes: 1 << 20}}
	waitFor(t, c, "A's commit in C's replica", func() bool { return c.FindBatches(ctx, find)[0].HighWatermark == 7 })
	if l := logs.String(); strings.Contains(l, "loading it again") {
		t.Fatalf("C's replica applied records twice after the failed takeover:\n%s", l)
	}
	cl.host(2, shard)
	rs, err = c.CommitFile(ctx, shard, commitRequest(c, nextKey(), plain(top, part, 1)))
	if err != nil || rs[0].Err != nil || rs[0].BaseOffset != 7 {
		t.Fatalf("commit at C: %+v %v, want base offset 7", rs, err)
	}
}
