package coordinator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/metalog"
	"github.com/diskless-sidecar/sidecar/metalog/metalogtest"
)

// cluster is coordinators of one cluster sharing in-memory logs, each
// reaching the others' shards through remote (a stand-in for the router
// of package peer: the call goes to whichever coordinator hosts the
// shard).
type cluster struct {
	t     *testing.T
	mem   *metalogtest.Memory
	nodes []*Coordinator
}

const clusterShards = 4

func newCluster(t *testing.T, n int, mutate ...func(*Config)) *cluster {
	t.Helper()
	cl := &cluster{t: t, mem: &metalogtest.Memory{}}
	for i := range n {
		cfg := Config{
			NumShards:         clusterShards,
			NodeID:            int32(i + 1),
			Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
			LifecycleInterval: -1,
			OpenLog:           func(s int32) (metalog.Log, error) { return cl.mem.Open(s) },
			OpenFollower:      func(s int32) (metalog.Follower, error) { return cl.mem.Follow(s) },
			Remote:            remote{cl},
			Files:             remote{cl},
		}
		for _, m := range mutate {
			m(&cfg)
		}
		c, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cl.nodes = append(cl.nodes, c)
	}
	return cl
}

// owner returns the coordinator hosting shard, or nil.
func (cl *cluster) owner(shard int32) *Coordinator {
	for _, c := range cl.nodes {
		if c.Hosted(shard) {
			return c
		}
	}
	return nil
}

// host makes node i host shards.
func (cl *cluster) host(i int, shards ...int32) {
	cl.t.Helper()
	for _, s := range shards {
		if err := cl.nodes[i].Host(context.Background(), s); err != nil {
			cl.t.Fatalf("node %d: Host(%d): %v", i, s, err)
		}
	}
}

// split makes node 0 host shards 0–1 (the catalog's among them) and node
// 1 shards 2–3, creates topic name with partitions at node 0 and waits
// until node 1's catalog has it.
func (cl *cluster) split(name string, partitions int32) diskless.Topic {
	cl.t.Helper()
	cl.host(0, 0, 1)
	cl.host(1, 2, 3)
	topic, err := cl.nodes[0].CreateTopic(context.Background(), name, partitions, nil)
	if err != nil {
		cl.t.Fatal(err)
	}
	waitFor(cl.t, cl.nodes[1], "the topic in B's catalog", func() bool { _, ok := cl.nodes[1].Topic(name); return ok })
	return topic
}

// splitIDs returns a transactional id on node 0's shards and a group id
// on node 1's after split: the coordinator of the id and the group's on
// two sidecars.
func splitIDs(c *Coordinator) (id, group string) {
	for i := 0; id == "" || group == ""; i++ {
		if s := fmt.Sprintf("tx-%d", i); id == "" && c.TxnShard(s) < 2 {
			id = s
		}
		if s := fmt.Sprintf("g-%d", i); group == "" && c.GroupShard(s) >= 2 {
			group = s
		}
	}
	return id, group
}

type remote struct{ cl *cluster }

func (r remote) at(shard int32) (*Coordinator, error) {
	if c := r.cl.owner(shard); c != nil {
		return c, nil
	}
	return nil, diskless.ErrNotCoordinator
}

func (r remote) CreatePartitionsIn(ctx context.Context, shard int32, topics []diskless.TopicPartitions) error {
	c, err := r.at(shard)
	if err != nil {
		return err
	}
	return c.CreatePartitionsIn(ctx, shard, topics)
}

func (r remote) DeleteTopicsIn(ctx context.Context, shard int32, ids []diskless.TopicID) error {
	c, err := r.at(shard)
	if err != nil {
		return err
	}
	return c.DeleteTopicsIn(ctx, shard, ids)
}

func (r remote) DeleteRecords(ctx context.Context, tp diskless.TopicPartition, offset int64) (int64, error) {
	c, err := r.at(diskless.ShardFor(tp.TopicID, tp.Partition, clusterShards))
	if err != nil {
		return -1, err
	}
	return c.DeleteRecords(ctx, tp, offset)
}

func (r remote) AllocateProducerIDBlock(ctx context.Context, node int32) (int64, int32, error) {
	c, err := r.at(0)
	if err != nil {
		return -1, 0, err
	}
	return c.AllocateProducerIDBlock(ctx, node)
}

func (r remote) CheckTxn(ctx context.Context, shard int32, req diskless.TxnCheck) (diskless.TxnCheckResult, error) {
	c, err := r.at(shard)
	if err != nil {
		return diskless.TxnCheckResult{}, err
	}
	return c.CheckTxn(ctx, shard, req)
}

func (r remote) EndTxnOffsets(ctx context.Context, shard int32, group string, pid int64, epoch int16, seq int64, committed bool) error {
	c, err := r.at(shard)
	if err != nil {
		return err
	}
	return c.EndTxnOffsets(ctx, shard, group, pid, epoch, seq, committed)
}

