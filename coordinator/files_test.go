package coordinator

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/objstore"
	"github.com/diskless-sidecar/sidecar/objstore/objstoretest"
)

var _ ObjectDeleter = (*objstoretest.Memory)(nil)
var _ ObjectDeleter = objstore.Store(nil)

// withObjects gives the coordinator an object store whose modification
// times come from the env's clock (set by newEnvObjects).
func withObjects(store *objstoretest.Memory) func(*Config) {
	return func(c *Config) {
		c.Objects = store
		c.FileDeletionDelay = time.Minute
	}
}

func newEnvObjects(t *testing.T, shards int32, mutate ...func(*Config)) (*env, *objstoretest.Memory) {
	t.Helper()
	store := objstoretest.NewMemory()
	e := newEnv(t, shards, append([]func(*Config){withObjects(store)}, mutate...)...)
	store.SetClock(e.clock.Now)
	return e, store
}

// commitShared commits one file whose batches belong to several shards,
// as commit.Committer does: one CommitFile per owner shard, each naming
// all owners.
func (e *env) commitShared(key string, batches ...diskless.CommitBatch) []int32 {
	e.t.Helper()
	full := commitRequest(e.c, key, batches...)
	byShard := map[int32][]diskless.CommitBatch{}
	for _, b := range full.Batches {
		s := e.c.ShardFor(b.TopicID, b.Partition)
		byShard[s] = append(byShard[s], b)
	}
	owners := slices.Sorted(maps.Keys(byShard))
	for _, s := range owners {
		req := *full
		req.OwnerIDs, req.Batches = owners, byShard[s]
		res, err := e.c.CommitFile(context.Background(), s, &req)
		if err != nil {
			e.t.Fatalf("CommitFile(%s) on shard %d: %v", key, s, err)
		}
		for _, r := range res {
			if r.Err != nil {
				e.t.Fatalf("CommitFile(%s) on shard %d: %s", key, s, resName(r))
			}
		}
	}
	return owners
}

func exists(store *objstoretest.Memory, key string) bool {
	_, _, err := store.ReadRange(context.Background(), key, 0, nil)
	return !errors.Is(err, objstore.ErrNotExist)
}

func (e *env) fileStates(key string) []diskless.FileState {
	e.t.Helper()
	var out []diskless.FileState
	for s := range e.c.NumShards() {
		st, err := e.c.DescribeFiles(context.Background(), s, []string{key})
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, st[0])
	}
	return out
}

func (e *env) runFileDeletion() {
	e.t.Helper()
	if err := e.c.runFileDeletion(context.Background()); err != nil {
		e.t.Fatalf("runFileDeletion: %v", err)
	}
}

// partitionsByShard returns, for a topic of two partitions on two shards,
// the partition on shard 0 and the one on shard 1.
func partitionsByShard(e *env, top diskless.Topic) [2]int32 {
	var out [2]int32
	for p := range top.Partitions {
		out[e.c.ShardFor(top.ID, p)] = p
	}
	return out
}

