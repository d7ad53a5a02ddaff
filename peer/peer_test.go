package peer

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/group"
	"github.com/diskless-sidecar/sidecar/metalog"
	"github.com/diskless-sidecar/sidecar/metalog/metalogtest"
	"github.com/diskless-sidecar/sidecar/rpcmsg"
	"github.com/diskless-sidecar/sidecar/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	numShards = 4
	testWait  = 10 * time.Second
)

// quiet is a logger that drops everything.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// node is one in-process sidecar: a real coordinator (in-memory logs)
// behind a real Kafka listener, answering the coordinator RPCs.
type node struct {
	id     int32
	coord  *coordinator.Coordinator
	srv    *server.Server
	shards *hosted
	// disabled records the DisklessDisableTopic requests it got.
	disabled chan diskless.DisableTopicRequest
}

func (n *node) sidecar() diskless.Sidecar {
	a := n.srv.Addr().(*net.TCPAddr)
	return diskless.Sidecar{NodeID: n.id, Host: a.IP.String(), Port: int32(a.Port)}
}

// hosted is the coordinator as server.Shards, serving only the shards
// set in it (all by default): the others answer NOT_COORDINATOR, as a
// shard that moved away does.
type hosted struct {
	*coordinator.Coordinator
	mu  sync.Mutex
	not map[int32]bool
}

func (h *hosted) Serving(shard int32) error {
	h.mu.Lock()
	not := h.not[shard]
	h.mu.Unlock()
	if not {
		return diskless.ErrNotCoordinator
	}
	return h.Coordinator.Serving(shard)
}

func (h *hosted) drop(shard int32) {
	h.mu.Lock()
	h.not[shard] = true
	h.mu.Unlock()
}

func (n *node) DisableTopic(_ context.Context, req diskless.DisableTopicRequest) error {
	n.disabled <- req
	return nil
}

func startNode(t testing.TB, id int32) *node {
	t.Helper()
	mem := &metalogtest.Memory{}
	coord, err := coordinator.Open(coordinator.Config{
		NumShards: numShards, NodeID: id, Logger: quiet,
		OpenLog: func(s int32) (metalog.Log, error) { return mem.Open(s) },
	})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{id: id, coord: coord, shards: &hosted{Coordinator: coord, not: map[int32]bool{}},
		disabled: make(chan diskless.DisableTopicRequest, 16)}
	n.srv, err = server.New(server.Config{Addr: "127.0.0.1:0", NodeID: id, ClusterID: "peer-test", Logger: quiet,
		Shards: n.shards, Disabler: n}, stubProducer{}, stubFetcher{}, coord)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.srv.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- n.srv.Serve(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testWait)
		defer cancel()
		n.srv.Shutdown(ctx)
		<-served
		coord.Close()
	})
	return n
}

// stubProducer and stubFetcher stand for the produce and fetch paths the
// tests do not use.
type stubProducer struct{}

func (stubProducer) Produce(context.Context, *kmsg.ProduceRequest) func() *kmsg.ProduceResponse {
	return nil
}
func (stubProducer) APIVersions() []kmsg.ApiVersionsResponseApiKey {
	return []kmsg.ApiVersionsResponseApiKey{{ApiKey: 0, MinVersion: 3, MaxVersion: 13}}
}

type stubFetcher struct{}

func (stubFetcher) Fetch(context.Context, *kmsg.FetchRequest) *kmsg.FetchResponse { return nil }
func (stubFetcher) ListOffsets(context.Context, *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
	return nil
}
func (stubFetcher) OffsetForLeaderEpoch(context.Context, *kmsg.OffsetForLeaderEpochRequest) *kmsg.OffsetForLeaderEpochResponse {
	return nil
}
func (stubFetcher) APIVersions() []kmsg.ApiVersionsResponseApiKey {
	return []kmsg.ApiVersionsResponseApiKey{{ApiKey: 1, MinVersion: 4, MaxVersion: 16},
		{ApiKey: 2, MinVersion: 1, MaxVersion: 8}, {ApiKey: 23, MinVersion: 0, MaxVersion: 4}}
}

// placement is a Placement the test moves by hand.
type placement struct {
	mu      sync.Mutex
	owners  map[int32]diskless.Sidecar
	changed chan struct{}
}

func newPlacement(owner diskless.Sidecar) *placement {
	p := &placement{owners: map[int32]diskless.Sidecar{}, changed: make(chan struct{})}
	for s := range int32(numShards) {
		p.owners[s] = owner
	}
	return p
}

