package coordinator

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/metalog/metalogtest"
)

// TestSnapshotDoesNotBlockCommits holds a snapshot write (a Log wrapper
// whose WriteSnapshot blocks) and checks that commits keep completing
// meanwhile, that no second snapshot starts while one is in flight, and
// that the state survives a restart whether the write succeeded or failed.
func TestSnapshotDoesNotBlockCommits(t *testing.T) {
	cases := []struct {
		name string
		fail bool // the held WriteSnapshot then fails
	}{{"held then written", false}, {"held then failed", true}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var (
				started = make(chan int64, 10)
				release = make(chan struct{})
				calls   sync.Map // index → true
			)
			logs, mu := map[int32]*testLog{}, &sync.Mutex{}
			e := newEnv(t, 1, withTestLogs(logs, mu), func(c *Config) { c.SnapshotIntervalRecords = 5 })
			first := true
			logs[0].saveHook = func(index int64) {
				calls.Store(index, true)
				started <- index
				if first {
					first = false
					<-release
				}
			}
			if tc.fail {
				logs[0].saveErr = func(index int64) error {
					if index == 5 {
						return errors.New("injected snapshot write failure")
					}
					return nil
				}
			}
			top := e.createTopic("t", 1, nil) // 2 records
			for range 3 {
				e.commit(nextKey(), plain(top, 0, 1)) // the 3rd reaches 5 records
			}
			select {
			case idx := <-started:
				if idx != 5 {
					t.Fatalf("snapshot at %d, want 5", idx)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no snapshot started")
			}
			// The snapshot is held: commits must still complete, well past
			// the next interval.
			done := make(chan struct{})
			go func() {
				defer close(done)
				for range 12 {
					if _, err := e.tryCommit(nextKey(), plain(top, 0, 1)); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				close(release)
				t.Fatal("commits blocked by a snapshot write")
			}
			if r := e.find(top, 0, 0, 0); r.HighWatermark != 15 {
				t.Fatalf("high watermark %d, want 15", r.HighWatermark)
			}
			n := 0
			calls.Range(func(any, any) bool { n++; return true })
			if n != 1 {
				t.Fatalf("%d snapshots started while one was held, want 1", n)
			}
			close(release)
			// Once the held write ended, the next commit starts the next
			// snapshot at once: an interval has passed.
			var second int64
			for deadline := time.Now().Add(10 * time.Second); second == 0; {
				e.commit(nextKey(), plain(top, 0, 1))
				select {
				case second = <-started:
				case <-time.After(time.Millisecond):
					if time.Now().After(deadline) {
						t.Fatal("no second snapshot")
					}
				}
			}
			if second < 17 {
				t.Fatalf("second snapshot at %d, want ≥ 17", second)
			}
			before, beforeState := answers(t, e.c), stateBytes(e.c)
			e.reopen()
			if after := answers(t, e.c); after != before {
				t.Fatalf("answers differ after restart:\n%s\n%s", before, after)
			}
			if !reflect.DeepEqual(stateBytes(e.c), beforeState) {
				t.Fatal("state differs after restart")
			}
			// Close joined the second write, which superseded the first.
			snaps, _ := filepath.Glob(filepath.Join(e.cfg.Dir, "shard-0", "*.snapshot"))
			if want := []string{filepath.Join(e.cfg.Dir, "shard-0", fmt.Sprintf("%020d.snapshot", second))}; !reflect.DeepEqual(snaps, want) {
				t.Fatalf("snapshots %v, want %v", snaps, want)
			}
		})
	}
}

// TestFrozenStateIsStable freezes a state, changes it in every way the
// driver does (commits, trims, file deletions, topic deletion, producer
// changes), and checks the frozen copy still encodes to the bytes it had.
func TestFrozenStateIsStable(t *testing.T) {
	e := newEnv(t, 1, func(c *Config) { c.SnapshotIntervalRecords = -1 })
	workload(t, e, 20)
	s := e.c.shards[0]
	s.mu.RLock()
	fz := s.mu.st.freeze()
	s.mu.RUnlock()
	want := string(fz.appendTo(nil))

	a, _ := e.c.Topic("a")
	workloadMore(t, e)
	for p := range int32(3) {
		if _, err := e.c.DeleteRecords(t.Context(), diskless.TopicPartition{TopicID: a.ID, Partition: p}, -1); err != nil {
			t.Fatal(err)
		}
	}
	e.admin(0, &records.TopicDeleted{TopicID: a.ID})
	if got := string(fz.appendTo(nil)); got != want {
		t.Fatal("frozen state changed with the live state")
	}
}

