package coordinator

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/diskless-sidecar/sidecar/metalog"
)

// outageFollower is a follower of a log that cannot be read while down:
// with waitDown a Wait fails after followWaitFails (as the Kafka
// backend's does once its reads failed that long), with replayDown a Wait
// returns at once and a Replay fails. Up, it is its inner follower. It
// records when each failed Wait started and ended.
type outageFollower struct {
	metalog.Follower
	mu struct {
		sync.Mutex
		waitDown, replayDown bool
		failedWaits          [][2]time.Time // start, end
	}
}

// followWaitFails is how long an outageFollower's Wait takes to fail.
const followWaitFails = 5 * time.Second

func (f *outageFollower) set(waitDown, replayDown bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.waitDown, f.mu.replayDown = waitDown, replayDown
}

func (f *outageFollower) down() (wait, replay bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.waitDown, f.mu.replayDown
}

func (f *outageFollower) Wait(ctx context.Context, next int64) error {
	waitDown, replayDown := f.down()
	switch {
	case replayDown:
		return nil
	case !waitDown:
		return f.Follower.Wait(ctx, next)
	}
	start := time.Now()
	t := time.NewTimer(followWaitFails)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	f.mu.Lock()
	f.mu.failedWaits = append(f.mu.failedWaits, [2]time.Time{start, time.Now()})
	f.mu.Unlock()
	return errBrokerGone
}

func (f *outageFollower) Replay(ctx context.Context, from int64, fn func(int64, []byte) error) (int64, error) {
	if _, replayDown := f.down(); replayDown {
		return 0, errBrokerGone
	}
	return f.Follower.Replay(ctx, from, fn)
}

func (f *outageFollower) waits() [][2]time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][2]time.Time(nil), f.mu.failedWaits...)
}

// recordLog is a slog.Handler that keeps every record.
type recordLog struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *recordLog) Enabled(context.Context, slog.Level) bool { return true }

func (l *recordLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}

func (l *recordLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *recordLog) WithGroup(string) slog.Handler      { return l }

func (l *recordLog) records() []slog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]slog.Record(nil), l.recs...)
}

// newOutageReplica opens a one-node cluster whose replica of shard 1
// reads through an outageFollower, down as given from the start, and
// returns them and the node's log.
func newOutageReplica(t *testing.T, waitDown bool) (*replica, *outageFollower, *recordLog) {
	t.Helper()
	logs := &recordLog{}
	var f *outageFollower
	cl := newCluster(t, 1, func(c *Config) {
		c.Logger = slog.New(logs)
		follow := c.OpenFollower
		c.OpenFollower = func(s int32) (metalog.Follower, error) {
			inner, err := follow(s)
			if s != 1 || err != nil {
				return inner, err
			}
			f = &outageFollower{Follower: inner}
			f.set(waitDown, false)
			return f, nil
		}
	})
	s := cl.nodes[0].shards[1]
	s.host.RLock()
	rep := s.host.rep
	s.host.RUnlock()
	return rep, f, logs
}

// TestReplicaWaitFailuresKeepBackoffShort: a replica whose Waits fail
// (each after retrying its reads for a while: the Kafka backend's after
// 5 s) through a 60 s outage waits again within the loop's first backoff
// step (50 ms) after each, however many failed before: the Wait paced
// itself. Before, each failed Wait also grew the loop's backoff to its
// 5 s cap, and a replica alternated 5 s Waits with up to 5 s sleeps,
// lagging up to 5 s behind its log once Kafka was back. Its failures are
// logged at Info while they are younger than replicaRetryingAfter — the
// leader change every sidecar's replicas wait out — and at Warn from
// then on; before, the first was a Warn on every sidecar.
func TestReplicaWaitFailuresKeepBackoffShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, f, logs := newOutageReplica(t, true)
		time.Sleep(60 * time.Second)
		f.set(false, false)
		synctest.Wait()
		waits := f.waits()
		if len(waits) < 10 {
			t.Fatalf("%d failed Waits in a 60 s outage of %v each, want ≥ 10", len(waits), followWaitFails)
		}
		for i := 1; i < len(waits); i++ {
			if gap := waits[i][0].Sub(waits[i-1][1]); gap > 50*time.Millisecond {
				t.Fatalf("failed Wait %d of %d: the next began %v after it, want ≤ 50 ms (the loop's first backoff step)", i, len(waits), gap)
			}
		}

		firstFailed := waits[0][1]
		var infos, warns int
		for _, r := range logs.records() {
			switch {
			case r.Level >= slog.LevelWarn && r.Time.Sub(firstFailed) < replicaRetryingAfter:
				t.Fatalf("%v after the first failed Wait, before replicaRetryingAfter (%v): %s %q", r.Time.Sub(firstFailed), replicaRetryingAfter, r.Level, r.Message)
			case r.Level >= slog.LevelWarn:
				warns++
			case r.Level == slog.LevelInfo && r.Message == "coordinator: reading a shard's log failed; retrying":
				infos++
			}
		}
		if infos == 0 || warns == 0 {
			t.Fatalf("a 60 s outage logged %d Info and %d Warn lines, want the first failure at Info and a Warn once it lasted %v", infos, warns, replicaRetryingAfter)
		}
	})
}

// TestReplicaSyncEndsPause: a sync called while the replica's loop
// pauses between failed attempts (its backoff grown to the cap by Replays
// that failed at once) ends the pause: the loop replays at once and the
// sync returns without waiting out the pause — a takeover syncs the
// catalog's replica holding the placement. Before, the sync waited up to
// the cap (5 s).
func TestReplicaSyncEndsPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		rep, f, _ := newOutageReplica(t, false)
		f.set(false, true)
		first := make(chan error, 1)
		go func() { first <- rep.sync(ctx) }() // wakes the Wait; its Replays fail
		time.Sleep(60 * time.Second)
		synctest.Wait() // the loop pauses, its backoff at the cap
		f.set(false, false)
		start := time.Now()
		if err := rep.sync(ctx); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("a sync during the loop's pause returned after %v, want at once (the pause ended)", d)
		}
		if err := <-first; err != nil {
			t.Fatal(err)
		}
	})
}
