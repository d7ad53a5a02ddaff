package server_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/metalog/metalogtest"
	"github.com/diskless-sidecar/sidecar/server"
)

// TestTransactionsOverTheWire drives the real transaction coordinator
// behind the real server with franz-go's client, which finds the
// coordinators itself (FindCoordinator key types 1 and 0): InitProducerId
// with a transactional id, AddPartitionsToTxn (v3 and the v4 verify-only
// form), AddOffsetsToTxn, TxnOffsetCommit, EndTxn; the committed offset is
// visible only once EndTxn committed, and a second producer of the id
// fences the first.
func TestTransactionsOverTheWire(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	mem := &metalogtest.Memory{}
	c, err := coordinator.Open(coordinator.Config{NumShards: 3, Logger: quiet, LifecycleInterval: -1, OpenLog: mem.Open})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, stop := serveCoordinator(t, server.Config{Addr: "127.0.0.1:0", NodeID: 1, ClusterID: "txn", Logger: quiet, Groups: c, Transactions: c}, c)
	defer stop()
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
