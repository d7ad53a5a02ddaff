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
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
	"github.com/diskless-sidecar/sidecar/metalog/metalogtest"
	"github.com/diskless-sidecar/sidecar/server"
)

// TestTransactionErrorsMatchKafka sends one sequence of transaction
// requests — timeouts out of bounds, epoch bumps, KIP-360 expected
// epochs, producer checks of EndTxn, AddPartitionsToTxn and
// AddOffsetsToTxn, unknown topics and partitions, the KIP-890 verify-only
// form, TxnOffsetCommit of a group not in the transaction at v3 and v4, the end of an empty transaction — to Apache Kafka 4.4 and to the
// transaction coordinator behind the server, and requires the same
// answers (SPEC §15). Producer ids differ; epochs are compared.
func TestTransactionErrorsMatchKafka(t *testing.T) {
	kafkatest.Require(t)
	kc := kafkatest.Start(t, kafkatest.Options{})

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := coordinator.Open(coordinator.Config{NumShards: 3, Logger: quiet, LifecycleInterval: -1, OpenLog: (&metalogtest.Memory{}).Open})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, stop := serveCoordinator(t, server.Config{Addr: "127.0.0.1:0", NodeID: 1, ClusterID: "txn", Logger: quiet, Groups: c, Transactions: c}, c)
	defer stop()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var answers [2][]string
	for i, addr := range []string{kc.BootstrapServers(), s.Addr().String()} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		ct := kmsg.NewPtrCreateTopicsRequest()
		tt := kmsg.NewCreateTopicsRequestTopic()
		tt.Topic, tt.NumPartitions, tt.ReplicationFactor = "t", 2, 1
		ct.Topics = append(ct.Topics, tt)
		if r, err := ct.RequestWith(ctx, cl); err != nil || r.Topics[0].ErrorCode != 0 {
			t.Fatalf("CreateTopics: %v %v", err, r)
		}
		answers[i] = txnSequence(ctx, t, cl, addr)
		cl.Close()
	}
	for i := range max(len(answers[0]), len(answers[1])) {
		var k, sc string
		if i < len(answers[0]) {
			k = answers[0][i]
		}
		if i < len(answers[1]) {
			sc = answers[1][i]
		}
		if k != sc {
			t.Errorf("step %d: Kafka %q, sidecar %q", i, k, sc)
		} else {
			t.Logf("step %d: %s", i, k)
		}
	}
}

