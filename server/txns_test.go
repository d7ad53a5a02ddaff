package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/metalog/metalogtest"
	"github.com/diskless-sidecar/sidecar/server"
)

// serveTxnCoordinator serves a coordinator of three shards on an
// in-memory log as the groups' and transactions' coordinator behind a
// server on a free port, both stopped when the test ends.
func serveTxnCoordinator(t *testing.T) (*coordinator.Coordinator, *server.Server) {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	mem := &metalogtest.Memory{}
	c, err := coordinator.Open(coordinator.Config{NumShards: 3, Logger: quiet, LifecycleInterval: -1, OpenLog: mem.Open})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, stop := serveCoordinator(t, server.Config{Addr: "127.0.0.1:0", NodeID: 1, ClusterID: "txn", Logger: quiet, Groups: c, Transactions: c}, c)
	t.Cleanup(stop)
	return c, s
}

// TestTransactionsOverTheWire drives the real transaction coordinator
// behind the real server with franz-go's client, which finds the
// coordinators itself (FindCoordinator key types 1 and 0): InitProducerId
// with a transactional id, AddPartitionsToTxn (v3 and the v4 verify-only
// form), AddOffsetsToTxn, TxnOffsetCommit, EndTxn; the committed offset is
// visible only once EndTxn committed, and a second producer of the id
// fences the first.
func TestTransactionsOverTheWire(t *testing.T) {
	c, s := serveTxnCoordinator(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateTopic(ctx, "t", 2, nil); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKeys = 1, []string{"tx"}
	if r, err := fc.RequestWith(ctx, cl); err != nil || r.Coordinators[0].ErrorCode != 0 || r.Coordinators[0].NodeID != 1 {
		t.Fatalf("FindCoordinator(transaction): %+v %v", r, err)
	}
	init := func(timeout int32) *kmsg.InitProducerIDResponse {
		t.Helper()
		for {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr("tx"), timeout
			r, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			if r.ErrorCode != kerr.ConcurrentTransactions.Code {
				return r
			}
		}
	}
	if r := init(900_001); r.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("InitProducerId over transaction.max.timeout.ms: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	r := init(60_000)
	if r.ErrorCode != 0 || r.ProducerID < 0 || r.ProducerEpoch != 0 {
		t.Fatalf("InitProducerId: %+v", r)
	}
	pid, ep := r.ProducerID, r.ProducerEpoch

	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.Version = 3
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = "tx", pid, ep
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	ar, err := add.RequestWith(ctx, cl)
	if err != nil || ar.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn v3: %+v %v", ar, err)
	}
	verify := kmsg.NewPtrAddPartitionsToTxnRequest()
	verify.Version = 4
	vt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	vt.TransactionalID, vt.ProducerID, vt.ProducerEpoch, vt.VerifyOnly = "tx", pid, ep, true
	vt.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "t", Partitions: []int32{0, 1}}}
	verify.Transactions = append(verify.Transactions, vt)
	vr, err := verify.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if ps := vr.Transactions[0].Topics[0].Partitions; ps[0].ErrorCode != 0 || ps[1].ErrorCode != kerr.TransactionAbortable.Code {
		t.Fatalf("verify-only: %+v", ps)
	}

	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = "tx", pid, ep, "g"
	if r, err := ao.RequestWith(ctx, cl); err != nil || r.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %+v %v", r, err)
	}
	toc := kmsg.NewPtrTxnOffsetCommitRequest()
	toc.TransactionalID, toc.ProducerID, toc.ProducerEpoch, toc.Group, toc.Generation = "tx", pid, ep, "g", -1
	toc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 42, LeaderEpoch: -1}}}}
	if r, err := toc.RequestWith(ctx, cl); err != nil || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit: %+v %v", r, err)
	}
	fetch := func(stable bool) (int64, int16) {
		t.Helper()
		of := kmsg.NewPtrOffsetFetchRequest()
		of.Group, of.RequireStable = "g", stable
		of.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
		r, err := of.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Groups) > 0 {
			p := r.Groups[0].Topics[0].Partitions[0]
			return p.Offset, p.ErrorCode
		}
		p := r.Topics[0].Partitions[0]
		return p.Offset, p.ErrorCode
	}
	if off, code := fetch(true); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("OffsetFetch require_stable during the transaction: %d %v", off, kerr.ErrorForCode(code))
	}
	end := func(pid int64, ep int16, commit bool) int16 {
		t.Helper()
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = "tx", pid, ep, commit
		r, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return r.ErrorCode
	}
	if code := end(pid, ep, true); code != 0 {
		t.Fatalf("EndTxn: %v", kerr.ErrorForCode(code))
	}
	if off, code := fetch(true); code != 0 || off != 42 {
		t.Fatalf("OffsetFetch after the commit: %d %v", off, kerr.ErrorForCode(code))
	}

	// A second producer of the id fences the first.
	r2 := init(60_000)
	if r2.ErrorCode != 0 || r2.ProducerID != pid || r2.ProducerEpoch != ep+1 {
		t.Fatalf("second producer: %+v", r2)
	}
	if code := end(pid, ep, true); code != kerr.ProducerFenced.Code {
		t.Fatalf("zombie EndTxn: %v", kerr.ErrorForCode(code))
	}
	ao.ProducerEpoch = ep
	if r, err := ao.RequestWith(ctx, cl); err != nil || r.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("zombie AddOffsetsToTxn: %+v %v", r, err)
	}
}

