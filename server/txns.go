package server

import (
	"context"
	"errors"
	"log/slog"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// Transactions is the transaction coordinator (the coordinator shards,
// each hosting the transactional ids that hash to it: DESIGN
// §Transactions). Each method takes one request (AddPartitionsToTxn: one
// transaction of it) and returns its answer; an error means a shard could
// not answer and is answered as the group APIs' (groupErrCode); an error
// allocating a producer id carries the catalog's *kerr.Error. All are
// safe for concurrent use.
type Transactions interface {
	InitTransactionalProducer(ctx context.Context, req *kmsg.InitProducerIDRequest) (*kmsg.InitProducerIDResponse, error)
	AddPartitionsToTxn(ctx context.Context, t *kmsg.AddPartitionsToTxnRequestTransaction) (kmsg.AddPartitionsToTxnResponseTransaction, error)
	AddOffsetsToTxn(ctx context.Context, req *kmsg.AddOffsetsToTxnRequest) (*kmsg.AddOffsetsToTxnResponse, error)
	EndTxn(ctx context.Context, req *kmsg.EndTxnRequest) (*kmsg.EndTxnResponse, error)
	TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) (*kmsg.TxnOffsetCommitResponse, error)
	// The operators' APIs (kafka-transactions.sh): DescribeTransaction
	// answers one id of DescribeTransactions, ListTransactions the whole
	// request (an error when a shard could not answer), DescribeProducers
	// one partition of DescribeProducers (its code on error).
	DescribeTransaction(ctx context.Context, id string) (kmsg.DescribeTransactionsResponseTransactionState, error)
	ListTransactions(ctx context.Context, req *kmsg.ListTransactionsRequest) (*kmsg.ListTransactionsResponse, error)
	DescribeProducers(tp diskless.TopicPartition) ([]kmsg.DescribeProducersResponseTopicPartitionActiveProducer, *kerr.Error)
	// WriteTxnMarkers writes producer (producerID, epoch)'s COMMIT
	// (commit) or ABORT marker of coordinator epoch coordEpoch into
	// parts, as a transaction's completion does, and returns once they
	// are committed (WriteTxnMarkers, which kafka-transactions.sh abort
	// sends); a diskless.MarkerErrors names the partitions that refused
	// their markers (each answered its own error, the others written),
	// another error applies to every partition.
	WriteTxnMarkers(ctx context.Context, producerID int64, epoch int16, coordEpoch int32, commit bool, parts []diskless.TopicPartition) error
}

// The transaction APIs' versions (SPEC §15). The versions that signal
// transactions v2 (KIP-890 part 2: AddPartitionsToTxn v5, EndTxn v5,
// TxnOffsetCommit v5) are not served, nor TxnOffsetCommit v6 (topic
// ids), and ApiVersions announces no transaction.version feature, so
// clients run transactions v1: AddPartitionsToTxn before producing to a
// partition, an epoch bumped only by InitProducerId. They are advertised
// only when Config.Transactions is set (New): without it the dispatcher
// refuses them as unknown keys and their handlers never run.
var (
	addPartitionsToTxnVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 24, MinVersion: 0, MaxVersion: 4}
	addOffsetsToTxnVersions    = kmsg.ApiVersionsResponseApiKey{ApiKey: 25, MinVersion: 0, MaxVersion: 4}
	endTxnVersions             = kmsg.ApiVersionsResponseApiKey{ApiKey: 26, MinVersion: 0, MaxVersion: 4}
	txnOffsetCommitVersions    = kmsg.ApiVersionsResponseApiKey{ApiKey: 28, MinVersion: 0, MaxVersion: 4}
)

// The operators' transaction APIs (kafka-transactions.sh), all of kmsg's
// versions: ListTransactions v1 adds the duration filter (KIP-994), v2
// the transactional-id pattern (KIP-1152).
var (
	describeProducersVersions    = kmsg.ApiVersionsResponseApiKey{ApiKey: 61, MinVersion: 0, MaxVersion: 0}
	describeTransactionsVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 65, MinVersion: 0, MaxVersion: 0}
	listTransactionsVersions     = kmsg.ApiVersionsResponseApiKey{ApiKey: 66, MinVersion: 0, MaxVersion: 2}
	// writeTxnMarkersVersions: 1–2, Kafka 4's (v0 removed, KIP-896).
	writeTxnMarkersVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 27, MinVersion: 1, MaxVersion: 2}
)

// txnKeys are the API keys that exist only with a transaction coordinator.
// DescribeProducers is among them: the producer state it shows is a
// partition's shard's, which a sidecar reads in process only.
var txnKeys = []int16{24, 25, 26, 27, 28, 61, 65, 66}