// TestSharedFileDeletion: a file shared by two shards is deleted only
// after both released it, and only FileDeletionDelay after that was seen;
// the lower owner deletes it, the other hands the deletion over; the
// deletion is recorded and not repeated after a restart.
func TestSharedFileDeletion(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first int32 // the shard that releases first
	}{{"higher owner releases first", 1}, {"lower owner releases first", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			e, store := newEnvObjects(t, 2)
			top := e.createTopic("t", 2, map[string]string{"retention.ms": "-1"})
			parts := partitionsByShard(e, top)
			key := nextKey()
			if err := store.Put(context.Background(), key, make([]byte, 200)); err != nil {
				t.Fatal(err)
			}
			if owners := e.commitShared(key, plain(top, parts[0], 1), plain(top, parts[1], 1)); len(owners) != 2 {
				t.Fatalf("owners %v", owners)
			}
			e.clock.Advance(2 * time.Hour) // past the commit's settling time
			release := func(s int32) {
				t.Helper()
				if _, err := e.c.DeleteRecords(context.Background(), diskless.TopicPartition{TopicID: top.ID, Partition: parts[s]}, -1); err != nil {
					t.Fatal(err)
				}
			}
			stats := e.c.Stats()
			want := func(stage string, states ...diskless.FileState) {
				t.Helper()
				if got := e.fileStates(key); !slices.Equal(got, states) {
					t.Fatalf("%s: states %v, want %v", stage, got, states)
				}
			}

			want("committed", diskless.FileLive, diskless.FileLive)
			release(tc.first)
			e.runFileDeletion()
			if tc.first == 1 {
				want("higher owner released: handed over", diskless.FileLive, diskless.FileClosed)
			} else {
				want("lower owner released: waits for the other", diskless.FileReleased, diskless.FileLive)
			}
			e.clock.Advance(10 * time.Minute)
			e.runFileDeletion()
			if !exists(store, key) {
				t.Fatal("deleted while an owner still has live batches")
			}
			release(1 - tc.first)
			e.runFileDeletion() // both released: the delay starts
			want("both released", diskless.FileReleased, diskless.FileClosed)
			e.clock.Advance(time.Minute - time.Millisecond)
			e.runFileDeletion()
			if !exists(store, key) {
				t.Fatal("deleted before the deletion delay")
			}
			e.clock.Advance(time.Millisecond)
			e.runFileDeletion()
			if exists(store, key) {
				t.Fatal("not deleted after the deletion delay")
			}
			want("deleted", diskless.FileClosed, diskless.FileClosed)
			if d, r := stats.ObjectsDeleted.Load(), stats.FilesReleased.Load(); d != 1 || r != 2 {
				t.Fatalf("ObjectsDeleted %d, FilesReleased %d; want 1, 2", d, r)
			}
			if n := store.Count(objstoretest.OpDelete); n != 1 {
				t.Fatalf("%d deletes, want 1", n)
			}

			restartIdentical(t, e)
			want("after restart", diskless.FileClosed, diskless.FileClosed)
			e.clock.Advance(time.Hour)
			e.runFileDeletion()
			e.clock.Advance(time.Hour)
			e.runFileDeletion()
			if n := store.Count(objstoretest.OpDelete); n != 1 {
				t.Fatalf("%d deletes after restart, want 1", n)
			}
		})
	}
}

// TestFileNotDeletedBeforeCommitSettled: a shared file released right
// after its commit is kept until OrphanScanGracePeriod after the commit
// (another owner's commit of it may still be in flight), then for the
// delay; a file of one owner, whose commits are all in its table, only
// for the delay.
func TestFileNotDeletedBeforeCommitSettled(t *testing.T) {
	t.Run("shared", func(t *testing.T) {
		e, store := newEnvObjects(t, 2)
		top := e.createTopic("t", 2, nil)
		parts := partitionsByShard(e, top)
		key := nextKey()
		store.Put(context.Background(), key, []byte("x"))
		if owners := e.commitShared(key, plain(top, parts[0], 1), plain(top, parts[1], 1)); len(owners) != 2 {
			t.Fatalf("owners %v", owners)
		}
		for _, p := range parts {
			if _, err := e.c.DeleteRecords(context.Background(), diskless.TopicPartition{TopicID: top.ID, Partition: p}, -1); err != nil {
				t.Fatal(err)
			}
		}
		for range 5 {
			e.clock.Advance(10 * time.Minute)
			e.runFileDeletion()
		}
		if !exists(store, key) {
			t.Fatal("deleted 50 minutes after its commit")
		}
		e.clock.Advance(10 * time.Minute) // 60 minutes: settled, the delay starts
		e.runFileDeletion()
		if !exists(store, key) {
			t.Fatal("deleted without the deletion delay")
		}
		e.clock.Advance(time.Minute)
		e.runFileDeletion()
		if exists(store, key) {
			t.Fatal("not deleted")
		}
	})
	t.Run("one owner", func(t *testing.T) {
		e, store := newEnvObjects(t, 1)
		top := e.createTopic("t", 1, nil)
		key := nextKey()
		store.Put(context.Background(), key, []byte("x"))
		e.commit(key, plain(top, 0, 1))
		if _, err := e.c.DeleteRecords(context.Background(), diskless.TopicPartition{TopicID: top.ID, Partition: 0}, -1); err != nil {
			t.Fatal(err)
		}
		e.runFileDeletion() // released: the delay starts
		e.clock.Advance(time.Minute - time.Millisecond)
		e.runFileDeletion()
		if !exists(store, key) {
			t.Fatal("deleted before the deletion delay")
		}
		e.clock.Advance(time.Millisecond)
		e.runFileDeletion()
		if exists(store, key) {
			t.Fatal("not deleted a deletion delay after its release")
		}
		// A repeat of the commit is still answered from the file table.
		if st := e.fileStates(key); !slices.Equal(st, []diskless.FileState{diskless.FileClosed}) {
			t.Fatalf("after the deletion: %v, want closed", st)
		}
	})
}