func (r remote) DescribeFiles(ctx context.Context, shard int32, keys []string) ([]diskless.FileState, error) {
	c, err := r.at(shard)
	if err != nil {
		return nil, err
	}
	return c.DescribeFiles(ctx, shard, keys)
}

// waitFor waits until cond holds, woken by c's commit signal (a replica
// applying records notifies it): no polling of the owner.
func waitFor(t *testing.T, c *Coordinator, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		ch := c.Watch()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s: not within 10s", what)
		}
	}
}

func hwm(c *Coordinator, t diskless.Topic, p int32) int64 {
	return c.ListOffsets(context.Background(), diskless.TopicPartition{TopicID: t.ID, Partition: p}, diskless.ListOffsetsLatest).Offset
}

// TestClusterReplicasAndMoves runs two coordinators of one cluster on
// shared logs: a follower of every shard on each, the shards hosted by
// one; commits on the owner show on the other's replica (catalog,
// batches, the commit signal); requests to a shard not hosted get
// ErrNotCoordinator; a shard moved keeps its offsets dense; the catalog's
// operations reach shards hosted elsewhere through Remote; a writer
// fenced by a takeover answers ErrShardFenced, and released becomes a
// replica again.
func TestClusterReplicasAndMoves(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 2)
	a, b := cl.nodes[0], cl.nodes[1]
	for s := range int32(clusterShards) {
		if a.Hosted(s) || b.Hosted(s) {
			t.Fatalf("shard %d hosted before Host", s)
		}
		if err := a.Serving(s); !errors.Is(err, diskless.ErrNotCoordinator) {
			t.Fatalf("Serving(%d) before Host: %v", s, err)
		}
	}
	if _, err := a.CreateTopic(ctx, "t", 8, nil); !errors.Is(err, diskless.ErrNotCoordinator) {
		t.Fatalf("CreateTopic with shard 0 hosted nowhere: %v", err)
	}
	// A hosts shard 0, the catalog: the partitions on B's shards go there.
	topic := cl.split("t", 8)

	// Commits at each partition's owner; both sides read the same.
	for p := range topic.Partitions {
		s := a.ShardFor(topic.ID, p)
		own, other := a, b
		if s >= 2 {
			own, other = b, a
		}
		req := commitRequest(own, nextKey(), plain(topic, p, 3), plain(topic, p, 2))
		if _, err := other.CommitFile(ctx, s, req); !errors.Is(err, diskless.ErrNotCoordinator) {
			t.Fatalf("commit to shard %d at a sidecar not hosting it: %v", s, err)
		}
		wake := other.Watch()
		rs, err := own.CommitFile(ctx, s, req)
		if err != nil || rs[1].BaseOffset != 3 {
			t.Fatalf("commit to shard %d: %+v %v", s, rs, err)
		}
		select {
		case <-wake:
		case <-time.After(10 * time.Second):
			t.Fatalf("the replica of shard %d did not wake its long-polls", s)
		}
	}
	reqs := make([]diskless.FindBatchesRequest, 0, topic.Partitions)
	for p := range topic.Partitions {
		reqs = append(reqs, diskless.FindBatchesRequest{TopicID: topic.ID, Partition: p, MaxBytes: 1 << 20})
	}
	waitFor(t, a, "A's replicas caught up", func() bool { return hwm(a, topic, 7) == 5 && hwm(a, topic, 2) == 5 })
	waitFor(t, b, "B's replicas caught up", func() bool { return hwm(b, topic, 0) == 5 && hwm(b, topic, 1) == 5 })
	if fa, fb := a.FindBatches(ctx, reqs), b.FindBatches(ctx, reqs); !reflect.DeepEqual(fa, fb) {
		t.Fatalf("FindBatches differ:\nA %+v\nB %+v", fa, fb)
	}
	// DescribeFiles is the owner's only: a replica may lag.
	if _, err := b.DescribeFiles(ctx, 0, []string{"x"}); !errors.Is(err, diskless.ErrNotCoordinator) {
		t.Fatalf("DescribeFiles of a replica: %v", err)
	}

	// Move shard 1 from A to B: offsets go on where A left them.
	var p1 int32 = -1
	for p := range topic.Partitions {
		if a.ShardFor(topic.ID, p) == 1 {
			p1 = p
			break
		}
	}
	if err := a.Release(1); err != nil {
		t.Fatal(err)
	}
	if err := a.Serving(1); !errors.Is(err, diskless.ErrNotCoordinator) {
		t.Fatalf("Serving(1) after Release: %v", err)
	}
	cl.host(1, 1)
	rs, err := b.CommitFile(ctx, 1, commitRequest(b, nextKey(), plain(topic, p1, 1)))
	if err != nil || rs[0].BaseOffset != 5 {
		t.Fatalf("commit after the move: %+v %v", rs, err)
	}
	waitFor(t, a, "A's replica of the moved shard", func() bool { return hwm(a, topic, p1) == 6 })

	// Shard 0 to B: B is the catalog's writer now, creating a topic whose
	// partitions land on A's shards too; A's producer ids come from B's
	// shard 0.
	if err := a.Release(0); err != nil {
		t.Fatal(err)
	}
	cl.host(1, 0)
	cl.host(0, 1) // and shard 1 back to A
	if err := b.Release(1); err != nil {
		t.Fatal(err)
	}
	cl.host(0, 1)
	t2, err := b.CreateTopic(ctx, "t2", 8, nil)
	if err != nil {
		t.Fatalf("CreateTopic at the new owner of shard 0: %v", err)
	}
	waitFor(t, a, "t2 in A's catalog", func() bool { _, ok := a.Topic("t2"); return ok })
	for p := range t2.Partitions {
		s := a.ShardFor(t2.ID, p)
		if _, err := cl.owner(s).CommitFile(ctx, s, commitRequest(a, nextKey(), plain(t2, p, 1))); err != nil {
			t.Fatalf("commit to t2/%d on shard %d: %v", p, s, err)
		}
	}
	pidA, err := a.AllocateProducerID(ctx)
	if err != nil {
		t.Fatalf("AllocateProducerID with shard 0 elsewhere: %v", err)
	}
	pidB, err := b.AllocateProducerID(ctx)
	if err != nil || pidB == pidA {
		t.Fatalf("producer ids %d and %d (%v)", pidA, pidB, err)
	}

	// A takeover without a release: B takes shard 2 from... B hosts it;
	// A takes it over. B's next write is fenced; B, released, follows.
	var p2 int32 = -1
	for p := range topic.Partitions {
		if a.ShardFor(topic.ID, p) == 2 {
			p2 = p
			break
		}
	}
	cl.host(0, 2)
	if _, err := b.CommitFile(ctx, 2, commitRequest(b, nextKey(), plain(topic, p2, 1))); !errors.Is(err, diskless.ErrShardFenced) {
		t.Fatalf("commit at the fenced writer: %v", err)
	}
	if err := b.Err(); err != nil {
		t.Fatalf("a fenced shard in a cluster made the coordinator unhealthy: %v", err)
	}
	if err := b.Release(2); err != nil {
		t.Fatal(err)
	}
	rs, err = a.CommitFile(ctx, 2, commitRequest(a, nextKey(), plain(topic, p2, 1)))
	if err != nil || rs[0].BaseOffset != hwm(a, topic, p2)-1 {
		t.Fatalf("commit at the new owner: %+v %v", rs, err)
	}
	want := hwm(a, topic, p2)
	waitFor(t, b, "B's replica after its fencing", func() bool { return hwm(b, topic, p2) == want })
}