// withoutTxns returns apis without the transaction APIs when drop is set:
// without a transaction coordinator they do not exist.
func withoutTxns(apis []kmsg.ApiVersionsResponseApiKey, drop bool) []kmsg.ApiVersionsResponseApiKey {
	if !drop {
		return apis
	}
	return slices.DeleteFunc(apis, func(a kmsg.ApiVersionsResponseApiKey) bool { return slices.Contains(txnKeys, a.ApiKey) })
}

// txnErrCode is the code a transaction request gets when the coordinator
// could not answer it: a producer-id allocation's *kerr.Error, else as a
// group request's.
func txnErrCode(err error) int16 {
	var kErr *kerr.Error
	if errors.As(err, &kErr) && !errors.Is(err, kerr.CoordinatorLoadInProgress) {
		return kErr.Code
	}
	return groupErrCode(err)
}

// initTransactionalProducer answers InitProducerId with a transactional
// id through the transaction coordinator.
func (s *Server) initTransactionalProducer(ctx context.Context, req *kmsg.InitProducerIDRequest) kmsg.Response {
	resp, err := s.cfg.Transactions.InitTransactionalProducer(ctx, req)
	if err != nil {
		s.rl.Log(ctx, slog.LevelWarn, "txn-init", "InitProducerId: the transaction coordinator could not answer", slog.Any("err", err))
		resp = req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = txnErrCode(err), -1, -1
	}
	return resp
}

// handleAddPartitionsToTxn answers AddPartitionsToTxn: v0–3 one
// transaction (the producer's), v4+ a batch, each VerifyOnly or not
// (KIP-890 part 1). A transaction a shard could not answer gets the
// shard's code on every partition.
func (s *Server) handleAddPartitionsToTxn(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	one := func(t *kmsg.AddPartitionsToTxnRequestTransaction) kmsg.AddPartitionsToTxnResponseTransaction {
		out, err := s.cfg.Transactions.AddPartitionsToTxn(ctx, t)
		if err != nil {
			out = kmsg.AddPartitionsToTxnResponseTransaction{TransactionalID: t.TransactionalID}
			for _, rt := range t.Topics {
				ot := kmsg.AddPartitionsToTxnResponseTransactionTopic{Topic: rt.Topic}
				for _, p := range rt.Partitions {
					ot.Partitions = append(ot.Partitions, kmsg.AddPartitionsToTxnResponseTransactionTopicPartition{Partition: p, ErrorCode: txnErrCode(err)})
				}
				out.Topics = append(out.Topics, ot)
			}
		}
		return out
	}
	if req.Version >= 4 {
		for i := range req.Transactions {
			resp.Transactions = append(resp.Transactions, one(&req.Transactions[i]))
		}
		return resp
	}
	t := kmsg.AddPartitionsToTxnRequestTransaction{TransactionalID: req.TransactionalID, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch}
	for _, rt := range req.Topics {
		t.Topics = append(t.Topics, kmsg.AddPartitionsToTxnRequestTransactionTopic{Topic: rt.Topic, Partitions: rt.Partitions})
	}
	for _, ot := range one(&t).Topics {
		rt := kmsg.AddPartitionsToTxnResponseTopic{Topic: ot.Topic}
		for _, p := range ot.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.AddPartitionsToTxnResponseTopicPartition{Partition: p.Partition, ErrorCode: p.ErrorCode})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// handleAddOffsetsToTxn answers AddOffsetsToTxn.
func (s *Server) handleAddOffsetsToTxn(ctx context.Context, req *kmsg.AddOffsetsToTxnRequest) kmsg.Response {
	resp, err := s.cfg.Transactions.AddOffsetsToTxn(ctx, req)
	if err != nil {
		resp = req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		resp.ErrorCode = txnErrCode(err)
	}
	return resp
}

// handleEndTxn answers EndTxn.
func (s *Server) handleEndTxn(ctx context.Context, req *kmsg.EndTxnRequest) kmsg.Response {
	resp, err := s.cfg.Transactions.EndTxn(ctx, req)
	if err != nil {
		resp = req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = txnErrCode(err)
	}
	return resp
}

// handleTxnOffsetCommit answers TxnOffsetCommit (sent to the group's
// coordinator, which asks the transactional id's).
func (s *Server) handleTxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) kmsg.Response {
	var (
		resp *kmsg.TxnOffsetCommitResponse
		err  error = errNoGroups
	)
	if s.cfg.Groups != nil {
		resp, err = s.cfg.Transactions.TxnOffsetCommit(ctx, req)
	}
	if err != nil {
		resp = req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, t := range req.Topics {
			rt := kmsg.TxnOffsetCommitResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.TxnOffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: txnErrCode(err)})
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	return resp
}
