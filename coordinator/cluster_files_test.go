package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/objstore/objstoretest"
)

// TestClusterFileLifecycle: two coordinators of one cluster, shard 0
// hosted by A, the others by B. A file shared by shards 0 and 1 is
// deleted once, by its lower owner (A), only after both owners released
// it, each asking the other through Config.Files (the RPC in a cluster);
// the higher owner (B) closes it naming A. The orphan scan runs on shard
// 0's owner only: one scan per cluster.
func TestClusterFileLifecycle(t *testing.T) {
	ctx := context.Background()
	store := objstoretest.NewMemory()
	clock := newFakeClock()
	store.SetClock(clock.Now)
	cl := newCluster(t, 2, func(c *Config) {
		c.Objects, c.FileDeletionDelay, c.Now = store, time.Minute, clock.Now
	})
	a, b := cl.nodes[0], cl.nodes[1]
	cl.host(0, 0)
	cl.host(1, 1, 2, 3)
	top, err := a.CreateTopic(ctx, "t", 16, map[string]string{"retention.ms": "-1"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, b, "the topic in B's catalog", func() bool { _, ok := b.TopicByID(top.ID); return ok })
	parts := [2]int32{-1, -1}
	for p := range top.Partitions {
		if s := a.ShardFor(top.ID, p); s < 2 && parts[s] < 0 {
			parts[s] = p
		}
	}
	if parts[0] < 0 || parts[1] < 0 {
		t.Fatalf("no partitions on shards 0 and 1: %v", parts)
	}
	key := nextKey()
	if err := store.Put(ctx, key, make([]byte, 200)); err != nil {
		t.Fatal(err)
	}
	// The committer's way: one CommitFile per owner, each naming both.
	full := commitRequest(a, key, plain(top, parts[0], 1), plain(top, parts[1], 1))
	for s, owner := range []*Coordinator{a, b} {
		req := *full
		req.OwnerIDs = []int32{0, 1}
		req.Batches = []diskless.CommitBatch{full.Batches[s]}
		res, err := owner.CommitFile(ctx, int32(s), &req)
		if err != nil || len(res) != 1 || res[0].Err != nil {
			t.Fatalf("CommitFile on shard %d: %v %+v", s, err, res)
		}
	}
	states := func() [2]diskless.FileState {
		t.Helper()
		var out [2]diskless.FileState
		for s, owner := range []*Coordinator{a, b} {
			st, err := owner.DescribeFiles(ctx, int32(s), []string{key})
			if err != nil {
				t.Fatal(err)
			}
			out[s] = st[0]
		}
		return out
	}
	pass := func() {
		t.Helper()
		for _, c := range cl.nodes {
			if err := c.runFileDeletion(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	release := func(owner *Coordinator, p int32) {
		t.Helper()
		if _, err := owner.DeleteRecords(ctx, diskless.TopicPartition{TopicID: top.ID, Partition: p}, -1); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(2 * time.Hour) // past the commit's settling time
	release(a, parts[0])
	pass()
	if got := states(); got != [2]diskless.FileState{diskless.FileReleased, diskless.FileLive} {
		t.Fatalf("A released, B live: states %v", got)
	}
	clock.Advance(10 * time.Minute)
	pass()
	if !exists(store, key) {
		t.Fatal("deleted while B still has live batches in it")
	}
	release(b, parts[1])
	pass() // B hands the deletion over to A; A sees no owner live: the delay starts
	if got := states(); got != [2]diskless.FileState{diskless.FileReleased, diskless.FileClosed} {
		t.Fatalf("both released: states %v, want A released, B closed", got)
	}
	clock.Advance(time.Minute)
	pass()
	if exists(store, key) {
		t.Fatal("not deleted after the deletion delay")
	}
	if got := states(); got != [2]diskless.FileState{diskless.FileClosed, diskless.FileClosed} {
		t.Fatalf("deleted: states %v", got)
	}
	if n := store.Count(objstoretest.OpDelete); n != 1 {
		t.Fatalf("%d deletes, want 1", n)
	}
	if d := a.Stats().ObjectsDeleted.Load() + b.Stats().ObjectsDeleted.Load(); d != 1 {
		t.Fatalf("ObjectsDeleted %d across the cluster, want 1", d)
	}

	// The orphan scan: only shard 0's owner lists and deletes.
	if err := store.Put(ctx, "wal/orphan", []byte("x")); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Hour)
	if err := b.runOrphanScan(ctx); err != nil {
		t.Fatal(err)
	}
	if n := b.Stats().OrphanScans.Load(); n != 0 || !exists(store, "wal/orphan") {
		t.Fatalf("B, not hosting shard 0: %d scans, orphan exists %v; want none, kept", n, exists(store, "wal/orphan"))
	}
	lists := store.Count(objstoretest.OpList)
	if err := a.runOrphanScan(ctx); err != nil {
		t.Fatal(err)
	}
	if n := a.Stats().OrphanScans.Load(); n != 1 || exists(store, "wal/orphan") || store.Count(objstoretest.OpList) != lists+1 {
		t.Fatalf("A, hosting shard 0: %d scans, orphan exists %v; want one scan, deleted", n, exists(store, "wal/orphan"))
	}
}