// TestSnapshotsOfChunkedIndex takes snapshots every few records while
// commits append to, and log start moves drop chunks from, a partition
// index several chunks long (under -race this checks what the snapshot
// goroutine shares with the driver), then checks that a restart from
// those snapshots rebuilds the same state.
func TestSnapshotsOfChunkedIndex(t *testing.T) {
	e := newEnv(t, 1, func(c *Config) { c.SnapshotIntervalRecords = 3 })
	top := e.createTopic("t", 2, nil)
	batches := make([]diskless.CommitBatch, 3000)
	for i := range batches {
		batches[i] = withMaxTs(plain(top, int32(i%7/6), 1+int32(i%3)), int64(i%500))
	}
	for round := range 12 {
		e.commit(nextKey(), batches...)
		if round%3 == 2 {
			// Into the middle of a chunk, several chunks on.
			hwm := e.find(top, 0, 0, 0).HighWatermark
			if _, err := e.c.DeleteRecords(t.Context(), diskless.TopicPartition{TopicID: top.ID, Partition: 0}, hwm/2+int64(round)); err != nil {
				t.Fatal(err)
			}
		}
	}
	before, beforeState := answers(t, e.c), stateBytes(e.c)
	e.reopen()
	if after := answers(t, e.c); after != before {
		t.Fatalf("answers differ after restart:\n%s\n%s", before, after)
	}
	if !reflect.DeepEqual(stateBytes(e.c), beforeState) {
		t.Fatal("state differs after restart")
	}
}

// TestSnapshotDataVersion: the snapshot payload carries its own version
// (the log stores it as opaque bytes). A payload of an older version
// refuses the open naming it and what to do; one of an unknown version
// refuses it too, instead of being taken for state.
func TestSnapshotDataVersion(t *testing.T) {
	for _, tc := range []struct {
		version int16
		want    string
	}{
		{snapshotDataVersion - 1, "older pre-release build"},
		{snapshotDataVersion + 1, fmt.Sprintf("this build reads only version %d", snapshotDataVersion)},
		{0, fmt.Sprintf("this build reads only version %d", snapshotDataVersion)},
	} {
		t.Run(fmt.Sprint(tc.version), func(t *testing.T) {
			mem := new(metalogtest.Memory)
			e := newEnv(t, 1, func(c *Config) {
				c.OpenLog = mem.Open
				c.SnapshotIntervalRecords = -1
			})
			workload(t, e, 5)
			payload := stateBytes(e.c)[0]
			if v := int16(binary.BigEndian.Uint16(payload)); v != snapshotDataVersion {
				t.Fatalf("payload starts with version %d, want %d", v, snapshotDataVersion)
			}
			e.c.Close()
			e.c = nil
			l, err := mem.Open(0)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			next, err := l.Replay(ctx, 0, func(int64, []byte) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			binary.BigEndian.PutUint16(payload, uint16(tc.version))
			if err := l.PrepareSnapshot(ctx, next); err != nil {
				t.Fatal(err)
			}
			if err := l.WriteSnapshot(ctx, next, payload); err != nil {
				t.Fatal(err)
			}
			l.Close()
			_, err = Open(e.cfg)
			if !errors.Is(err, errBadSnapshot) || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), fmt.Sprintf("snapshot data version %d", tc.version)) {
				t.Fatalf("Open with a snapshot payload of version %d: %v, want errBadSnapshot naming it (%q)", tc.version, err, tc.want)
			}
		})
	}
}

// TestSnapshotByBytes: a shard snapshots once SnapshotIntervalBytes of
// records were appended, however few records that is, and a restart
// replays from that snapshot.
func TestSnapshotByBytes(t *testing.T) {
	mem := &metalogtest.Memory{}
	e := newEnv(t, 1, func(c *Config) {
		c.OpenLog, c.SnapshotIntervalRecords, c.SnapshotIntervalBytes = mem.Open, 1_000_000, 20_000
	})
	top := e.createTopic("t", 1, nil)
	batches := make([]diskless.CommitBatch, 1000) // a record 102 of ~60 KB
	for i := range batches {
		batches[i] = withByteOffset(plain(top, 0, 1), int32(i*110))
	}
	e.commit(nextKey(), batches...)
	e.commit(nextKey(), plain(top, 0, 1)) // the group after: the snapshot starts
	before := stateBytes(e.c)
	e.c.Close()
	l, err := mem.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	idx, snap, err := l.ReadSnapshot(context.Background())
	l.Close()
	if err != nil || snap == nil || idx < 3 {
		t.Fatalf("no snapshot after 60 KB of records (index %d, %v)", idx, err)
	}
	e.open()
	if !reflect.DeepEqual(stateBytes(e.c), before) {
		t.Fatal("state differs after a restart from the snapshot")
	}
}