// commitOne commits batch b alone to c as a file of its own (key), as the
// produce pipeline does, and returns its result.
func commitOne(ctx context.Context, c *coordinator.Coordinator, key string, b diskless.CommitBatch) (diskless.CommitBatchResult, error) {
	shard := c.ShardFor(b.TopicID, b.Partition)
	b.Magic, b.ByteSize = 2, 100
	rs, err := c.CommitFile(ctx, shard, &diskless.CommitFileRequest{
		ObjectKey: key, ObjectFormat: diskless.ObjectFormatWriteAheadMultiSegment, FileSize: 100,
		UploaderBrokerID: 1, OwnerIDs: []int32{shard}, Batches: []diskless.CommitBatch{b},
	})
	if err != nil {
		return diskless.CommitBatchResult{}, err
	}
	return rs[0], nil
}

// racingMarkers is a marker writer that first runs race (what commits
// between WriteTxnMarkers' check and its markers' commit), then commits
// each marker to c on its own and answers the refused ones per partition
// (diskless.MarkerErrors), as produce.Handler.WriteMarkers does
// (produce.TestMarkersRefusedPerPartition).
type racingMarkers struct {
	c    *coordinator.Coordinator
	race func()
	n    int
}

func (m *racingMarkers) WriteMarkers(ctx context.Context, pid int64, epoch int16, seq int64, coordEpoch int32, commit bool, parts []diskless.TopicPartition) error {
	m.race()
	kind := diskless.TxnAbort
	if commit {
		kind = diskless.TxnCommit
	}
	refused := diskless.MarkerErrors{}
	for _, tp := range parts {
		m.n++
		r, err := commitOne(ctx, m.c, fmt.Sprintf("marker-%d", m.n), diskless.CommitBatch{TopicID: tp.TopicID, Partition: tp.Partition,
			ProducerID: pid, ProducerEpoch: epoch, BaseSequence: -1, LastSequence: -1, Txn: kind, TxnSeq: seq, CoordinatorEpoch: coordEpoch,
			BatchMaxTimestamp: time.Now().UnixMilli()})
		if err != nil {
			return err
		}
		if r.Err != nil {
			refused[tp] = r.Err
		}
	}
	if len(refused) > 0 {
		return refused
	}
	return nil
}

// TestWriteTxnMarkersRefusedAtCommit: WriteTxnMarkers' check passes (the
// producer at the marker's epoch in both partitions), then a batch of a
// newer epoch of the producer is committed to t-1 before the markers are:
// t-1's shard refuses its marker at the commit (INVALID_PRODUCER_EPOCH,
// as Kafka's leader refuses it at its append) and answers t-1 alone so;
// t-0's marker is written (NONE, DescribeProducers shows its coordinator
// epoch), t-1's producer state is the newer batch's (SPEC §15).
func TestWriteTxnMarkersRefusedAtCommit(t *testing.T) {
	c, s := serveTxnCoordinator(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	top, err := c.CreateTopic(ctx, "t", 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	const pid = 5
	data := func(key string, p int32, epoch int16) {
		t.Helper()
		r, err := commitOne(ctx, c, key, diskless.CommitBatch{TopicID: top.ID, Partition: p, ProducerID: pid, ProducerEpoch: epoch,
			BatchMaxTimestamp: time.Now().UnixMilli()})
		if err != nil || r.Err != nil {
			t.Fatalf("batch of epoch %d to t-%d: %v %v", epoch, p, err, r.Err)
		}
	}
	data("d0", 0, 1)
	data("d1", 1, 1)
	c.SetMarkerWriter(&racingMarkers{c: c, race: func() { data("d2", 1, 2) }})

	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch = pid, 1, 4
	m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "t", Partitions: []int32{0, 1}}}
	req.Markers = append(req.Markers, m)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range resp.Markers[0].Topics[0].Partitions {
		got = append(got, fmt.Sprintf("t-%d %v", p.Partition, kerr.ErrorForCode(p.ErrorCode)))
	}
	if want := []string{"t-0 <nil>", fmt.Sprintf("t-1 %v", kerr.InvalidProducerEpoch)}; !slices.Equal(got, want) {
		t.Fatalf("WriteTxnMarkers: %q, want %q", got, want)
	}
	for p, want := range map[int32]string{0: "epoch 1 coordinator epoch 4", 1: "epoch 2 coordinator epoch -1"} {
		ps, kErr := c.DescribeProducers(diskless.TopicPartition{TopicID: top.ID, Partition: p})
		if kErr != nil || len(ps) != 1 {
			t.Fatalf("DescribeProducers t-%d: %v %v", p, ps, kErr)
		}
		if g := fmt.Sprintf("epoch %d coordinator epoch %d", ps[0].ProducerEpoch, ps[0].CoordinatorEpoch); g != want {
			t.Errorf("t-%d: producer %d %s, want %s", p, pid, g, want)
		}
	}
}
