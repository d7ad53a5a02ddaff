package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/acl"
	"github.com/diskless-sidecar/sidecar/internal/topicconfig"
)

// Without an authorizer Kafka reports every operation a resource type
// supports as authorized (KIP-430); with one, those the principal may do
// (authorizedOps).
const (
	topicAuthorizedOps = 1<<kmsg.ACLOperationRead | 1<<kmsg.ACLOperationWrite | 1<<kmsg.ACLOperationCreate |
		1<<kmsg.ACLOperationDelete | 1<<kmsg.ACLOperationAlter | 1<<kmsg.ACLOperationDescribe |
		1<<kmsg.ACLOperationDescribeConfigs | 1<<kmsg.ACLOperationAlterConfigs
	clusterAuthorizedOps = 1<<kmsg.ACLOperationCreate | 1<<kmsg.ACLOperationAlter | 1<<kmsg.ACLOperationDescribe |
		1<<kmsg.ACLOperationClusterAction | 1<<kmsg.ACLOperationDescribeConfigs |
		1<<kmsg.ACLOperationAlterConfigs | 1<<kmsg.ACLOperationIdempotentWrite
)

// metadataVersions: Metadata 0–12. v10+ carry topic ids and v12 accepts
// ids in requests; v13 adds a top-level error for KIP-1102 rebootstrap,
// not implemented.
var metadataVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 3, MinVersion: 0, MaxVersion: 12}

// handleMetadata answers Metadata (SPEC §6). The one broker is this sidecar
// (advertised host and port, no rack) and also the controller; every
// partition is led by it with leader epoch 0, and it is the only replica and
// in-sync replica.
//
// Topics: a null list (v1+) or an empty one (v0) means all topics; an empty
// one (v1+) none. Each requested name is answered once, in request order.
// An unknown name is auto-created with NumPartitions and default configs
// when auto.create.topics.enable is set and, from v4, the request allows it;
// the creation is synchronous, so the new topic is returned with NONE.
// Otherwise: UNKNOWN_TOPIC_OR_PARTITION, or INVALID_TOPIC_EXCEPTION for an
// illegal name. Topics requested by id (v10+) that do not exist get
// UNKNOWN_TOPIC_ID.
func (s *Server) handleMetadata(ctx context.Context, req *kmsg.MetadataRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	sidecars := s.sidecars(ctx)
	for _, sc := range sidecars {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = sc.NodeID, sc.Host, sc.Port
		if sc.Rack != "" {
			b.Rack = kmsg.StringPtr(sc.Rack)
		}
		resp.Brokers = append(resp.Brokers, b)
	}
	l := newLeaders(sidecars, s.zoneOf(clientOf(ctx)))
	resp.ClusterID = kmsg.StringPtr(s.cfg.ClusterID)
	resp.ControllerID = s.controllerAmong(sidecars)
	if req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = s.authorizedOps(ctx, clusterAuthorizedOps, rtCluster, acl.ClusterName)
	}

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range s.catalog.Topics() {
			if s.authorized(ctx, opDescribe, rtTopic, t.Name) { // the others are left out
				resp.Topics = append(resp.Topics, s.metadataTopic(ctx, req, t, l))
			}
		}
		if mt, ok := s.offsetsTopicMetadata(ctx, req, l); ok && s.authorized(ctx, opDescribe, rtTopic, offsetsTopic) {
			resp.Topics = append(resp.Topics, mt)
		}
		return resp
	}

	autoCreate := s.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	seenNames := make(map[string]bool, len(req.Topics))
	seenIDs := make(map[diskless.TopicID]bool)
	for _, rt := range req.Topics {
		id := diskless.TopicID(rt.TopicID)
		switch {
		case rt.Topic != nil:
			name := *rt.Topic
			if seenNames[name] {
				continue
			}
			seenNames[name] = true
			resp.Topics = append(resp.Topics, s.metadataByName(ctx, req, name, autoCreate, l))
		case id != diskless.TopicID{}:
			if seenIDs[id] {
				continue
			}
			seenIDs[id] = true
			mt := kmsg.NewMetadataResponseTopic()
			if t, ok := s.catalog.TopicByID(id); ok {
				if !s.authorized(ctx, opDescribe, rtTopic, t.Name) {
					mt.ErrorCode, mt.TopicID = topicAuthFailed, rt.TopicID
					resp.Topics = append(resp.Topics, mt)
					continue
				}
				resp.Topics = append(resp.Topics, s.metadataTopic(ctx, req, t, l))
				continue
			}
			mt.ErrorCode = kerr.UnknownTopicID.Code
			mt.TopicID = rt.TopicID
			resp.Topics = append(resp.Topics, mt)
		default:
			// Neither a name nor an id: Kafka skips such entries.
		}
	}
	return resp
}

