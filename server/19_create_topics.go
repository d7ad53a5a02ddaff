package server

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/topicconfig"
)

// createdReplicationFactor is the replication factor CreateTopics v5+
// reports: the number of replicas Metadata lists for every partition (this
// sidecar). Whatever factor was asked for (any ≥ 1, or −1; SPEC §6
// Decision), durability comes from object storage, and reporting what
// Metadata will show keeps create and describe consistent for tools that
// compare them.
const createdReplicationFactor int16 = 1

// createTopicsVersions: CreateTopics 0–7, all of kmsg's versions; v7
// returns topic ids.
var createTopicsVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 19, MinVersion: 0, MaxVersion: 7}

// handleCreateTopics answers CreateTopics (SPEC §6), topic by topic, in
// request order; each name is answered once.
//
//   - A name given more than once: INVALID_REQUEST for that name (as KRaft
//     Kafka does), nothing created.
//   - An illegal name: INVALID_TOPIC_EXCEPTION; an existing one:
//     TOPIC_ALREADY_EXISTS.
//   - NumPartitions −1 takes num.partitions; 0 or < −1: INVALID_PARTITIONS.
//   - ReplicationFactor −1 or any ≥ 1 is accepted; 0 or < −1:
//     INVALID_REPLICATION_FACTOR.
//   - A manual replica assignment is accepted, as Kafka tooling
//     (kafka-topics.sh --replica-assignment, reassignment-driven operators)
//     expects: it sets the partition count; the broker ids are not checked
//     (every sidecar serves every partition). Its shape is checked as Kafka
//     does: NumPartitions and ReplicationFactor must both be −1
//     (INVALID_REQUEST), and partitions must be 0…n−1 each once, with
//     non-empty replica lists of one length without duplicates
//     (INVALID_REPLICA_ASSIGNMENT).
//   - Configs are validated (INVALID_CONFIG with the reason; a null value is
//     refused) and passed to the catalog as given.
//   - ValidateOnly (v1+) validates everything and creates nothing.
//   - TimeoutMillis > 0 bounds the creation: REQUEST_TIMED_OUT past it.
//
// v5+ answers carry the partition count, createdReplicationFactor and the
// topic's configs (topicConfigEntries); v7+ the topic id (zero for
// ValidateOnly).
func (s *Server) handleCreateTopics(ctx context.Context, req *kmsg.CreateTopicsRequest) kmsg.Response {
	if fwd, ok := s.forwardAdmin(ctx, req); ok {
		return fwd // the catalog is written at the controller
	}
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	ctx, cancel := withRequestTimeout(ctx, req.TimeoutMillis)
	defer cancel()
	count := make(map[string]int, len(req.Topics))
	for i := range req.Topics {
		count[req.Topics[i].Topic]++
	}
	answered := make(map[string]bool, len(req.Topics))
	for i := range req.Topics {
		t := &req.Topics[i]
		if answered[t.Topic] {
			continue
		}
		answered[t.Topic] = true
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		if count[t.Topic] > 1 {
			setCreateError(&rt, kerr.InvalidRequest.Code, "topic %q appears more than once in the request", t.Topic)
		} else {
			s.createTopic(ctx, req.ValidateOnly, t, &rt)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// createTopic validates and (unless validateOnly) creates one topic,
// filling rt.
func (s *Server) createTopic(ctx context.Context, validateOnly bool, t *kmsg.CreateTopicsRequestTopic, rt *kmsg.CreateTopicsResponseTopic) {
	if err := topicconfig.ValidateName(t.Topic); err != nil {
		setCreateError(rt, kerr.InvalidTopicException.Code, "%s", err)
		return
	}
	if _, exists := s.catalog.Topic(t.Topic); exists {
		setCreateError(rt, kerr.TopicAlreadyExists.Code, "topic %q already exists", t.Topic)
		return
	}
	partitions, code, msg := s.createPartitions(t)
	if code != 0 {
		setCreateError(rt, code, "%s", msg)
		return
	}
	configs := make(map[string]string, len(t.Configs))
	for _, c := range t.Configs {
		if c.Value == nil {
			setCreateError(rt, kerr.InvalidConfig.Code, "topic config %s has a null value", c.Name)
			return
		}
		configs[c.Name] = *c.Value
	}
	parsed, err := topicconfig.Parse(configs)
	if err != nil {
		code, msg := s.createErrorCode(t.Topic, err)
		setCreateError(rt, code, "%s", msg)
		return
	}

	if validateOnly {
		fillCreated(rt, partitions, parsed)
		return
	}
	created, err := s.catalog.CreateTopic(ctx, t.Topic, partitions, configs)
	if err != nil {
		code, msg := s.createErrorCode(t.Topic, err)
		setCreateError(rt, code, "%s", msg)
		return
	}
	s.log.Info("created topic", "topic", created.Name, "partitions", created.Partitions, "topic_id", created.ID.String())
	rt.TopicID = created.ID
	fillCreated(rt, created.Partitions, created.Config)
}

// createPartitions returns the partition count a topic entry asks for, or
// the error code and message refusing it.
func (s *Server) createPartitions(t *kmsg.CreateTopicsRequestTopic) (int32, int16, string) {
	if len(t.ReplicaAssignment) == 0 {
		switch {
		case t.NumPartitions == -1:
		case t.NumPartitions <= 0:
			return 0, kerr.InvalidPartitions.Code, fmt.Sprintf("number of partitions must be ≥ 1, or −1 for the default; got %d", t.NumPartitions)
		}
		if t.ReplicationFactor == 0 || t.ReplicationFactor < -1 {
			return 0, kerr.InvalidReplicationFactor.Code, fmt.Sprintf("replication factor must be ≥ 1, or −1 for the default; got %d", t.ReplicationFactor)
		}
		if t.NumPartitions == -1 {
			return s.cfg.NumPartitions, 0, ""
		}
		return t.NumPartitions, 0, ""
	}

	if t.NumPartitions != -1 || t.ReplicationFactor != -1 {
		return 0, kerr.InvalidRequest.Code, "a replica assignment requires numPartitions and replicationFactor to be −1"
	}
	n := len(t.ReplicaAssignment)
	seen := make([]bool, n)
	width := len(t.ReplicaAssignment[0].Replicas)
	for _, a := range t.ReplicaAssignment {
		if a.Partition < 0 || int(a.Partition) >= n || seen[a.Partition] {
			return 0, kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("partitions of a replica assignment must be 0…%d, each once; got %d", n-1, a.Partition)
		}
		seen[a.Partition] = true
		if len(a.Replicas) == 0 {
			return 0, kerr.InvalidReplicaAssignment.Code, "The manual partition assignment includes an empty replica list." // Kafka 4.4's
		}
		if len(a.Replicas) != width {
			return 0, kerr.InvalidReplicaAssignment.Code, "every partition of a replica assignment needs the same number of replicas"
		}
		replicas := make(map[int32]bool, len(a.Replicas))
		for _, r := range a.Replicas {
			if replicas[r] {
				return 0, kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("The manual partition assignment includes the broker %d more than once.", r) // Kafka 4.4's
			}
			replicas[r] = true
		}
	}
	return int32(n), 0, ""
}

// setCreateError records a refused topic.
func setCreateError(rt *kmsg.CreateTopicsResponseTopic, code int16, format string, args ...any) {
	rt.ErrorCode = code
	rt.ErrorMessage = kmsg.StringPtr(fmt.Sprintf(format, args...))
}

// fillCreated sets the v5+ description of a created (or validated) topic.
func fillCreated(rt *kmsg.CreateTopicsResponseTopic, partitions int32, cfg topicconfig.Config) {
	rt.NumPartitions = partitions
	rt.ReplicationFactor = createdReplicationFactor
	rt.Configs = topicConfigEntries(cfg)
}
