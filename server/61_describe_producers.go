package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// handleDescribeProducers answers DescribeProducers (SPEC §15): per
// partition, the producers its state holds (Transactions.DescribeProducers);
// a topic or partition the catalog does not hold gets
// UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers.
func (s *Server) handleDescribeProducers(ctx context.Context, req *kmsg.DescribeProducersRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		ot := kmsg.NewDescribeProducersResponseTopic()
		ot.Topic = rt.Topic
		t, ok := s.catalog.Topic(rt.Topic)
		for _, p := range rt.Partitions {
			op := kmsg.NewDescribeProducersResponseTopicPartition()
			op.Partition = p
			if !ok || p < 0 || p >= t.Partitions {
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else if aps, errc := s.cfg.Transactions.DescribeProducers(diskless.TopicPartition{TopicID: t.ID, Partition: p}); errc != nil {
				op.ErrorCode = errc.Code
			} else {
				op.ActiveProducers = aps
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp
}
