package coordinator

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/metalog"
)

// waitHealth waits until shard's health on c is want, and returns it.
func waitHealth(t *testing.T, c *Coordinator, shard int32, want ShardState) ShardHealth {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		h := c.ShardHealth()[shard]
		if h.State == want {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("shard %d: %v (%v), want %v within 30 s", shard, h.State, h.Err, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestShardHealthRebuildRetrying: a hosted shard whose rebuild cannot
// read its log for now is ShardRetrying, naming the cause: Err (liveness,
// /healthz) stays nil — the retry heals it, a restart would not — and
// Unserved (readiness, /readyz) names it; once the log answers it is
// serving and both are nil. Before the retrying state Err reported the
// shard failed, and a liveness probe restarted the process.
func TestShardHealthRebuildRetrying(t *testing.T) {
	e, top, l := oneCommitOnTestLog(t)
	if h := e.c.ShardHealth()[0]; h.State != ShardServing || !h.Hosted || h.Err != nil {
		t.Fatalf("health of a shard serving: %+v", h)
	}
	l.setFail(func([][]byte) (bool, error) { return false, errBrokerGone })
	l.failReplay.Store(true)
	if _, err := e.tryCommit(nextKey(), plain(top, 0, 1)); err == nil {
		t.Fatal("commit whose append failed succeeded")
	}
	h := waitHealth(t, e.c, 0, ShardRetrying)
	if !h.Hosted || h.Err == nil || !strings.Contains(h.Err.Error(), "injected replay failure") {
		t.Fatalf("health of a shard retrying its rebuild: %+v, want hosted naming the replay's failure", h)
	}
	if err := e.c.Err(); err != nil {
		t.Fatalf("Err while the shard retries its rebuild: %v, want nil (live)", err)
	}
	if err := e.c.Unserved(); !errors.Is(err, ErrShardsUnserved) || !strings.Contains(err.Error(), "shard 0 retrying: ") {
		t.Fatalf("Unserved while the shard retries its rebuild: %v, want it named", err)
	}
	l.setFail(nil)
	l.failReplay.Store(false)
	waitHealth(t, e.c, 0, ShardServing)
	if err := e.c.Unserved(); err != nil {
		t.Fatalf("Unserved after the rebuild: %v", err)
	}
	if err := e.c.Err(); err != nil {
		t.Fatalf("Err after the rebuild: %v", err)
	}
}

// TestShardHealthCorruptFailed: a shard whose rebuild finds its log
// corrupt is ShardFailed: Err and Unserved both name it.
func TestShardHealthCorruptFailed(t *testing.T) {
	e, top, l := oneCommitOnTestLog(t)
	l.setFail(func([][]byte) (bool, error) { return false, errors.New("test: write failed") })
	l.mu.Lock()
	l.replayErrs = []error{errors.Join(metalog.ErrCorrupt, errors.New("test: bad frame"))}
	l.mu.Unlock()
	if _, err := e.tryCommit(nextKey(), plain(top, 0, 1)); err == nil {
		t.Fatal("commit whose append failed succeeded")
	}
	h := waitHealth(t, e.c, 0, ShardFailed)
	if !errors.Is(h.Err, metalog.ErrCorrupt) {
		t.Fatalf("health of a shard whose log is corrupt: %+v", h)
	}
	if err := e.c.Err(); !errors.Is(err, diskless.ErrShardFailed) || !strings.Contains(err.Error(), "shard 0: ") {
		t.Fatalf("Err: %v, want shard 0 failed", err)
	}
	if err := e.c.Unserved(); !errors.Is(err, ErrShardsUnserved) || !strings.Contains(err.Error(), "shard 0: ") {
		t.Fatalf("Unserved: %v, want shard 0 named", err)
	}
}

// TestShardHealthReplicaReloading: a read replica whose records failed
// to apply and whose reload cannot read its log is ShardRetrying (not
// hosted) on its sidecar — live, not served — and serving once its log
// answers; the owner's health is untouched.
func TestShardHealthReplicaReloading(t *testing.T) {
	cl, _, _, down := poisonedReplica(t)
	a, b := cl.nodes[0], cl.nodes[1]
	h := waitHealth(t, b, 1, ShardRetrying)
	if h.Hosted || !errors.Is(h.Err, errBrokerGone) {
		t.Fatalf("B's replica reloading: %+v, want a replica naming the log's failure", h)
	}
	if err := b.Err(); err != nil {
		t.Fatalf("B's Err while its replica retries: %v, want nil", err)
	}
	if err := b.Unserved(); err == nil || !strings.Contains(err.Error(), "shard 1 retrying: ") {
		t.Fatalf("B's Unserved: %v", err)
	}
	if err := a.Unserved(); err != nil {
		t.Fatalf("A's Unserved: %v", err)
	}
	down.Store(false)
	waitHealth(t, b, 1, ShardServing)
}

// TestShardHealthUnfollowed: a shard released whose log can no longer be
// followed at all (OpenFollower fails) is ShardFailed on that sidecar:
// neither hosted nor followed, its replica frozen until a restart.
func TestShardHealthUnfollowed(t *testing.T) {
	var refuse atomic.Bool
	cl := newCluster(t, 1, func(c *Config) {
		follow := c.OpenFollower
		c.OpenFollower = func(s int32) (metalog.Follower, error) {
			if refuse.Load() {
				return nil, errors.New("test: no follower")
			}
			return follow(s)
		}
	})
	a := cl.nodes[0]
	cl.host(0, 1)
	if h := a.ShardHealth()[1]; h.State != ShardServing || !h.Hosted {
		t.Fatalf("shard hosted: %+v", h)
	}
	refuse.Store(true)
	if err := a.Release(1); err == nil {
		t.Fatal("Release whose follower cannot open succeeded")
	}
	if h := a.ShardHealth()[1]; h.State != ShardFailed || h.Hosted || h.Err == nil {
		t.Fatalf("shard released and not followed: %+v, want failed", h)
	}
	if err := a.Err(); err == nil || !strings.Contains(err.Error(), "shard 1: ") {
		t.Fatalf("Err: %v, want shard 1 named", err)
	}
}

// countedFollower is a flakyFollower counting the Replays it failed.
type countedFollower struct {
	flakyFollower
	failed *atomic.Int32
}

func (f countedFollower) Replay(ctx context.Context, from int64, fn func(int64, []byte) error) (int64, error) {
	next, err := f.flakyFollower.Replay(ctx, from, fn)
	if err != nil {
		f.failed.Add(1)
	}
	return next, err
}

// TestShardHealthReplicaCatchUpFailing: a read replica whose ordinary
// catch-up reads fail (its log unreadable from this sidecar, not a whole
// reload) stays serving on its first failures — one Kafka blip must not
// flip every sidecar's readiness — and is retrying, naming the cause,
// once its reads have failed for replicaRetryingAfter without a success:
// live (Err nil), not served (Unserved names it). Its first successful
// read makes it serving again. Before, such a replica showed serving
// however long its reads failed, its FindBatches and long-polls standing
// still.
func TestShardHealthReplicaCatchUpFailing(t *testing.T) {
	ctx := context.Background()
	var down atomic.Bool
	var failed atomic.Int32
	clock := newFakeClock()
	cl := newCluster(t, 2, func(c *Config) {
		if c.NodeID != 2 {
			return
		}
		c.Now = clock.Now
		follow := c.OpenFollower
		c.OpenFollower = func(s int32) (metalog.Follower, error) {
			f, err := follow(s)
			if s != 1 {
				return f, err
			}
			return countedFollower{flakyFollower{Follower: f, down: &down}, &failed}, err
		}
	})
	a, b := cl.nodes[0], cl.nodes[1]
	top := cl.split("t", 8)
	p1 := partitionOn(t, a, top, 1, 2)
	commit := func(want int64) {
		t.Helper()
		if rs, err := a.CommitFile(ctx, 1, commitRequest(a, nextKey(), plain(top, p1, 1))); err != nil || rs[0].BaseOffset != want {
			t.Fatalf("commit: %+v %v, want base offset %d", rs, err, want)
		}
	}
	commit(0)
	waitFor(t, b, "the first commit on B's replica", func() bool { return hwm(b, top, p1) == 1 })

	down.Store(true)
	commit(1)
	for deadline := time.Now().Add(10 * time.Second); failed.Load() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("B's replica failed %d times in 10 s, want 2 in a row", failed.Load())
		}
	}
	if h := b.ShardHealth()[1]; h.State != ShardServing {
		t.Fatalf("B's replica after its first failed reads: %+v, want serving (not yet %v failing)", h, replicaRetryingAfter)
	}
	clock.Advance(replicaRetryingAfter)
	h := waitHealth(t, b, 1, ShardRetrying)
	if h.Hosted || !errors.Is(h.Err, errBrokerGone) {
		t.Fatalf("B's replica failing for %v: %+v, want a replica naming the log's failure", replicaRetryingAfter, h)
	}
	if err := b.Err(); err != nil {
		t.Fatalf("B's Err while its replica's reads fail: %v, want nil (live)", err)
	}
	if err := b.Unserved(); !errors.Is(err, ErrShardsUnserved) || !strings.Contains(err.Error(), "shard 1 retrying: ") {
		t.Fatalf("B's Unserved while its replica's reads fail: %v, want shard 1 named", err)
	}
	if err := a.Unserved(); err != nil {
		t.Fatalf("A's Unserved: %v", err)
	}

	down.Store(false)
	waitHealth(t, b, 1, ShardServing)
	if got := hwm(b, top, p1); got != 2 {
		t.Fatalf("B's replica serving again at high watermark %d, want 2", got)
	}
}

// TestShardHealthFollowErrCleared: a shard that once could not be
// followed (ShardFailed) and is then hosted here is no longer failed —
// not while Host takes it over, not while a later Release starts to
// follow it again. Before, followErr outlived the Host that made it
// untrue, and the Release's follow showed the shard failed (/healthz
// 503, a liveness restart) until it opened its follower.
func TestShardHealthFollowErrCleared(t *testing.T) {
	var refuse atomic.Bool
	opening := make(chan chan struct{}, 1)
	cl := newCluster(t, 1, func(c *Config) {
		follow := c.OpenFollower
		c.OpenFollower = func(s int32) (metalog.Follower, error) {
			if refuse.Load() {
				return nil, errors.New("test: no follower")
			}
			if s == 1 {
				select {
				case ch := <-opening:
					<-ch // the test looks at the shard meanwhile
				default:
				}
			}
			return follow(s)
		}
	})
	a := cl.nodes[0]
	cl.host(0, 1)
	refuse.Store(true)
	if err := a.Release(1); err == nil {
		t.Fatal("Release whose follower cannot open succeeded")
	}
	if h := a.ShardHealth()[1]; h.State != ShardFailed {
		t.Fatalf("shard released and not followed: %+v, want failed", h)
	}
	refuse.Store(false)
	cl.host(0, 1)
	if h := a.ShardHealth()[1]; h.State != ShardServing || !h.Hosted {
		t.Fatalf("shard hosted again: %+v, want hosted and serving", h)
	}
	// Release again, its follower's opening held while the shard is looked at.
	held := make(chan struct{})
	opening <- held
	released := make(chan error, 1)
	go func() { released <- a.Release(1) }()
	for deadline := time.Now().Add(10 * time.Second); len(opening) > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Release has not opened its follower within 10 s")
		}
	}
	h := a.ShardHealth()[1]
	liveErr := a.Err()
	close(held)
	if err := <-released; err != nil {
		t.Fatalf("Release: %v", err)
	}
	if h.State != ShardLoading || h.Err != nil || liveErr != nil {
		t.Fatalf("shard being released, its follower opening: %+v, Err %v; want loading and live", h, liveErr)
	}
	waitHealth(t, a, 1, ShardServing)
}