// TestFileDeletionRetries: a failed object delete is retried on the next
// pass; a delete whose record 106 did not become durable is repeated
// after a restart (idempotent), and recorded then; neither repeats after.
func TestFileDeletionRetries(t *testing.T) {
	cases := []struct {
		name string
		// storeFails fails the first delete; logFails fails appends of
		// record 106 until the restart.
		storeFails, logFails bool
	}{
		{"delete fails once", true, false},
		{"record 106 not durable", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logs, mu := map[int32]*testLog{}, &sync.Mutex{}
			e, store := newEnvObjects(t, 1, withTestLogs(logs, mu))
			top := e.createTopic("t", 1, nil)
			key := nextKey()
			store.Put(context.Background(), key, []byte("x"))
			e.commit(key, plain(top, 0, 1))
			if _, err := e.c.DeleteRecords(context.Background(), diskless.TopicPartition{TopicID: top.ID, Partition: 0}, -1); err != nil {
				t.Fatal(err)
			}
			var failed atomic.Bool
			if tc.storeFails {
				store.SetFault(func(_ context.Context, op objstoretest.Op, k string) error {
					if op == objstoretest.OpDelete && failed.CompareAndSwap(false, true) {
						return errors.New("injected delete failure")
					}
					return nil
				})
			}
			if tc.logFails {
				logs[0].setFail(func(bodies [][]byte) (bool, error) {
					for _, b := range bodies {
						if b[1] == byte(records.KeyFileDeleted) {
							return false, errors.New("injected log failure")
						}
					}
					return false, nil
				})
			}
			e.clock.Advance(time.Hour)
			e.runFileDeletion() // settled: the delay starts
			e.clock.Advance(time.Minute)
			if err := e.c.runFileDeletion(context.Background()); err == nil {
				t.Fatal("a pass with a failure reported none")
			}
			stats := e.c.Stats()
			if tc.storeFails {
				if !exists(store, key) || stats.DeleteFailures.Load() != 1 || e.fileStates(key)[0] != diskless.FileReleased {
					t.Fatalf("after a failed delete: exists %v, failures %d, state %v",
						exists(store, key), stats.DeleteFailures.Load(), e.fileStates(key))
				}
				if !strings.Contains(e.logs.String(), "injected delete failure") {
					t.Fatal("failed delete not logged")
				}
				e.runFileDeletion() // retried
			} else {
				if exists(store, key) || e.fileStates(key)[0] != diskless.FileReleased {
					t.Fatalf("delete without its record: exists %v, state %v", exists(store, key), e.fileStates(key))
				}
				e.reopen() // the log works again
				e.runFileDeletion()
				e.clock.Advance(time.Minute)
				e.runFileDeletion()
			}
			if exists(store, key) || e.fileStates(key)[0] != diskless.FileClosed {
				t.Fatalf("after the retry: exists %v, state %v", exists(store, key), e.fileStates(key))
			}
			deletes := store.Count(objstoretest.OpDelete)
			if want := int64(2); deletes != want {
				t.Fatalf("%d deletes, want %d", deletes, want)
			}
			e.reopen()
			e.clock.Advance(2 * time.Hour)
			e.runFileDeletion()
			e.clock.Advance(2 * time.Hour)
			e.runFileDeletion()
			if n := store.Count(objstoretest.OpDelete); n != deletes {
				t.Fatalf("deleted again after the deletion was recorded: %d deletes, want %d", n, deletes)
			}
		})
	}
}

