package coordinator

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/metalog"
)

// TestLoadRereadsSnapshotAfterTruncated: a shard's load whose Replay from
// the snapshot it read fails with metalog.ErrTruncated (with the Kafka
// log: the previous owner, not fenced yet, truncated after a newer
// snapshot while this one started) reads the latest snapshot again and
// replays from it, so the coordinator opens with every record, instead of
// failing to start.
func TestLoadRereadsSnapshotAfterTruncated(t *testing.T) {
	logs, mu := map[int32]*testLog{}, &sync.Mutex{}
	truncated := false
	e := newEnv(t, 1, func(c *Config) { c.SnapshotIntervalRecords = 2 }, withTestLogsInit(logs, mu, func(_ int32, l *testLog) {
		if truncated {
			l.replayErrs = []error{fmt.Errorf("%w: test: records [2, 4) were deleted after a snapshot", metalog.ErrTruncated)}
		}
	}))
	top := e.createTopic("t", 1, nil)
	for range 5 {
		e.commit(nextKey(), plain(top, 0, 1))
	}
	truncated = true
	e.reopen()
	mu.Lock()
	l := logs[0]
	mu.Unlock()
	if n := l.readSnapshots.Load(); n != 2 {
		t.Fatalf("%d ReadSnapshot calls, want 2 (again after ErrTruncated)", n)
	}
	if r := e.commit(nextKey(), plain(top, 0, 1))[0]; r.Err != nil || r.BaseOffset != 5 {
		t.Fatalf("commit after the load: %+v, want offset 5", r)
	}
}

// TestPrepareSnapshotFailureRebuilds: after a failed PrepareSnapshot the
// log must be replayed before the next Append (metalog.Log; the Kafka
// log's pointer may land late): the shard rebuilds from the log at once,
// so the next commit succeeds instead of failing.
func TestPrepareSnapshotFailureRebuilds(t *testing.T) {
	logs, mu := map[int32]*testLog{}, &sync.Mutex{}
	e := newEnv(t, 1, func(c *Config) { c.SnapshotIntervalRecords = 3 }, withTestLogs(logs, mu))
	top := e.createTopic("t", 1, nil)
	mu.Lock()
	l := logs[0]
	mu.Unlock()
	l.failPrepare.Store(true)
	for i := range 8 {
		res, err := e.tryCommit(nextKey(), plain(top, 0, 1))
		if err != nil || res[0].Err != nil || res[0].BaseOffset != int64(i) {
			t.Fatalf("commit %d with PrepareSnapshot failing: %v %+v", i, err, res)
		}
	}
	l.failPrepare.Store(false)
	e.reopen()
	if r := e.commit(nextKey(), plain(top, 0, 1))[0]; r.Err != nil || r.BaseOffset != 8 {
		t.Fatalf("commit after reopening: %+v, want offset 8", r)
	}
}

// TestCloseEndsRebuild: Close does not wait for a rebuild whose log does
// not answer (the Kafka log while Kafka is unreachable): the rebuild is
// cancelled and the shard fails. The bound only catches a hang: without
// the cancel, Close waits for the rebuild's 5-minute timeout.
func TestCloseEndsRebuild(t *testing.T) {
	e, top, l := oneCommitOnTestLog(t)
	waits := make(chan struct{}, 1)
	l.mu.Lock()
	l.replayGate = make(chan struct{}) // never opened
	l.replayWaits = waits
	l.mu.Unlock()
	var once sync.Once
	l.setFail(func([][]byte) (bool, error) {
		var err error
		once.Do(func() { err = fmt.Errorf("injected append failure") })
		return false, err
	})
	committed := make(chan error, 1)
	go func() {
		_, err := e.tryCommit(nextKey(), plain(top, 0, 1))
		committed <- err
	}()
	<-waits // the rebuild's Replay waits for the log
	closed := make(chan error, 1)
	go func() { closed <- e.c.Close() }()
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("Close has not returned a minute into a rebuild whose log does not answer")
	}
	if err := <-committed; err == nil {
		t.Fatal("the commit whose append failed succeeded")
	}
	e.c = nil
}