func (p *placement) Owner(shard int32) (diskless.Sidecar, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	o, ok := p.owners[shard]
	return o, ok
}

func (p *placement) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

func (p *placement) move(shard int32, to *diskless.Sidecar) {
	p.mu.Lock()
	if to == nil {
		delete(p.owners, shard)
	} else {
		p.owners[shard] = *to
	}
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

func newRouter(t *testing.T, self *node, p Placement) (*Router, *Client) {
	t.Helper()
	cl := NewClient(ClientConfig{Logger: quiet})
	t.Cleanup(cl.Close)
	r, err := NewRouter(RouterConfig{NodeID: self.id, Local: self.coord, Placement: p, Client: cl, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return r, cl
}

// commitReq is a commit of n one-record batches to partition p of t.
func commitReq(t diskless.Topic, p int32, key string, n int, producer int64, seq int32) *diskless.CommitFileRequest {
	req := &diskless.CommitFileRequest{ObjectKey: key, ObjectFormat: diskless.ObjectFormatWriteAheadMultiSegment,
		FileSize: int64(n) * 100, UploaderBrokerID: 1}
	for i := range n {
		b := diskless.CommitBatch{TopicID: t.ID, Partition: p, Magic: 2, ByteOffset: int32(i * 100), ByteSize: 100,
			BatchMaxTimestamp: 1_700_000_000_000 + int64(i), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, LastSequence: -1}
		if producer >= 0 {
			b.ProducerID, b.ProducerEpoch, b.BaseSequence, b.LastSequence = producer, 0, seq+int32(i), seq+int32(i)
		}
		req.Batches = append(req.Batches, b)
	}
	return req
}

// TestRouterRemoteEqualsLocal drives every coordinator RPC through a
// Router on sidecar A whose placement names sidecar B for every shard,
// and checks each answer against B's coordinator called directly: the
// conversions both ways lose nothing (DisklessCheckTxn's token and
// refusals, for a produce and for offsets; DisklessEndTxnOffsets' group,
// producer, outcome and token, by the offset it commits — a token
// dropped on the way would be 0, 'not known', which ends the next
// transaction's offsets too).
func TestRouterRemoteEqualsLocal(t *testing.T) {
	a, b := startNodes(t, 1, 2)
	ctx := context.Background()
	r, cl := newRouter(t, a, newPlacement(b.sidecar()))

	topic, err := b.coord.CreateTopic(ctx, "orders", 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Commits through the router land in B, and commit like local ones.
	var shard0 int32 = -1
	for p := range topic.Partitions {
		s := b.coord.ShardFor(topic.ID, p)
		req := commitReq(topic, p, "wal/obj-"+string(rune('a'+p)), 3, int64(100+p), 0)
		req.OwnerIDs = []int32{s}
		rs, err := r.CommitFile(ctx, s, req)
		if err != nil {
			t.Fatalf("CommitFile partition %d: %v", p, err)
		}
		if len(rs) != 3 || rs[0].Err != nil || rs[0].BaseOffset != 0 || rs[2].BaseOffset != 2 || rs[0].LogAppendTime <= 0 {
			t.Fatalf("CommitFile partition %d: %+v", p, rs)
		}
		// A repeat is answered as before.
		again, err := r.CommitFile(ctx, s, req)
		if err != nil || !reflect.DeepEqual(stripDup(again), stripDup(rs)) {
			t.Fatalf("repeated CommitFile: %+v, %v; first %+v", again, err, rs)
		}
		if shard0 < 0 {
			shard0 = s
		}
	}
	if _, ok := a.coord.TopicByID(topic.ID); ok {
		t.Fatal("the topic reached sidecar A's own coordinator")
	}
	// A batch refused by the shard: an out-of-order sequence.
	bad := commitReq(topic, 0, "wal/bad", 1, 100, 7)
	bad.OwnerIDs = []int32{b.coord.ShardFor(topic.ID, 0)}
	rs, err := r.CommitFile(ctx, bad.OwnerIDs[0], bad)
	if err != nil || rs[0].Err != kerr.OutOfOrderSequenceNumber {
		t.Fatalf("out-of-order commit: %+v, %v", rs, err)
	}
	// A malformed commit: ErrInvalidCommit, as locally.
	if _, err := r.CommitFile(ctx, 0, &diskless.CommitFileRequest{}); !errors.Is(err, diskless.ErrInvalidCommit) {
		t.Fatalf("invalid commit: %v", err)
	}

	// FindBatches over every partition (several shards, one call), and
	// from offsets inside, at and past the end.
	var reqs []diskless.FindBatchesRequest
	for p := range topic.Partitions {
		for _, off := range []int64{0, 1, 3, 9} {
			reqs = append(reqs, diskless.FindBatchesRequest{TopicID: topic.ID, Partition: p, Offset: off, MaxBytes: 150})
		}
	}
	reqs = append(reqs, diskless.FindBatchesRequest{TopicID: diskless.TopicID{9}, Partition: 0})
	if got, want := r.FindBatches(ctx, reqs), b.coord.FindBatches(ctx, reqs); !reflect.DeepEqual(got, want) {
		t.Fatalf("FindBatches through the router:\n got %+v\nwant %+v", got, want)
	}
	tp := diskless.TopicPartition{TopicID: topic.ID, Partition: 1}
	for _, ts := range []int64{diskless.ListOffsetsLatest, diskless.ListOffsetsEarliest, diskless.ListOffsetsMaxTimestamp, 0, 1_700_000_000_001, 1 << 50, -7} {
		if got, want := r.ListOffsets(ctx, tp, ts), b.coord.ListOffsets(ctx, tp, ts); !reflect.DeepEqual(got, want) {
			t.Fatalf("ListOffsets %d:\n got %+v\nwant %+v", ts, got, want)
		}
		if got, want := r.ListOffsetsFrom(ctx, tp, ts, 1), b.coord.ListOffsetsFrom(ctx, tp, ts, 1); !reflect.DeepEqual(got, want) {
			t.Fatalf("ListOffsetsFrom %d:\n got %+v\nwant %+v", ts, got, want)
		}
	}

	keys := []string{"wal/obj-a", "wal/none", "wal/bad"}
	got, err := r.DescribeFiles(ctx, shard0, keys)
	want, werr := b.coord.DescribeFiles(ctx, shard0, keys)
	if err != nil || werr != nil || !reflect.DeepEqual(got, want) || got[0] != diskless.FileLive {
		t.Fatalf("DescribeFiles: %v %v, want %v %v", got, err, want, werr)
	}

	low, err := r.DeleteRecords(ctx, tp, 2)
	if err != nil || low != 2 {
		t.Fatalf("DeleteRecords: %d, %v", low, err)
	}
	if _, err := r.DeleteRecords(ctx, tp, 99); !errors.Is(err, kerr.OffsetOutOfRange) {
		t.Fatalf("DeleteRecords past the end: %v", err)
	}
	if l := b.coord.ListOffsets(ctx, tp, diskless.ListOffsetsEarliest); l.Offset != 2 {
		t.Fatalf("log start at B %d, want 2", l.Offset)
	}

	// The shard-local steps of the topic lifecycle.
	grown := diskless.Topic{ID: topic.ID, Name: topic.Name}
	s9 := b.coord.ShardFor(topic.ID, 9)
	if err := r.CreatePartitionsIn(ctx, s9, []diskless.TopicPartitions{{ID: grown.ID, Name: grown.Name, Partitions: []int32{9}}}); err != nil {
		t.Fatalf("CreatePartitionsIn: %v", err)
	}
	if err := r.CreatePartitionsIn(ctx, (s9+1)%numShards, []diskless.TopicPartitions{{ID: grown.ID, Name: grown.Name, Partitions: []int32{9}}}); err == nil {
		t.Fatal("CreatePartitionsIn of another shard's partition accepted")
	}
	if err := r.DeleteTopicsIn(ctx, s9, []diskless.TopicID{{7}}); err != nil {
		t.Fatalf("DeleteTopicsIn: %v", err)
	}
	if err := r.CloseFiles(ctx, shard0, shard0, []string{"wal/none"}); err != nil {
		t.Fatalf("CloseFiles: %v", err)
	}
	first, size, err := r.AllocateProducerIDBlock(ctx, 1)
	first2, _, err2 := b.coord.AllocateProducerIDBlock(ctx, 2)
	if err != nil || err2 != nil || size < 1 || first2 != first+int64(size) {
		t.Fatalf("AllocateProducerIDBlock: [%d, +%d) %v, then %d %v", first, size, err, first2, err2)
	}

	// DisklessCheckTxn: transactional id tx's transaction at B, open in
	// partition 1 with group g added; each check through the router
	// answers as B's own (the token, the refusals).
	id, g := "tx", "g"
	ireq := kmsg.NewPtrInitProducerIDRequest()
	ireq.TransactionalID, ireq.TransactionTimeoutMillis, ireq.ProducerID, ireq.ProducerEpoch = &id, 60000, -1, -1
	ir, err := b.coord.InitTransactionalProducer(ctx, ireq)
	if err != nil || ir.ErrorCode != 0 {
		t.Fatalf("InitTransactionalProducer: %+v %v", ir, err)
	}
	pid, epoch := ir.ProducerID, ir.ProducerEpoch
	add := kmsg.NewAddPartitionsToTxnRequestTransaction()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, pid, epoch
	add.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: topic.Name, Partitions: []int32{tp.Partition}}}
	if ar, err := b.coord.AddPartitionsToTxn(ctx, &add); err != nil || ar.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn: %+v %v", ar, err)
	}
	areq := kmsg.NewPtrAddOffsetsToTxnRequest()
	areq.TransactionalID, areq.ProducerID, areq.ProducerEpoch, areq.Group = id, pid, epoch, g
	if ar, err := b.coord.AddOffsetsToTxn(ctx, areq); err != nil || ar.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %+v %v", ar, err)
	}
	txnShard := b.coord.TxnShard(id)
	for _, tc := range []struct {
		name string
		req  diskless.TxnCheck
		want diskless.TxnCheckResult
	}{
		{"allowed", diskless.TxnCheck{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, Partitions: []diskless.TopicPartition{tp}},
			diskless.TxnCheckResult{Seq: 1, PartitionCodes: []int16{0}}},
		{"another epoch", diskless.TxnCheck{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch + 1, Partitions: []diskless.TopicPartition{tp}},
			diskless.TxnCheckResult{Code: kerr.InvalidProducerEpoch.Code}},
		{"one partition of two not in the transaction", diskless.TxnCheck{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch,
			Partitions: []diskless.TopicPartition{tp, {TopicID: topic.ID, Partition: 2}}},
			diskless.TxnCheckResult{Seq: 1, PartitionCodes: []int16{0, kerr.InvalidTxnState.Code}}},
		{"the group's offsets", diskless.TxnCheck{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, Group: g}, diskless.TxnCheckResult{Seq: 1}},
		{"a group not added", diskless.TxnCheck{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, Group: "other"},
			diskless.TxnCheckResult{Code: kerr.InvalidTxnState.Code}},
	} {
		got, err := r.CheckTxn(ctx, txnShard, tc.req)
		local, lerr := b.coord.CheckTxn(ctx, txnShard, tc.req)
		if err != nil || lerr != nil || !reflect.DeepEqual(got, local) || !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("CheckTxn, %s: %+v %v; B's own %+v %v; want %+v", tc.name, got, err, local, lerr, tc.want)
		}
	}

	// DisklessEndTxnOffsets: the transaction's pending offset of g,
	// committed by record 110 written through the router.
	txnOffset := func(offset int64) {
		t.Helper()
		oreq := kmsg.NewPtrTxnOffsetCommitRequest()
		oreq.Version, oreq.TransactionalID, oreq.Group, oreq.ProducerID, oreq.ProducerEpoch = 3, id, g, pid, epoch
		oreq.Generation = -1
		oreq.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: topic.Name, Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: offset, LeaderEpoch: -1}}}}
		if or, err := b.coord.TxnOffsetCommit(ctx, oreq); err != nil || or.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("TxnOffsetCommit: %+v %v", or, err)
		}
	}
	txnOffset(7)
	committed := func() int64 {
		t.Helper()
		f, err := b.coord.FetchOffsets(ctx, group.FetchRequest{Group: g, MemberEpoch: -1}, false)
		if err != nil || f.ErrorCode != 0 {
			t.Fatalf("FetchOffsets: %+v %v", f, err)
		}
		for _, ft := range f.Topics {
			for _, fp := range ft.Partitions {
				if ft.Topic == topic.Name && fp.Partition == 0 {
					return fp.Offset
				}
			}
		}
		return -1
	}
	if o := committed(); o != -1 {
		t.Fatalf("offset %d committed before record 110", o)
	}
	if err := r.EndTxnOffsets(ctx, b.coord.GroupShard(g), g, pid, epoch, 1, true); err != nil {
		t.Fatalf("EndTxnOffsets: %v", err)
	}
	if o := committed(); o != 7 {
		t.Fatalf("offset %d after EndTxnOffsets through the router, want 7", o)
	}
	// Transaction 1 ends at B; transaction 2 writes offset 8 of g; record
	// 110 of transaction 1 through the router again leaves it pending,
	// transaction 2's commits it.
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, pid, epoch, true
	if er, err := b.coord.EndTxn(ctx, end); err != nil || er.ErrorCode != 0 {
		t.Fatalf("EndTxn: %+v %v", er, err)
	}
	if ar, err := b.coord.AddOffsetsToTxn(ctx, areq); err != nil || ar.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn of transaction 2: %+v %v", ar, err)
	}
	txnOffset(8)
	if err := r.EndTxnOffsets(ctx, b.coord.GroupShard(g), g, pid, epoch, 1, true); err != nil {
		t.Fatalf("EndTxnOffsets of transaction 1 again: %v", err)
	}
	if o := committed(); o != 7 {
		t.Fatalf("offset %d after transaction 1's EndTxnOffsets again, want 7 (transaction 2's still pending)", o)
	}
	if err := r.EndTxnOffsets(ctx, b.coord.GroupShard(g), g, pid, epoch, 2, true); err != nil {
		t.Fatalf("EndTxnOffsets of transaction 2: %v", err)
	}
	if o := committed(); o != 8 {
		t.Fatalf("offset %d after transaction 2's EndTxnOffsets, want 8", o)
	}

	// DisklessDisableTopic reaches the other sidecar, which answers for
	// the topic's shards it hosts as its coordinator does: a transaction
	// open in partition 3 (producer 300's batch), none elsewhere.
	open := commitReq(topic, 3, "wal/txn", 1, 300, 0)
	open.Batches[0].Txn = diskless.TxnData
	open.OwnerIDs = []int32{b.coord.ShardFor(topic.ID, 3)}
	if rs, err := r.CommitFile(ctx, open.OwnerIDs[0], open); err != nil || rs[0].Err != nil {
		t.Fatalf("transactional batch: %+v %v", rs, err)
	}
	disabled, err := b.coord.AlterTopicConfigs(ctx, topic.ID, coordinator.ConfigChange{Names: []string{"diskless.enable"},
		Apply: func(cur map[string]string) (map[string]string, error) {
			cur["diskless.enable"] = "false"
			return cur, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	sc := NewSidecars(a.id, staticMembers{a.sidecar(), b.sidecar()}, a, cl)
	if got := sc.Nodes(); !reflect.DeepEqual(got, []int32{1, 2}) {
		t.Fatalf("Nodes %v", got)
	}
	req := diskless.DisableTopicRequest{TopicID: topic.ID, Topic: topic.Name, Epoch: disabled.Disablement.Epoch, Policy: diskless.DisableDelete}
	res, err := sc.DisableTopic(ctx, 2, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := <-b.disabled; got != req {
		t.Fatalf("B got %+v, want %+v", got, req)
	}
	local := b.coord.TopicTxns(ctx, req)
	if !reflect.DeepEqual(res.TxnShards, local) || len(local) != numShards {
		t.Fatalf("DisableTopic's shards %+v, B's own %+v", res.TxnShards, local)
	}
	for _, st := range local {
		if st.Open != (st.Shard == open.OwnerIDs[0]) {
			t.Fatalf("shard %d open %v; the transaction is on shard %d", st.Shard, st.Open, open.OwnerIDs[0])
		}
	}
	if res, err := sc.DisableTopic(ctx, 1, req); err != nil || res.TxnShards != nil {
		t.Fatalf("DisableTopic to itself: %+v %v (its coordinator reads its own shards)", res, err)
	}
	if _, err := sc.DisableTopic(ctx, 9, req); err == nil {
		t.Fatal("DisableTopic to a non-member succeeded")
	}
}

// stripDup clears Duplicate, which a repeated CommitFile sets.
func stripDup(rs []diskless.CommitBatchResult) []diskless.CommitBatchResult {
	out := append([]diskless.CommitBatchResult(nil), rs...)
	for i := range out {
		out[i].Duplicate = false
	}
	return out
}

type staticMembers []diskless.Sidecar

func (m staticMembers) Members() []diskless.Sidecar { return m }

func startNodes(t *testing.T, ids ...int32) (*node, *node) {
	t.Helper()
	return startNode(t, ids[0]), startNode(t, ids[1])
}

// TestRouterFollowsMovedShard: a call to a sidecar that answers
// NOT_COORDINATOR (the shard moved away) goes to the owner the placement
// names next; while no sidecar hosts the shard the call waits for one.
func TestRouterFollowsMovedShard(t *testing.T) {
	a, b := startNodes(t, 1, 2)
	c := startNode(t, 3)
	ctx := context.Background()
	pl := newPlacement(b.sidecar())
	r, _ := newRouter(t, a, pl)
	topic, err := c.coord.CreateTopic(ctx, "t", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := c.coord.ShardFor(topic.ID, 0)
	b.shards.drop(s)

	// B refuses; the placement moves the shard to C a moment later.
	go func() {
		time.Sleep(50 * time.Millisecond)
		cs := c.sidecar()
		pl.move(s, &cs)
	}()
	req := commitReq(topic, 0, "wal/moved", 2, -1, 0)
	req.OwnerIDs = []int32{s}
	rs, err := r.CommitFile(ctx, s, req)
	if errors.Is(err, ErrConnection) && errors.Is(err, errOwnerMoved) {
		// The move came while a call to B was in flight: whether B decided
		// is unknown, so the router gives the commit back and the
		// committer's retry — the same request, idempotent by key — goes
		// to C (Router.call).
		rs, err = r.CommitFile(ctx, s, req)
	}
	if err != nil || rs[1].BaseOffset != 1 {
		t.Fatalf("CommitFile after the move: %+v, %v", rs, err)
	}
	if hw := c.coord.ListOffsets(ctx, diskless.TopicPartition{TopicID: topic.ID}, diskless.ListOffsetsLatest); hw.Offset != 2 {
		t.Fatalf("C's high watermark %d, want 2", hw.Offset)
	}

	// No owner at all: the call waits until one is named.
	pl.move(s, nil)
	go func() {
		time.Sleep(50 * time.Millisecond)
		cs := c.sidecar()
		pl.move(s, &cs)
	}()
	if l := r.ListOffsets(ctx, diskless.TopicPartition{TopicID: topic.ID}, diskless.ListOffsetsLatest); l.Err != nil || l.Offset != 2 {
		t.Fatalf("ListOffsets after no owner: %+v", l)
	}

	// An owner that keeps refusing: the call gives up after its wait with
	// NOT_COORDINATOR's error (a read: NOT_LEADER_OR_FOLLOWER).
	c.shards.drop(s)
	r.cfg.WriteWait, r.cfg.ReadWait = 200*time.Millisecond, 100*time.Millisecond
	start := time.Now()
	if _, err := r.CommitFile(ctx, s, req); !errors.Is(err, diskless.ErrNotCoordinator) {
		t.Fatalf("CommitFile to a refusing owner: %v", err)
	}
	if el := time.Since(start); el < 200*time.Millisecond || el > testWait {
		t.Fatalf("gave up after %v, want the write wait (200ms)", el)
	}
	got := r.FindBatches(ctx, []diskless.FindBatchesRequest{{TopicID: topic.ID, Partition: 0}})
	if got[0].Err != kerr.NotLeaderForPartition {
		t.Fatalf("FindBatches from a refusing owner: %+v", got[0])
	}
}

// cutProxy forwards connections to target; while cutOn it forwards each
// request and closes the connection when the answer comes (the answer is
// lost, the request decided).
type cutProxy struct {
	ln     net.Listener
	target string
	cutOn  atomic.Bool
	// silent drops answers without closing anything, as a peer cut
	// off by the network does.
	silent atomic.Bool
	wg     sync.WaitGroup
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.serve(c) })
		}
	})
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *cutProxy) serve(c net.Conn) {
	defer c.Close()
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer u.Close()
	done := make(chan struct{}, 2)
	go func() {
		// Answers are dropped once cut or silent: the request arrives and
		// is decided, its answer never comes back. Cut, the connection is
		// closed at the answer — after the server decided, however long
		// that took (a timer here raced a loaded server).
		buf := make([]byte, 64<<10)
		for {
			n, err := u.Read(buf)
			if n > 0 && p.cutOn.Load() {
				c.Close()
				u.Close()
				break
			}
			if n > 0 && !p.silent.Load() {
				c.Write(buf[:n])
			}
			if err != nil {
				break
			}
		}
		done <- struct{}{}
	}()
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				u.Write(buf[:n])
			}
			if err != nil {
				break
			}
		}
		done <- struct{}{}
	}()
	<-done
	c.Close()
	u.Close()
	<-done
}

