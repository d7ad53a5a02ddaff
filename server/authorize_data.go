package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// The checks of the data APIs (SPEC §14, ACLs): the partitions of topics
// the principal may not touch are taken out of the request before the
// Producer or Fetcher sees it, and answered TOPIC_AUTHORIZATION_FAILED
// beside what the delegate answers for the rest; a request with nothing
// left is answered without the delegate. With no authorizer the request
// goes through untouched.

var topicAuthFailed = kerr.TopicAuthorizationFailed.Code

// topicName is the name of a topic a request names by name, or by id
// (versions with topic ids); ok is false for an id no topic has, the zero
// id included (the handler answers UNKNOWN_TOPIC_ID, as Kafka does before
// it asks the authorizer).
func (s *Server) topicName(name string, id [16]byte) (string, bool) {
	if id == ([16]byte{}) {
		return name, name != ""
	}
	t, ok := s.catalog.TopicByID(diskless.TopicID(id))
	return t.Name, ok
}

// transactionalProduce reports whether req carries a transactional
// batch (Kafka checks the first batch of each partition's records).
func transactionalProduce(req *kmsg.ProduceRequest) bool {
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if h, _, err := batch.Parse(p.Records); err == nil && h.Attributes()&batch.AttrTransactional != 0 {
				return true
			}
		}
	}
	return false
}

// authorizeProduce checks a Produce request: a transactional one needs
// WRITE on its transactional id (else resp answers every partition
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED), each partition WRITE on its
// topic. It returns the request to hand the Producer (nil: none) and the
// answers of the partitions refused.
func (s *Server) authorizeProduce(ctx context.Context, req *kmsg.ProduceRequest) (*kmsg.ProduceRequest, []kmsg.ProduceResponseTopic) {
	if s.authzOff(ctx) {
		return req, nil
	}
	refuseAll := func(code int16) []kmsg.ProduceResponseTopic {
		var out []kmsg.ProduceResponseTopic
		for _, t := range req.Topics {
			out = append(out, produceRefused(t, code))
		}
		return out
	}
	if transactionalProduce(req) {
		if req.TransactionID == nil || !s.authorized(ctx, opWrite, rtTxnID, *req.TransactionID) {
			return nil, refuseAll(kerr.TransactionalIDAuthorizationFailed.Code)
		}
	}
	return trimTopics(req, func(r *kmsg.ProduceRequest) *[]kmsg.ProduceRequestTopic { return &r.Topics },
		func(t kmsg.ProduceRequestTopic) (kmsg.ProduceResponseTopic, bool) {
			if name, ok := s.topicName(t.Topic, t.TopicID); ok && !s.authorized(ctx, opWrite, rtTopic, name) {
				return produceRefused(t, topicAuthFailed), true
			}
			return kmsg.ProduceResponseTopic{}, false
		})
}

func produceRefused(t kmsg.ProduceRequestTopic, code int16) kmsg.ProduceResponseTopic {
	rt := kmsg.NewProduceResponseTopic()
	rt.Topic, rt.TopicID = t.Topic, t.TopicID
	for _, p := range t.Partitions {
		rp := kmsg.NewProduceResponseTopicPartition()
		rp.Partition, rp.ErrorCode = p.Partition, code
		rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

// authorizeFetch checks a Fetch request: each partition of a consumer's
// fetch needs READ on its topic. It returns the request to hand the
// Fetcher (nil: none) and the answers of the partitions refused.
func (s *Server) authorizeFetch(ctx context.Context, req *kmsg.FetchRequest) (*kmsg.FetchRequest, []kmsg.FetchResponseTopic) {
	if s.authzOff(ctx) {
		return req, nil
	}
	return trimTopics(req, func(r *kmsg.FetchRequest) *[]kmsg.FetchRequestTopic { return &r.Topics },
		func(t kmsg.FetchRequestTopic) (kmsg.FetchResponseTopic, bool) {
			if name, ok := s.topicName(t.Topic, t.TopicID); !ok || s.authorized(ctx, opRead, rtTopic, name) {
				return kmsg.FetchResponseTopic{}, false
			}
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, topicAuthFailed
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			return rt, true
		})
}

// authorizeListOffsets checks a ListOffsets request: DESCRIBE on each
// partition's topic.
func (s *Server) authorizeListOffsets(ctx context.Context, req *kmsg.ListOffsetsRequest) (*kmsg.ListOffsetsRequest, []kmsg.ListOffsetsResponseTopic) {
	if s.authzOff(ctx) {
		return req, nil
	}
	return trimTopics(req, func(r *kmsg.ListOffsetsRequest) *[]kmsg.ListOffsetsRequestTopic { return &r.Topics },
		func(t kmsg.ListOffsetsRequestTopic) (kmsg.ListOffsetsResponseTopic, bool) {
			if s.authorized(ctx, opDescribe, rtTopic, t.Topic) {
				return kmsg.ListOffsetsResponseTopic{}, false
			}
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, topicAuthFailed
				rp.Timestamp, rp.Offset, rp.LeaderEpoch = -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			return rt, true
		})
}

// authorizeOffsetForLeaderEpoch checks an OffsetForLeaderEpoch request:
// DESCRIBE on each partition's topic.
func (s *Server) authorizeOffsetForLeaderEpoch(ctx context.Context, req *kmsg.OffsetForLeaderEpochRequest) (*kmsg.OffsetForLeaderEpochRequest, []kmsg.OffsetForLeaderEpochResponseTopic) {
	if s.authzOff(ctx) {
		return req, nil
	}
	return trimTopics(req, func(r *kmsg.OffsetForLeaderEpochRequest) *[]kmsg.OffsetForLeaderEpochRequestTopic { return &r.Topics },
		func(t kmsg.OffsetForLeaderEpochRequestTopic) (kmsg.OffsetForLeaderEpochResponseTopic, bool) {
			if s.authorized(ctx, opDescribe, rtTopic, t.Topic) {
				return kmsg.OffsetForLeaderEpochResponseTopic{}, false
			}
			rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, topicAuthFailed
				rp.LeaderEpoch, rp.EndOffset = -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			return rt, true
		})
}

// trimTopics splits the topics of req (the slice topics points to) by
// refuse, which returns a topic's answer and true when it is refused. It
// returns req itself when nothing is refused, nil when everything is, else
// a copy of req holding the topics kept; and the answers of the refused.
func trimTopics[Q any, T, R any](req *Q, topics func(*Q) *[]T, refuse func(T) (R, bool)) (*Q, []R) {
	var (
		kept    []T
		refused []R
	)
	for _, t := range *topics(req) {
		if r, no := refuse(t); no {
			refused = append(refused, r)
			continue
		}
		kept = append(kept, t)
	}
	switch {
	case len(refused) == 0:
		return req, nil
	case len(kept) == 0:
		return nil, refused
	}
	trimmed := *req
	*topics(&trimmed) = kept
	return &trimmed, refused
}