// metadataByName answers one topic requested by name, creating it if
// allowed.
//
// With an authorizer a topic the principal may not DESCRIBE is answered
// TOPIC_AUTHORIZATION_FAILED whether or not it exists, and one that does
// not exist is created only with CREATE on the cluster or on the topic
// (else TOPIC_AUTHORIZATION_FAILED; SPEC §14, ACLs).
func (s *Server) metadataByName(ctx context.Context, req *kmsg.MetadataRequest, name string, autoCreate bool, l leaders) kmsg.MetadataResponseTopic {
	if !s.authorized(ctx, opDescribe, rtTopic, name) {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.ErrorCode = kmsg.StringPtr(name), topicAuthFailed
		return mt
	}
	if t, ok := s.catalog.Topic(name); ok {
		return s.metadataTopic(ctx, req, t, l)
	}
	if name == offsetsTopic && s.cfg.Groups != nil {
		// Internal: never auto-created (SPEC §6, Metadata).
		mt, ok := s.offsetsTopicMetadata(ctx, req, l)
		if !ok {
			mt = kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.ErrorCode = kmsg.StringPtr(name), kerr.UnknownTopicOrPartition.Code
		}
		return mt
	}
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(name)
	if topicconfig.ValidateName(name) != nil {
		mt.ErrorCode = kerr.InvalidTopicException.Code
		return mt
	}
	if !autoCreate {
		mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		return mt
	}
	if !s.authorizedCluster(ctx, opCreate) && !s.authorized(ctx, opCreate, rtTopic, name) {
		mt.ErrorCode = topicAuthFailed
		return mt
	}
	if c := s.cfg.Controller; c != nil && !c.Local() {
		// The controller creates it; this sidecar's replica of the
		// catalog has it a moment later, and the client asks again on
		// LEADER_NOT_AVAILABLE, as after Kafka's asynchronous creation.
		if s.forwardAutoCreate(ctx, name) {
			if t, ok := s.catalog.Topic(name); ok {
				return s.metadataTopic(ctx, req, t, l)
			}
		}
		mt.ErrorCode = kerr.LeaderNotAvailable.Code
		return mt
	}
	t, err := s.catalog.CreateTopic(ctx, name, s.cfg.NumPartitions, nil)
	created := err == nil
	if hasCode(err, kerr.TopicAlreadyExists) {
		// Lost a race with another creation of the same topic: that is
		// success for an auto-create.
		var ok bool
		if t, ok = s.catalog.Topic(name); ok {
			err = nil
		}
	}
	if err != nil {
		code, _ := s.createErrorCode(name, err)
		if code == kerr.UnknownServerError.Code || code == kerr.RequestTimedOut.Code || code == kerr.TopicAlreadyExists.Code {
			// Transient as far as the client is concerned: it retries
			// Metadata on LEADER_NOT_AVAILABLE, as after Kafka's
			// asynchronous auto-creation.
			code = kerr.LeaderNotAvailable.Code
		}
		mt.ErrorCode = code
		return mt
	}
	if created {
		s.log.Info("auto-created topic", "topic", name, "partitions", t.Partitions, "topic_id", t.ID.String())
	}
	return s.metadataTopic(ctx, req, t, l)
}

// metadataTopic describes an existing topic, each partition led by the
// sidecar l chooses for it.
func (s *Server) metadataTopic(ctx context.Context, req *kmsg.MetadataRequest, t diskless.Topic, l leaders) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(t.Name)
	mt.TopicID = t.ID
	if req.IncludeTopicAuthorizedOperations {
		mt.AuthorizedOperations = s.authorizedOps(ctx, topicAuthorizedOps, rtTopic, t.Name)
	}
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, max(t.Partitions, 0))
	for i := range mt.Partitions {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition = int32(i)
		p.Leader = l.of(t.ID, int32(i))
		p.LeaderEpoch = 0
		node := []int32{p.Leader}
		p.Replicas = node
		p.ISR = node
		p.OfflineReplicas = []int32{}
		mt.Partitions[i] = p
	}
	return mt
}