// TestClusterReplicaAfterSnapshots: a replica opened after the owner
// snapshotted and truncated its log loads the snapshot; one running
// meanwhile follows across the truncations.
func TestClusterReplicaAfterSnapshots(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 1, func(c *Config) { c.SnapshotIntervalRecords = 5 })
	a := cl.nodes[0]
	cl.host(0, 0, 1, 2, 3)
	topic, err := a.CreateTopic(ctx, "t", 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A second coordinator follows while A commits past several
	// snapshots.
	late := newClusterOn(t, cl, 2)
	for i := range 40 {
		p := int32(i % 4)
		s := a.ShardFor(topic.ID, p)
		if _, err := a.CommitFile(ctx, s, commitRequest(a, nextKey(), plain(topic, p, 1))); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, late, "the running replica", func() bool { return hwm(late, topic, 3) == 10 })
	// A third opened now loads the latest snapshots.
	fresh := newClusterOn(t, cl, 3)
	for p := range int32(4) {
		if got := hwm(fresh, topic, p); got != 10 {
			t.Fatalf("a replica opened after snapshots: partition %d at %d, want 10", p, got)
		}
	}
}

// newClusterOn opens one more coordinator of cl's cluster.
func newClusterOn(t *testing.T, cl *cluster, node int32) *Coordinator {
	t.Helper()
	c, err := Open(Config{
		NumShards: clusterShards, NodeID: node, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), LifecycleInterval: -1,
		OpenLog:      func(s int32) (metalog.Log, error) { return cl.mem.Open(s) },
		OpenFollower: func(s int32) (metalog.Follower, error) { return cl.mem.Follow(s) },
		Remote:       remote{cl},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestClusterHostRace: Host, Release and Close at once, many times,
// leave no goroutine (goleak) and no request unanswered.
func TestClusterHostRace(t *testing.T) {
	cl := newCluster(t, 2)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			n := cl.nodes[i%2]
			n.Host(context.Background(), int32(i%clusterShards))
			n.Release(int32(i % clusterShards))
		})
	}
	wg.Wait()
	for _, c := range cl.nodes {
		c.Close()
	}
}
