package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/txn"
)

// The operators' view of transactions (kafka-transactions.sh, SPEC §15):
// DescribeTransactions and ListTransactions read the transaction
// coordinators' tables, DescribeProducers a partition's producer state and
// open transactions. The tables are read on each shard's driver (a txnOp
// writing nothing), so an answer shows only states that are durable.

// DescribeTransaction answers one transactional id of DescribeTransactions
// (SPEC §15): its producer, state, timeout, the start of its last
// transaction and the partitions of the open one, by topic name. An empty
// id is INVALID_REQUEST, one the coordinator does not hold
// TRANSACTIONAL_ID_NOT_FOUND. Errors: the shard's (as groupDo's); the
// caller answers the id with its code.
func (c *Coordinator) DescribeTransaction(ctx context.Context, id string) (kmsg.DescribeTransactionsResponseTransactionState, error) {
	out := kmsg.NewDescribeTransactionsResponseTransactionState()
	out.TransactionalID = id
	if id == "" {
		out.ErrorCode = kerr.InvalidRequest.Code
		return out, nil
	}
	var rec *txn.StateRecord
	err := c.txnDo(ctx, c.TxnShard(id), func(tc *txn.Coordinator, _ int64) ([]*txn.StateRecord, func(error)) {
		rec, _ = tc.Table().Get(id)
		return nil, nil
	})
	if err != nil {
		return out, err
	}
	if rec == nil {
		out.ErrorCode = kerr.TransactionalIDNotFound.Code
		return out, nil
	}
	out.State, out.TimeoutMillis, out.StartTimestamp = rec.State.String(), rec.TimeoutMs, rec.StartTimestamp
	out.ProducerID, out.ProducerEpoch = rec.ProducerID, rec.ProducerEpoch
	for _, t := range rec.Topics {
		ot := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
		ot.Topic, ot.Partitions = t.Name, slices.Clone(t.Partitions)
		out.Topics = append(out.Topics, ot)
	}
	return out, nil
}

