package server

import (
	"context"
	"errors"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// handleWriteTxnMarkers answers WriteTxnMarkers (SPEC §15), the request a
// transaction coordinator sends partition leaders and
// kafka-transactions.sh abort sends to end a hanging transaction: each
// marker is written into its partitions through Transactions.WriteTxnMarkers
// (the produce pipeline, as a completion's). A topic or partition the
// catalog does not hold gets UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers;
// a partition whose producer state holds the producer at a newer epoch than
// the marker's gets INVALID_PRODUCER_EPOCH and no marker, one whose
// producer's last marker carried a larger coordinator epoch than the
// request's TRANSACTION_COORDINATOR_FENCED and no marker, as Kafka's
// leader answers (staleMarker; the partition's shard refuses both when it
// commits too, should a batch or marker have come between: that
// partition alone then gets its shard's error, the others' markers
// written — diskless.MarkerErrors); markers that could not be written at
// all get the error's code on each of their other partitions (ctx's:
// REQUEST_TIMED_OUT; another: KAFKA_STORAGE_ERROR).
func (s *Server) handleWriteTxnMarkers(ctx context.Context, req *kmsg.WriteTxnMarkersRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, m := range req.Markers {
		out := kmsg.NewWriteTxnMarkersResponseMarker()
		out.ProducerID = m.ProducerID
		var parts []diskless.TopicPartition
		codes := make([][]int16, len(m.Topics))
		ids := make([]diskless.TopicID, len(m.Topics))
		for i, rt := range m.Topics {
			t, ok := s.catalog.Topic(rt.Topic)
			ids[i] = t.ID
			codes[i] = make([]int16, len(rt.Partitions))
			for j, p := range rt.Partitions {
				if !ok || p < 0 || p >= t.Partitions {
					codes[i][j] = kerr.UnknownTopicOrPartition.Code
					continue
				}
				tp := diskless.TopicPartition{TopicID: t.ID, Partition: p}
				if code := s.staleMarker(tp, m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch); code != 0 {
					codes[i][j] = code
					continue
				}
				parts = append(parts, tp)
			}
		}
		var (
			code    int16
			refused diskless.MarkerErrors
		)
		if len(parts) > 0 {
			err := s.cfg.Transactions.WriteTxnMarkers(ctx, m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Committed, parts)
			var kErr *kerr.Error
			switch {
			case err == nil:
			case errors.As(err, &refused):
				// Refused by some partitions' commits, the others'
				// markers written: each its own answer.
			case errors.As(err, &kErr):
				code = kErr.Code
			case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
				code = kerr.RequestTimedOut.Code
			default:
				s.rl.Log(ctx, slog.LevelWarn, "txn-markers", "WriteTxnMarkers: the markers could not be written", slog.Any("err", err))
				code = kerr.KafkaStorageError.Code
			}
		}
		for i, rt := range m.Topics {
			ot := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			ot.Topic = rt.Topic
			for j, p := range rt.Partitions {
				op := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				op.Partition, op.ErrorCode = p, codes[i][j]
				if op.ErrorCode == 0 {
					op.ErrorCode = code
					if e := refused[diskless.TopicPartition{TopicID: ids[i], Partition: p}]; e != nil {
						op.ErrorCode = e.Code
					}
				}
				ot.Partitions = append(ot.Partitions, op)
			}
			out.Topics = append(out.Topics, ot)
		}
		resp.Markers = append(resp.Markers, out)
	}
	return resp
}

// staleMarker returns the error Kafka's leader answers a marker of
// producer (pid, epoch) and coordinator epoch coordEpoch in partition tp
// (SPEC §15), checked in its order, or 0: INVALID_PRODUCER_EPOCH when the
// producer state holds the producer at a newer epoch,
// TRANSACTION_COORDINATOR_FENCED when its last marker carried a larger
// coordinator epoch. The state is the one DescribeProducers shows, which
// the producer's markers update too (SPEC §15 Decision); the partition's
// shard checks both again when it commits the marker.
func (s *Server) staleMarker(tp diskless.TopicPartition, pid int64, epoch int16, coordEpoch int32) int16 {
	ps, err := s.cfg.Transactions.DescribeProducers(tp)
	if err != nil {
		return 0 // the write answers for the partition
	}
	for _, p := range ps {
		if p.ProducerID != pid {
			continue
		}
		switch {
		case p.ProducerEpoch > int32(epoch):
			return kerr.InvalidProducerEpoch.Code
		case p.CoordinatorEpoch > coordEpoch:
			return kerr.TransactionCoordinatorFenced.Code
		}
	}
	return 0
}