// TestRouterConnectionLost: when the connection breaks after a request
// left, a CommitFile is not resent by the router (its answer is unknown;
// the committer's retry resends it as a new attempt), a read is.
func TestRouterConnectionLost(t *testing.T) {
	a, b := startNodes(t, 1, 2)
	ctx := context.Background()
	px := newCutProxy(t, b.srv.Addr().String())
	pa := px.ln.Addr().(*net.TCPAddr)
	pl := newPlacement(diskless.Sidecar{NodeID: 2, Host: pa.IP.String(), Port: int32(pa.Port)})
	r, _ := newRouter(t, a, pl)
	r.cfg.ReadWait = 300 * time.Millisecond
	topic, err := b.coord.CreateTopic(ctx, "t", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := b.coord.ShardFor(topic.ID, 0)
	// Set the connection up before cutting.
	if l := r.ListOffsets(ctx, diskless.TopicPartition{TopicID: topic.ID}, diskless.ListOffsetsLatest); l.Err != nil {
		t.Fatal(l.Err)
	}
	px.cutOn.Store(true)
	req := commitReq(topic, 0, "wal/cut", 1, -1, 0)
	req.OwnerIDs = []int32{s}
	if _, err := r.CommitFile(ctx, s, req); !errors.Is(err, ErrConnection) || errors.Is(err, ErrNotSent) {
		t.Fatalf("CommitFile over a cut connection: %v, want ErrConnection (sent)", err)
	}
	// The commit reached B: sent once, decided there.
	if hw := b.coord.ListOffsets(ctx, diskless.TopicPartition{TopicID: topic.ID}, diskless.ListOffsetsLatest); hw.Offset != 1 {
		t.Fatalf("B's high watermark %d, want 1 (the commit sent once)", hw.Offset)
	}
	// A read is resent, and fails again here (every connection is cut)
	// until its wait ends.
	if l := r.ListOffsets(ctx, diskless.TopicPartition{TopicID: topic.ID}, diskless.ListOffsetsLatest); l.Err != kerr.KafkaStorageError {
		t.Fatalf("ListOffsets over cut connections: %+v", l)
	}
	px.cutOn.Store(false)
	if l := r.ListOffsets(ctx, diskless.TopicPartition{TopicID: topic.ID}, diskless.ListOffsetsLatest); l.Err != nil || l.Offset != 1 {
		t.Fatalf("ListOffsets after the cuts: %+v", l)
	}
}

// TestClientNoAnswer: a peer that keeps the connection open but never
// answers (as one cut off by the network does) fails the request with
// ErrConnection once its TimeoutMs and the overhead passed — not
// ErrNotSent: it left — and the next request dials again.
func TestClientNoAnswer(t *testing.T) {
	b := startNode(t, 2)
	px := newCutProxy(t, b.srv.Addr().String())
	cl := NewClient(ClientConfig{Logger: quiet, RequestTimeoutOverhead: 200 * time.Millisecond})
	defer cl.Close()
	addr := px.ln.Addr().String()
	describe := func() error {
		req := rpcmsg.NewDescribeFilesRequest()
		req.TimeoutMs, req.ShardID = 100, 0
		_, err := cl.Request(context.Background(), addr, req)
		return err
	}
	if err := describe(); err != nil {
		t.Fatal(err)
	}
	px.silent.Store(true)
	start := time.Now()
	err := describe()
	if !errors.Is(err, ErrConnection) || errors.Is(err, ErrNotSent) {
		t.Fatalf("a request never answered: %v, want ErrConnection (sent)", err)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("given up after %v, before its TimeoutMs and the overhead (300 ms)", waited)
	}
	px.silent.Store(false)
	if err := describe(); err != nil {
		t.Fatalf("after the silence: %v", err)
	}
}

// TestRouterOwnerMovedWhileWaiting: a CommitFile waiting for an owner that
// went silent is given up with ErrConnection (sent) as soon as the
// placement names another owner, long before the client's bound; a read
// goes on with the new owner.
func TestRouterOwnerMovedWhileWaiting(t *testing.T) {
	a, b, c := startNode(t, 1), startNode(t, 2), startNode(t, 3)
	ctx := context.Background()
	px := newCutProxy(t, b.srv.Addr().String())
	pa := px.ln.Addr().(*net.TCPAddr)
	pl := newPlacement(diskless.Sidecar{NodeID: 2, Host: pa.IP.String(), Port: int32(pa.Port)})
	r, _ := newRouter(t, a, pl)
	topic, err := b.coord.CreateTopic(ctx, "t", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := b.coord.ShardFor(topic.ID, 0)
	tp := diskless.TopicPartition{TopicID: topic.ID}
	if l := r.ListOffsets(ctx, tp, diskless.ListOffsetsLatest); l.Err != nil {
		t.Fatal(l.Err)
	}
	px.silent.Store(true)
	type answer struct {
		err error
		at  time.Time
	}
	done := make(chan answer, 1)
	go func() {
		req := commitReq(topic, 0, "wal/silent", 1, -1, 0)
		req.OwnerIDs = []int32{s}
		_, err := r.CommitFile(ctx, s, req)
		done <- answer{err, time.Now()}
	}()
	// The commit reached B, whose answer is dropped.
	for b.coord.ListOffsets(ctx, tp, diskless.ListOffsetsLatest).Offset != 1 {
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case got := <-done:
		t.Fatalf("CommitFile answered while its owner stayed silent: %v", got.err)
	case <-time.After(100 * time.Millisecond):
	}
	cs := c.srv.Addr().(*net.TCPAddr)
	movedAt := time.Now()
	pl.move(s, &diskless.Sidecar{NodeID: 3, Host: cs.IP.String(), Port: int32(cs.Port)})
	got := <-done
	if !errors.Is(got.err, ErrConnection) || errors.Is(got.err, ErrNotSent) {
		t.Fatalf("CommitFile to an owner that moved away: %v, want ErrConnection (sent)", got.err)
	}
	if d := got.at.Sub(movedAt); d > 5*time.Second {
		t.Fatalf("given up %v after the move, not at once", d)
	}
	// A read goes to the new owner, C, whose catalog lacks the topic (B
	// would not answer).
	if l := r.ListOffsets(ctx, tp, diskless.ListOffsetsLatest); l.Err != kerr.UnknownTopicOrPartition {
		t.Fatalf("ListOffsets after the move: %+v, want C's UNKNOWN_TOPIC_OR_PARTITION", l)
	}
}

// TestClientPipelines: many requests at once on one connection, answered
// out of order (a commit waits on its shard while reads pass it), each
// matched to its own answer.
func TestClientPipelines(t *testing.T) {
	b := startNode(t, 2)
	ctx := context.Background()
	cl := NewClient(ClientConfig{Logger: quiet})
	defer cl.Close()
	topic, err := b.coord.CreateTopic(ctx, "t", 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			p := int32(i % 4)
			s := b.coord.ShardFor(topic.ID, p)
			if i%2 == 0 {
				req := commitReq(topic, p, "wal/p-"+string(rune('A'+i)), 1, -1, 0)
				req.OwnerIDs = []int32{s}
				if _, err := cl.commitFile(ctx, b.sidecar().Addr(), s, req); err != nil {
					errs <- err
				}
				return
			}
			l, err := cl.listOffsets(ctx, b.sidecar().Addr(), s, diskless.TopicPartition{TopicID: topic.ID, Partition: p}, diskless.ListOffsetsEarliest, -1)
			if err != nil || l.Err != nil || l.Offset != 0 {
				errs <- errors.Join(err, l.Err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	cl.mu.Lock()
	n := len(cl.mu.conns)
	cl.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}
	var total int64
	for p := range int32(4) {
		total += b.coord.ListOffsets(ctx, diskless.TopicPartition{TopicID: topic.ID, Partition: p}, diskless.ListOffsetsLatest).Offset
	}
	if total != 32 {
		t.Fatalf("%d records committed, want 32", total)
	}
}

// TestClientVersions: a key the peer does not advertise is not sent
// (ErrUnsupported), and a peer that is not there fails with ErrNotSent.
func TestClientVersions(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// A peer answering ApiVersions with keys 0–99 only (an older release).
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		frame, err := readFrame(c, 1<<20)
		if err != nil {
			return
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 3
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MinVersion: 0, MaxVersion: 4}}
		out := appendResponseFrame(int32(beUint32(frame[4:])), resp)
		c.Write(out)
		io.Copy(io.Discard, c)
	})
	cl := NewClient(ClientConfig{Logger: quiet})
	defer cl.Close()
	_, err = cl.Request(context.Background(), ln.Addr().String(), rpcmsg.NewFindBatchesRequest())
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("key 102 to a peer without it: %v", err)
	}
	cl.Close()

	cl2 := NewClient(ClientConfig{Logger: quiet, DialTimeout: time.Second})
	defer cl2.Close()
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := dead.Addr().String()
	dead.Close()
	if _, err := cl2.Request(context.Background(), addr, rpcmsg.NewFindBatchesRequest()); !errors.Is(err, ErrNotSent) {
		t.Fatalf("request to a closed port: %v", err)
	}
}

func beUint32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// appendResponseFrame is a v0-header response frame.
func appendResponseFrame(corr int32, resp kmsg.Response) []byte {
	body := resp.AppendTo(nil)
	out := make([]byte, 8, 8+len(body))
	n := uint32(4 + len(body))
	out[0], out[1], out[2], out[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	out[4], out[5], out[6], out[7] = byte(corr>>24), byte(corr>>16), byte(corr>>8), byte(corr)
	return append(out, body...)
}