// TestTopicDeletionReleasesFiles: a deleted topic's files are released
// and, in time, deleted.
func TestTopicDeletionReleasesFiles(t *testing.T) {
	e, store := newEnvObjects(t, 1)
	top := e.createTopic("t", 1, nil)
	other := e.createTopic("u", 1, nil)
	k1, k2 := nextKey(), nextKey()
	store.Put(context.Background(), k1, []byte("x"))
	store.Put(context.Background(), k2, []byte("x"))
	e.commit(k1, plain(top, 0, 1))
	e.commit(k2, plain(top, 0, 1), plain(other, 0, 1))
	if _, err := e.c.DeleteTopic(context.Background(), top.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.c.runPurge(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour)
	e.runFileDeletion()
	e.clock.Advance(time.Minute)
	e.runFileDeletion()
	if exists(store, k1) || !exists(store, k2) {
		t.Fatalf("after topic deletion: %s exists %v, %s (still holding u) exists %v", k1, exists(store, k1), k2, exists(store, k2))
	}
}

// TestOrphanScan: the scan deletes old objects no shard holds — never
// committed, or deleted and then written again — and spares young ones,
// every committed one still live or released, and keys outside the
// prefix. A failed delete is retried by the next scan.
func TestOrphanScan(t *testing.T) {
	e, store := newEnvObjects(t, 2)
	ctx := context.Background()
	top := e.createTopic("t", 2, nil)
	parts := partitionsByShard(e, top)
	put := func(key string) {
		t.Helper()
		if err := store.Put(ctx, key, []byte("object")); err != nil {
			t.Fatal(err)
		}
	}
	// Old objects, at T0.
	for _, k := range []string{"wal/never-committed", "wal/live", "wal/released", "wal/closed", "other/x", "walrus/x"} {
		put(k)
	}
	// Partition parts[0] (shard 0): wal/closed at 0, wal/live at 1;
	// parts[1] (shard 1): wal/released at 0, wal/live at 1.
	e.commit("wal/closed", plain(top, parts[0], 1))
	e.commit("wal/released", plain(top, parts[1], 1))
	e.commitShared("wal/live", plain(top, parts[0], 1), plain(top, parts[1], 1))
	if _, err := e.c.DeleteRecords(ctx, diskless.TopicPartition{TopicID: top.ID, Partition: parts[1]}, 1); err != nil { // releases wal/released
		t.Fatal(err)
	}
	// wal/closed: released, deleted by the lifecycle, then written again
	// by an upload attempt that landed late.
	if _, err := e.c.DeleteRecords(ctx, diskless.TopicPartition{TopicID: top.ID, Partition: parts[0]}, 1); err != nil {
		t.Fatal(err)
	}
	e.admin(0, &records.FileDeleted{ObjectKey: "wal/closed", DeleterShard: 0})
	for key, want := range map[string][]diskless.FileState{
		"wal/live":     {diskless.FileLive, diskless.FileLive},
		"wal/released": {diskless.FileUnknown, diskless.FileReleased},
		"wal/closed":   {diskless.FileClosed, diskless.FileUnknown},
	} {
		if got := e.fileStates(key); !slices.Equal(got, want) {
			t.Fatalf("%s: states %v, want %v", key, got, want)
		}
	}
	e.clock.Advance(2 * time.Hour)
	put("wal/young")
	put("wal/young-but-a-bit-older")
	e.clock.Advance(59 * time.Minute)

	var failOnce atomic.Bool
	store.SetFault(func(_ context.Context, op objstoretest.Op, k string) error {
		if op == objstoretest.OpDelete && k == "wal/never-committed" && failOnce.CompareAndSwap(false, true) {
			return errors.New("injected delete failure")
		}
		return nil
	})
	stats := e.c.Stats()
	if err := e.c.runOrphanScan(ctx); err != nil {
		t.Fatal(err)
	}
	if f, d, x := stats.OrphansFound.Load(), stats.OrphansDeleted.Load(), stats.DeleteFailures.Load(); f != 2 || d != 1 || x != 1 {
		t.Fatalf("first scan: found %d, deleted %d, failed %d; want 2, 1, 1", f, d, x)
	}
	if err := e.c.runOrphanScan(ctx); err != nil {
		t.Fatal(err)
	}
	if f, d := stats.OrphansFound.Load(), stats.OrphansDeleted.Load(); f != 3 || d != 2 {
		t.Fatalf("second scan: found %d, deleted %d in all; want 3, 2", f, d)
	}
	var left []string
	store.List(ctx, "", func(oi objstore.ObjectInfo) error { left = append(left, oi.Key); return nil })
	want := []string{"other/x", "wal/live", "wal/released", "wal/young", "wal/young-but-a-bit-older", "walrus/x"}
	if !slices.Equal(left, want) {
		t.Fatalf("objects left %v, want %v", left, want)
	}
	if n := stats.OrphanScans.Load(); n != 2 {
		t.Fatalf("%d scans counted, want 2", n)
	}
	// A List failure ends the scan with an error and deletes nothing.
	store.SetFault(func(_ context.Context, op objstoretest.Op, _ string) error {
		if op == objstoretest.OpList {
			return errors.New("injected list failure")
		}
		return nil
	})
	e.clock.Advance(2 * time.Hour)
	if err := e.c.runOrphanScan(ctx); err == nil {
		t.Fatal("scan with a failing List succeeded")
	}
}

// TestOrphanScanNeedsEveryShard: when a shard cannot answer, nothing is
// deleted (it might hold the object).
func TestOrphanScanNeedsEveryShard(t *testing.T) {
	e, store := newEnvObjects(t, 2, func(c *Config) { c.Files = failingDescriber{shard: 1} })
	store.Put(context.Background(), "wal/x", []byte("x"))
	e.clock.Advance(2 * time.Hour)
	if err := e.c.runOrphanScan(context.Background()); err == nil {
		t.Fatal("scan succeeded without shard 1's answer")
	}
	if !exists(store, "wal/x") {
		t.Fatal("deleted without every shard's answer")
	}
}

type failingDescriber struct{ shard int32 }

func (f failingDescriber) DescribeFiles(_ context.Context, shard int32, keys []string) ([]diskless.FileState, error) {
	if shard == f.shard {
		return nil, errors.New("shard unreachable")
	}
	return make([]diskless.FileState, len(keys)), nil
}

// TestBackgroundStopsAtClose: the loops run on their own, and Close
// cancels and joins them even when the object store hangs (goleak checks
// nothing is left).
func TestBackgroundStopsAtClose(t *testing.T) {
	var lists atomic.Int64
	e, store := newEnvObjects(t, 2, func(c *Config) {
		c.RetentionCheckInterval = time.Millisecond
		c.OrphanScanInterval = time.Millisecond
	})
	store.SetFault(func(ctx context.Context, op objstoretest.Op, _ string) error {
		if op == objstoretest.OpList && lists.Add(1) > 1 {
			<-ctx.Done() // a hung store
			return ctx.Err()
		}
		return nil
	})
	deadline := time.Now().Add(10 * time.Second)
	for lists.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the orphan scan loop did not run")
		}
		time.Sleep(time.Millisecond)
	}
	closed := make(chan error)
	go func() { closed <- e.c.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close hung on a background job")
	}
	e.c = nil
}
