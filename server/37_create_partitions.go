package server

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// createPartitionsVersions: CreatePartitions 0–3, all of kmsg's versions
// (Kafka 4.x serves them all).
var createPartitionsVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 37, MinVersion: 0, MaxVersion: 3}

// handleCreatePartitions answers CreatePartitions (SPEC §6), per topic in
// request order: the topic grows to Count partitions (nothing with
// ValidateOnly). A topic named twice gets INVALID_REQUEST "Duplicate topic
// name." at each occurrence; an unknown one UNKNOWN_TOPIC_OR_PARTITION; a
// count that is not an increase INVALID_PARTITIONS with Kafka's message
// (observed). Replica assignments get Kafka's shape checks with its
// INVALID_REPLICA_ASSIGNMENT messages (observed, SPEC §6): one per new
// partition, none empty, no broker twice, all of one width; like
// CreateTopics' they are otherwise not used — broker ids are not checked
// and any width is taken (every sidecar serves every partition, and the
// replication factor asked at creation is not kept). TimeoutMillis > 0
// bounds the call.
func (s *Server) handleCreatePartitions(ctx context.Context, req *kmsg.CreatePartitionsRequest) kmsg.Response {
	if fwd, ok := s.forwardAdmin(ctx, req); ok {
		return fwd // the catalog is written at the controller
	}
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	ctx, cancel := withRequestTimeout(ctx, req.TimeoutMillis)
	defer cancel()
	count := make(map[string]int, len(req.Topics))
	for _, t := range req.Topics {
		count[t.Topic]++
	}
	for _, rt := range req.Topics {
		out := kmsg.NewCreatePartitionsResponseTopic()
		out.Topic = rt.Topic
		fail := func(code int16, msg string) {
			out.ErrorCode, out.ErrorMessage = code, kmsg.StringPtr(msg)
		}
		t, ok := s.catalog.Topic(rt.Topic)
		switch {
		case count[rt.Topic] > 1:
			fail(kerr.InvalidRequest.Code, "Duplicate topic name.")
		case !ok:
			fail(kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("The topic '%s' does not exist.", rt.Topic))
		case rt.Assignment != nil && len(rt.Assignment) != int(rt.Count-t.Partitions):
			fail(kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("Attempted to add %d additional partition(s), but only %d assignment(s) were specified.",
				rt.Count-t.Partitions, len(rt.Assignment)))
		case rt.Assignment != nil && rt.Count > t.Partitions && assignmentError(rt.Assignment) != "":
			fail(kerr.InvalidReplicaAssignment.Code, assignmentError(rt.Assignment))
		default:
			if _, err := s.catalog.CreatePartitions(ctx, t.ID, rt.Count, req.ValidateOnly); err != nil {
				code, msg := s.adminErrorCode("create partitions", rt.Topic, err)
				fail(code, msg)
			} else if !req.ValidateOnly {
				s.log.Info("created partitions", "topic", rt.Topic, "partitions", rt.Count)
			}
		}
		resp.Topics = append(resp.Topics, out)
	}
	return resp
}

// assignmentError returns Kafka's INVALID_REPLICA_ASSIGNMENT message for
// the first assignment of new partitions that is empty or names a broker
// twice (Kafka 4.4's messages, observed; SPEC §6), or that differs in
// width from the first (Kafka compares with the existing partitions'
// replication factor, which the sidecar does not keep), or "" when there
// is none.
func assignmentError(as []kmsg.CreatePartitionsRequestTopicAssignment) string {
	width := len(as[0].Replicas)
	for _, a := range as {
		if len(a.Replicas) == 0 {
			return "The manual partition assignment includes an empty replica list."
		}
		for i, r := range a.Replicas {
			for _, before := range a.Replicas[:i] {
				if r == before {
					return fmt.Sprintf("The manual partition assignment includes the broker %d more than once.", r)
				}
			}
		}
		if len(a.Replicas) != width {
			return fmt.Sprintf("The manual partition assignment includes a partition with %d replica(s), but the first new partition has %d.",
				len(a.Replicas), width)
		}
	}
	return ""
}