// txnSequence sends the sequence to the cluster behind cl and returns one
// line per answer.
func txnSequence(ctx context.Context, t *testing.T, cl *kgo.Client, addr string) []string {
	var out []string
	say := func(step string, codes ...int16) {
		names := make([]string, len(codes))
		for i, c := range codes {
			names[i] = "NONE"
			if c != 0 {
				names[i] = kerr.ErrorForCode(c).(*kerr.Error).Message
			}
		}
		out = append(out, fmt.Sprintf("%s: %v", step, names))
	}
	retriable := []int16{kerr.CoordinatorLoadInProgress.Code, kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code, kerr.ConcurrentTransactions.Code}
	init := func(id string, timeout int32, pid int64, epoch int16) *kmsg.InitProducerIDResponse {
		for {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.Version = 4
			req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = &id, timeout, pid, epoch
			r, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(retriable, r.ErrorCode) {
				return r
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	end := func(step, id string, pid int64, epoch int16, commit bool) {
		req := kmsg.NewPtrEndTxnRequest()
		req.Version = 4
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
		r, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		say(step, r.ErrorCode)
	}
	add := func(step string, pid int64, epoch int16, topic string, parts ...int32) {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version = 3
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = "tx", pid, epoch
		req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topic, Partitions: parts}}
		r, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		var codes []int16
		for _, p := range r.Topics[0].Partitions {
			codes = append(codes, p.ErrorCode)
		}
		say(step, codes...)
	}
	verify := func(step, id string, pid int64, epoch int16) {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version = 4
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = id, pid, epoch, true
		tx.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "t", Partitions: []int32{0, 1}}}
		req.Transactions = append(req.Transactions, tx)
		r, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		// Kafka answers the partitions in no particular order.
		ps := slices.Clone(r.Transactions[0].Topics[0].Partitions)
		slices.SortFunc(ps, func(a, b kmsg.AddPartitionsToTxnResponseTransactionTopicPartition) int {
			return int(a.Partition - b.Partition)
		})
		codes := []int16{r.ErrorCode}
		for _, p := range ps {
			codes = append(codes, p.ErrorCode)
		}
		say(step, codes...)
	}
	// offsetsAt sends TxnOffsetCommit for group g at version v (a client
	// whose versions stop there), retried while the group's coordinator
	// is not ready.
	offsetsAt := func(step string, v int16, pid int64, epoch int16) {
		vs := kversion.Stable()
		vs.SetMaxKeyVersion(28, v)
		vc, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxVersions(vs))
		if err != nil {
			t.Fatal(err)
		}
		defer vc.Close()
		for {
			req := kmsg.NewPtrTxnOffsetCommitRequest()
			req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group, req.Generation = "tx", pid, epoch, "g", -1
			req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}}}
			r, err := req.RequestWith(ctx, vc)
			if err != nil {
				t.Fatal(err)
			}
			if code := r.Topics[0].Partitions[0].ErrorCode; !slices.Contains(retriable, code) {
				say(step, code)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	addOffsets := func(step string, pid int64, epoch int16) {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = "tx", pid, epoch, "g"
		r, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		say(step, r.ErrorCode)
	}

	for _, to := range []int32{900_001, 0, -5} {
		say(fmt.Sprintf("init timeout %d", to), init("tx", to, -1, -1).ErrorCode)
	}
	r := init("tx", 60_000, -1, -1)
	say(fmt.Sprintf("init: epoch %d", r.ProducerEpoch), r.ErrorCode)
	pid := r.ProducerID
	r = init("tx", 60_000, -1, -1)
	say(fmt.Sprintf("init again: epoch %d", r.ProducerEpoch), r.ErrorCode)
	say("init expecting another producer id", init("tx", 60_000, pid+1000, 0).ErrorCode)
	say("init expecting an older epoch", init("tx", 60_000, pid, r.ProducerEpoch-1).ErrorCode)
	r = init("tx", 60_000, pid, r.ProducerEpoch)
	say(fmt.Sprintf("init expecting the current epoch: epoch %d", r.ProducerEpoch), r.ErrorCode)
	ep := r.ProducerEpoch

	end("commit with no transaction", "tx", pid, ep, true)
	end("EndTxn older epoch", "tx", pid, ep-1, true)
	end("EndTxn newer epoch", "tx", pid, ep+1, true)
	end("EndTxn other producer id", "tx", pid+7, ep, true)
	end("EndTxn unknown id", "nope", pid, ep, true)
	add("add older epoch", pid, ep-1, "t", 0)
	add("add other producer id", pid+3, ep, "t", 0)
	add("add unknown topic", pid, ep, "nosuch", 0)
	add("add unknown partition", pid, ep, "t", 0, 9)
	add("add", pid, ep, "t", 0)
	add("add again", pid, ep, "t", 0)
	verify("verify", "tx", pid, ep)
	verify("verify unknown id", "nope", pid, ep)
	verify("verify older epoch", "tx", pid, ep-1)
	// The group is not in the transaction: v3 INVALID_TXN_STATE, v4 (a
	// client that takes abortable errors, KIP-890) TRANSACTION_ABORTABLE.
	offsetsAt("offsets of a group not added, v3", 3, pid, ep)
	offsetsAt("offsets of a group not added, v4", 4, pid, ep)
	addOffsets("add offsets older epoch", pid, ep-1)
	addOffsets("add offsets", pid, ep)
	end("commit", "tx", pid, ep, true)
	r3 := init("tx3", 60_000, -1, -1)
	end("abort with no transaction", "tx3", r3.ProducerID, r3.ProducerEpoch, false)
	return out
}
