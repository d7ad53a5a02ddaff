package coordinator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/metalog"
)

// errBrokerGone is the transient failure the tests inject: what kgo
// answered while the broker leading a shard's metadata partition was
// SIGKILLed and restarting (e2e.TestClusterFailover/BrokerKill).
var errBrokerGone = errors.New("test: broker closed the connection immediately during api versions negotiation")

// oneCommitOnTestLog returns an env of one shard on a testLog (l), with
// topic top of one partition and one record committed in it: the start
// of the tests of a failed append's rebuild.
func oneCommitOnTestLog(t *testing.T) (e *env, top diskless.Topic, l *testLog) {
	logs, mu := map[int32]*testLog{}, &sync.Mutex{}
	e = newEnv(t, 1, withTestLogs(logs, mu))
	top = e.createTopic("t", 1, nil)
	e.commit(nextKey(), plain(top, 0, 1))
	mu.Lock()
	defer mu.Unlock()
	return e, top, logs[0]
}

// TestRebuildRetriesTransientFailure: a shard whose append failed and
// whose rebuild then cannot read its log for a while (the Kafka log with
// its partition's broker restarting) answers the failure meanwhile —
// KAFKA_STORAGE_ERROR, its groups COORDINATOR_LOAD_IN_PROGRESS — and
// rebuilds by itself once the log answers: it serves again, its offsets
// dense, without a restart. Without the retry the first failed rebuild
// failed the shard until the process restarted (the run of
// TestClusterFailover/BrokerKill whose final read stopped short).
func TestRebuildRetriesTransientFailure(t *testing.T) {
	e, top, l := oneCommitOnTestLog(t)
	var once sync.Once
	l.setFail(func([][]byte) (bool, error) {
		var err error
		once.Do(func() { err = errBrokerGone })
		return false, err
	})
	l.mu.Lock()
	l.replayErrs = []error{errBrokerGone, errBrokerGone, errBrokerGone}
	l.mu.Unlock()
	if _, err := e.tryCommit(nextKey(), plain(top, 0, 1)); !errors.Is(err, errBrokerGone) {
		t.Fatalf("commit whose append failed: %v", err)
	}
	var res []diskless.CommitBatchResult
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		if res, err = e.tryCommit(nextKey(), plain(top, 0, 1)); err == nil {
			break
		}
		if !errors.Is(err, diskless.ErrShardFailed) || !errors.Is(err, errBrokerGone) {
			t.Fatalf("commit while the shard's log cannot be read: %v, want ErrShardFailed naming the cause", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shard has not rebuilt 30 s after its log answers again: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if res[0].Err != nil || res[0].BaseOffset != 1 {
		t.Fatalf("commit after the rebuild: %+v, want offset 1", res[0])
	}
	if err := e.c.Err(); err != nil {
		t.Fatalf("Err after the rebuild: %v", err)
	}
	l.mu.Lock()
	left := len(l.replayErrs)
	l.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d injected replay failures left, want every one met by a retry", left)
	}
}

// TestRebuildCorruptNotRetried: a rebuild that finds the log corrupt
// (metalog.ErrCorrupt) fails the shard for good — reading again reads the
// same damage — and does not read the log again.
func TestRebuildCorruptNotRetried(t *testing.T) {
	e, top, l := oneCommitOnTestLog(t)
	l.setFail(func([][]byte) (bool, error) { return false, errors.New("test: write failed") })
	l.mu.Lock()
	l.replayErrs = []error{fmt.Errorf("%w: test: bad frame", metalog.ErrCorrupt), nil}
	l.mu.Unlock()
	if _, err := e.tryCommit(nextKey(), plain(top, 0, 1)); err == nil {
		t.Fatal("commit whose append failed succeeded")
	}
	reads := l.readSnapshots.Load()
	time.Sleep(time.Second) // many retries' worth of backoff
	if n := l.readSnapshots.Load(); n != reads {
		t.Fatalf("%d more ReadSnapshot calls after the log was found corrupt, want none", n-reads)
	}
	if err := e.c.Err(); !errors.Is(err, diskless.ErrShardFailed) || !errors.Is(err, metalog.ErrCorrupt) {
		t.Fatalf("Err: %v, want the shard failed, corrupt", err)
	}
}

// flakyFollower fails ReadSnapshot and Replay while down is set, as a
// Kafka log's follower does while the broker it reads from restarts.
type flakyFollower struct {
	metalog.Follower
	down *atomic.Bool
}

func (f flakyFollower) ReadSnapshot(ctx context.Context) (int64, []byte, error) {
	if f.down.Load() {
		return 0, nil, errBrokerGone
	}
	return f.Follower.ReadSnapshot(ctx)
}

func (f flakyFollower) Replay(ctx context.Context, from int64, fn func(int64, []byte) error) (int64, error) {
	if f.down.Load() {
		return 0, errBrokerGone
	}
	return f.Follower.Replay(ctx, from, fn)
}

// TestReleasedShardFollowsAfterLogReturns: a sidecar whose shard failed
// to rebuild while its log could not be read, released because another
// sidecar took the shard (the placement moved it), follows the shard
// again once the log answers: its replica sees the new owner's commits.
// Without the retry Release's load failed ("placement: releasing a shard
// failed") and the shard was left with no follower, its replica frozen
// where it failed (the e2e run's final read through that sidecar stopped
// short).
func TestReleasedShardFollowsAfterLogReturns(t *testing.T) {
	ctx := context.Background()
	var down atomic.Bool
	var mu sync.Mutex
	logs := map[int32]*testLog{}
	cl := newCluster(t, 2, func(c *Config) {
		if c.NodeID != 1 {
			return
		}
		open, follow := c.OpenLog, c.OpenFollower
		c.OpenLog = func(s int32) (metalog.Log, error) {
			inner, err := open(s)
			if err != nil {
				return nil, err
			}
			l := &testLog{inner: inner}
			mu.Lock()
			logs[s] = l
			mu.Unlock()
			return l, nil
		}
		c.OpenFollower = func(s int32) (metalog.Follower, error) {
			f, err := follow(s)
			return flakyFollower{Follower: f, down: &down}, err
		}
	})
	a, b := cl.nodes[0], cl.nodes[1]
	topic := cl.split("t", 8)
	p1 := partitionOn(t, a, topic, 1, 2)
	if rs, err := a.CommitFile(ctx, 1, commitRequest(a, nextKey(), plain(topic, p1, 1))); err != nil || rs[0].BaseOffset != 0 {
		t.Fatalf("first commit: %+v %v", rs, err)
	}

	// The broker goes: A's append fails, and so do its rebuild's reads.
	down.Store(true)
	mu.Lock()
	l := logs[1]
	mu.Unlock()
	l.setFail(func([][]byte) (bool, error) { return false, errBrokerGone })
	l.failReplay.Store(true)
	if _, err := a.CommitFile(ctx, 1, commitRequest(a, nextKey(), plain(topic, p1, 1))); err == nil {
		t.Fatal("commit with the log unreachable succeeded")
	}
	// The placement moves the shard to B; A releases it while its log
	// still cannot be read.
	cl.host(1, 1)
	if err := a.Release(1); err != nil {
		t.Fatalf("Release of a shard whose log cannot be read for now: %v, want the follower to retry", err)
	}
	down.Store(false)
	l.failReplay.Store(false)
	rs, err := b.CommitFile(ctx, 1, commitRequest(b, nextKey(), plain(topic, p1, 1)))
	if err != nil || rs[0].BaseOffset != 1 {
		t.Fatalf("commit at the new owner: %+v %v", rs, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for hwm(a, topic, p1) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("A's replica of the moved shard: high watermark %d 30 s after its log answers again, want 2", hwm(a, topic, p1))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// poisonFollower hands, on the first Replay after armed is closed, two
// records after the log's: a partition created (one the log never
// holds) and the same partition created again, which the state refuses —
// a replica's batch that failed to apply, its state partly changed. From
// then on its reads fail as flakyFollower's with down set (it sets down),
// so the replica's reload fails too. Closing armed ends a Wait.
type poisonFollower struct {
	flakyFollower
	armed    chan struct{}
	fired    *atomic.Bool
	poisoned chan struct{}
	// partly is the partition; set before armed is closed.
	partly *records.PartitionCreated
}

func (f poisonFollower) Wait(ctx context.Context, next int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-f.armed:
			cancel()
		case <-wctx.Done():
		}
	}()
	err := f.flakyFollower.Wait(wctx, next)
	if ctx.Err() == nil && wctx.Err() != nil {
		return nil // armed: replay now
	}
	return err
}

func (f poisonFollower) Replay(ctx context.Context, from int64, fn func(int64, []byte) error) (int64, error) {
	next, err := f.flakyFollower.Replay(ctx, from, fn)
	select {
	case <-f.armed:
	default:
		return next, err
	}
	if err != nil || !f.fired.CompareAndSwap(false, true) {
		return next, err
	}
	f.down.Store(true)
	defer close(f.poisoned)
	for _, body := range records.Encode([]records.Record{f.partly, f.partly}) {
		if err := fn(next, body); err != nil {
			return next, err
		}
	}
	return next, nil
}

// poisonedReplica returns a cluster of two whose node 0 hosts shards 0–1
// and node 1 shards 2–3, with topic top (8 partitions) and one record
// committed in partition p1 of shard 1; node 1's replica of shard 1 has
// then failed to apply a batch (a poisonFollower's) and is reloading,
// each attempt failing while down is set.
func poisonedReplica(t *testing.T) (cl *cluster, top diskless.Topic, p1 int32, down *atomic.Bool) {
	ctx := context.Background()
	down = &atomic.Bool{}
	var fired atomic.Bool
	armed, poisoned := make(chan struct{}), make(chan struct{})
	partly := &records.PartitionCreated{}
	cl = newCluster(t, 2, func(c *Config) {
		if c.NodeID != 2 {
			return
		}
		follow := c.OpenFollower
		c.OpenFollower = func(s int32) (metalog.Follower, error) {
			f, err := follow(s)
			if s != 1 {
				return f, err
			}
			return poisonFollower{flakyFollower: flakyFollower{Follower: f, down: down}, armed: armed, fired: &fired, poisoned: poisoned, partly: partly}, err
		}
	})
	a, b := cl.nodes[0], cl.nodes[1]
	top = cl.split("t", 8)
	p1 = partitionOn(t, a, top, 1, 2)
	if rs, err := a.CommitFile(ctx, 1, commitRequest(a, nextKey(), plain(top, p1, 1))); err != nil || rs[0].BaseOffset != 0 {
		t.Fatalf("commit: %+v %v", rs, err)
	}
	waitFor(t, b, "the commit on B's replica", func() bool { return hwm(b, top, p1) == 1 })
	*partly = records.PartitionCreated{TopicID: top.ID, TopicName: top.Name, Partition: top.Partitions}
	close(armed)
	select {
	case <-poisoned:
	case <-time.After(10 * time.Second):
		t.Fatal("B's replica of shard 1 has not replayed 10 s after the poison was armed")
	}
	return cl, top, p1, down
}

// TestHostAfterFailedReloadLoadsWhole: a replica whose records failed to
// apply (its state partly changed) and whose reload then failed too (its
// log unreachable for now) is taken over by Host: the hosted state is the
// log's — a fresh full load's — not the partly changed one caught up from
// the replica's stale index. Without replica.next set to −1 in reload
// mode Host caught up from the index before the failed batch, and the
// shard kept a partition the log never created.
func TestHostAfterFailedReloadLoadsWhole(t *testing.T) {
	cl, top, p1, _ := poisonedReplica(t)
	b := cl.nodes[1]
	// B's replica reloads and fails (down), retrying; B takes the shard
	// over meanwhile (the writer's log reads fine).
	cl.host(1, 1)
	fresh := newClusterOn(t, cl, 3)
	if got, want := stateBytes(b)[1], stateBytes(fresh)[1]; !bytes.Equal(got, want) {
		t.Fatalf("shard 1 hosted on B after its replica's failed reload: state of %d bytes differs from a fresh load's %d", len(got), len(want))
	}
	if rs, err := b.CommitFile(context.Background(), 1, commitRequest(b, nextKey(), plain(top, p1, 1))); err != nil || rs[0].BaseOffset != 1 {
		t.Fatalf("commit at the new owner: %+v %v", rs, err)
	}
}