// ListTransactions answers ListTransactions (v0–2, SPEC §15): every
// transactional id of the shards this sidecar hosts, by id, that passes
// the request's filters — its state among StateFilters (Kafka's state
// names, case-sensitive; a name that is none of them is listed in
// UnknownStateFilters and matches nothing), its producer id among
// ProducerIDFilters, its last transaction started more than
// DurationFilterMillis ago (≥ 0; an id with none started counts as
// started at −1 ms, as in Kafka), its id matched whole by
// TransactionalIDPattern (an RE2 expression, as Kafka's; one that does not
// compile is INVALID_REGULAR_EXPRESSION). Empty filters pass everything.
// A shard loading answers COORDINATOR_LOAD_IN_PROGRESS for the whole
// request, as Kafka does; other shard errors are returned.
func (c *Coordinator) ListTransactions(ctx context.Context, req *kmsg.ListTransactionsRequest) (*kmsg.ListTransactionsResponse, error) {
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	var states []txn.State
	for _, name := range req.StateFilters {
		st, ok := txn.StateNamed(name)
		if !ok {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
			continue
		}
		states = append(states, st)
	}
	var pattern *regexp.Regexp
	if p := req.TransactionalIDPattern; req.Version >= 2 && p != nil && *p != "" {
		var err error
		if pattern, err = regexp.Compile(`^(?:` + *p + `)$`); err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return resp, nil
		}
	}
	durationMs := int64(-1)
	if req.Version >= 1 {
		durationMs = req.DurationFilterMillis
	}
	pass := func(rec *txn.StateRecord, now int64) bool {
		switch {
		case len(req.StateFilters) > 0 && !slices.Contains(states, rec.State):
			return false
		case len(req.ProducerIDFilters) > 0 && !slices.Contains(req.ProducerIDFilters, rec.ProducerID):
			return false
		case durationMs >= 0 && now-rec.StartTimestamp <= durationMs:
			return false
		case pattern != nil && !pattern.MatchString(rec.TransactionalID):
			return false
		}
		return true
	}
	var errs []error
	for _, s := range c.shards {
		if c.clustered() && !s.hosted() || !s.holdsTxns() {
			continue
		}
		err := c.txnDo(ctx, s.id, func(tc *txn.Coordinator, now int64) ([]*txn.StateRecord, func(error)) {
			for rec := range tc.Table().All() {
				if pass(rec, now) {
					st := kmsg.NewListTransactionsResponseTransactionState()
					st.TransactionalID, st.ProducerID, st.TransactionState = rec.TransactionalID, rec.ProducerID, rec.State.String()
					resp.TransactionStates = append(resp.TransactionStates, st)
				}
			}
			return nil, nil
		})
		if errors.Is(err, diskless.ErrShardLoading) {
			resp.ErrorCode, resp.TransactionStates = kerr.CoordinatorLoadInProgress.Code, nil
			return resp, nil
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("shard %d: %w", s.id, err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	slices.SortFunc(resp.TransactionStates, func(a, b kmsg.ListTransactionsResponseTransactionState) int {
		return strings.Compare(a.TransactionalID, b.TransactionalID)
	})
	return resp, nil
}

// DescribeProducers answers one partition of DescribeProducers (SPEC
// §15): the producers whose state the partition keeps (SPEC §3; a
// marker's producer too, recordProducerMarker), by producer id — epoch,
// last sequence (−1: no batch in its epoch), the timestamp of its last
// batch or marker (its maxTimestamp, the log-append time with
// LogAppendTime: producerState.lastTimestamp), and the first offset of its open transaction in the partition
// (−1: none), and the coordinator epoch of its last marker in the
// partition (−1: none kept — no marker, or one of before the epoch was
// recorded), as Kafka reports them. Errors as the partition's code:
// UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR from a failed shard.
func (c *Coordinator) DescribeProducers(tp diskless.TopicPartition) ([]kmsg.DescribeProducersResponseTopicPartitionActiveProducer, *kerr.Error) {
	s, p, err := c.lookup(c.catalog.Load(), tp.TopicID, tp.Partition)
	defer s.unlock()
	if err != nil {
		return nil, err
	}
	out := make([]kmsg.DescribeProducersResponseTopicPartitionActiveProducer, 0, len(p.producers))
	for id, ps := range p.producers {
		ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
		ap.ProducerID, ap.ProducerEpoch, ap.LastSequence, ap.LastTimestamp = id, int32(ps.epoch), ps.lastSeq(), ps.lastTimestamp
		ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = p.coordinatorEpoch(id), -1
		if p.txns != nil {
			if first, ok := p.txns.open[id]; ok {
				ap.CurrentTxnStartOffset = first
			}
		}
		out = append(out, ap)
	}
	slices.SortFunc(out, func(a, b kmsg.DescribeProducersResponseTopicPartitionActiveProducer) int {
		return cmp.Compare(a.ProducerID, b.ProducerID)
	})
	return out, nil
}

// WriteTxnMarkers writes producer (producerID, epoch)'s COMMIT (commit) or
// ABORT marker into parts through the marker writer (SetMarkerWriter), as
// a transaction's completion does, and returns once they are committed:
// WriteTxnMarkers from an operator's kafka-transactions.sh abort, which
// ends a transaction open in a partition whatever the transaction
// coordinator holds (a marker for a producer with no open transaction in
// a partition changes nothing there). Its markers carry no token (0: the
// partitions' transaction guards are left as they are) and the request's
// coordinator epoch coordEpoch, which a partition refuses when it is below
// the producer's last marker's there (TRANSACTION_COORDINATOR_FENCED, as
// Kafka), as it refuses a marker of an older producer epoch than the
// producer's there (INVALID_PRODUCER_EPOCH). Errors: the writer's — a
// diskless.MarkerErrors naming the partitions that refused theirs, the
// others' written —; COORDINATOR_NOT_AVAILABLE without a writer.
func (c *Coordinator) WriteTxnMarkers(ctx context.Context, producerID int64, epoch int16, coordEpoch int32, commit bool, parts []diskless.TopicPartition) error {
	box := c.markers.Load()
	if box == nil {
		return kerr.CoordinatorNotAvailable
	}
	return box.w.WriteMarkers(ctx, producerID, epoch, 0, coordEpoch, commit, parts)
}
