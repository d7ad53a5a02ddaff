package server

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/rpcmsg"
)

// gate applies Kafka's checks of one request (SPEC §14, ACLs) before its
// handler runs, for the APIs whose handler does not check itself (Produce,
// Fetch, ListOffsets, OffsetForLeaderEpoch, Metadata and the ACL APIs
// do). It returns the request to hand the handler — req, or a copy
// without what the principal may not touch — and a func that adds the
// answers of what was refused to the handler's response; or, when the
// whole request is refused, its answer alone (resp non-nil). Nothing
// refused reaches a handler, so nothing refused changes.
func (s *Server) gate(ctx context.Context, req kmsg.Request) (handle kmsg.Request, merge func(kmsg.Response) kmsg.Response, resp kmsg.Response) {
	if s.authzOff(ctx) {
		return req, nil, nil
	}
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		if s.authorizedCluster(ctx, opCreate) {
			return req, nil, nil // CREATE on the cluster: every topic
		}
		var refused []kmsg.CreateTopicsResponseTopic
		trimmed := *r
		trimmed.Topics = slices.DeleteFunc(slices.Clone(r.Topics), func(t kmsg.CreateTopicsRequestTopic) bool {
			if s.authorized(ctx, opCreate, rtTopic, t.Topic) {
				return false
			}
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, topicAuthFailed, kmsg.StringPtr(topicAuthMsg)
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
			refused = append(refused, rt)
			return true
		})
		return &trimmed, func(resp kmsg.Response) kmsg.Response {
			resp.(*kmsg.CreateTopicsResponse).Topics = append(resp.(*kmsg.CreateTopicsResponse).Topics, refused...)
			return resp
		}, nil
	case *kmsg.DeleteTopicsRequest:
		var refused []kmsg.DeleteTopicsResponseTopic
		trimmed := *r
		if r.Version >= 6 {
			trimmed.Topics = slices.DeleteFunc(slices.Clone(r.Topics), func(t kmsg.DeleteTopicsRequestTopic) bool {
				name := ""
				if t.Topic != nil {
					name = *t.Topic
				}
				name, ok := s.topicName(name, t.TopicID)
				if !ok || s.authorized(ctx, opDelete, rtTopic, name) {
					return false
				}
				rt := kmsg.NewDeleteTopicsResponseTopic()
				rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, topicAuthFailed
				refused = append(refused, rt)
				return true
			})
		} else {
			trimmed.TopicNames = slices.DeleteFunc(slices.Clone(r.TopicNames), func(n string) bool {
				if s.authorized(ctx, opDelete, rtTopic, n) {
					return false
				}
				rt := kmsg.NewDeleteTopicsResponseTopic()
				rt.Topic, rt.ErrorCode = kmsg.StringPtr(n), topicAuthFailed
				refused = append(refused, rt)
				return true
			})
		}
		return &trimmed, func(resp kmsg.Response) kmsg.Response {
			resp.(*kmsg.DeleteTopicsResponse).Topics = append(resp.(*kmsg.DeleteTopicsResponse).Topics, refused...)
			return resp
		}, nil
	case *kmsg.CreatePartitionsRequest:
		var refused []kmsg.CreatePartitionsResponseTopic
		trimmed := *r
		trimmed.Topics = slices.DeleteFunc(slices.Clone(r.Topics), func(t kmsg.CreatePartitionsRequestTopic) bool {
			if s.authorized(ctx, opAlter, rtTopic, t.Topic) {
				return false
			}
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, topicAuthFailed, kmsg.StringPtr(topicAuthMsg)
			refused = append(refused, rt)
			return true
		})
		return &trimmed, func(resp kmsg.Response) kmsg.Response {
			resp.(*kmsg.CreatePartitionsResponse).Topics = append(resp.(*kmsg.CreatePartitionsResponse).Topics, refused...)
			return resp
		}, nil
	case *kmsg.DeleteRecordsRequest:
		var refused []kmsg.DeleteRecordsResponseTopic
		trimmed := *r
		trimmed.Topics = slices.DeleteFunc(slices.Clone(r.Topics), func(t kmsg.DeleteRecordsRequestTopic) bool {
			if s.authorized(ctx, opDelete, rtTopic, t.Topic) {
				return false
			}
			rt := kmsg.NewDeleteRecordsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDeleteRecordsResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.LowWatermark = p.Partition, topicAuthFailed, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			refused = append(refused, rt)
			return true
		})
		return &trimmed, func(resp kmsg.Response) kmsg.Response {
			resp.(*kmsg.DeleteRecordsResponse).Topics = append(resp.(*kmsg.DeleteRecordsResponse).Topics, refused...)
			return resp
		}, nil
	case *kmsg.DescribeConfigsRequest:
		var refused []kmsg.DescribeConfigsResponseResource
		trimmed := *r
		trimmed.Resources = slices.DeleteFunc(slices.Clone(r.Resources), func(rr kmsg.DescribeConfigsRequestResource) bool {
			code, ok := s.configAllowed(ctx, opDescribeConfigs, rr.ResourceType, rr.ResourceName)
			if ok {
				return false
			}
			out := kmsg.NewDescribeConfigsResponseResource()
			out.ResourceType, out.ResourceName, out.ErrorCode = rr.ResourceType, rr.ResourceName, code
			refused = append(refused, out)
			return true
		})
		return &trimmed, func(resp kmsg.Response) kmsg.Response {
			resp.(*kmsg.DescribeConfigsResponse).Resources = append(resp.(*kmsg.DescribeConfigsResponse).Resources, refused...)
			return resp
		}, nil
	case *kmsg.AlterConfigsRequest:
		var refused []kmsg.AlterConfigsResponseResource
		trimmed := *r
		trimmed.Resources = slices.DeleteFunc(slices.Clone(r.Resources), func(rr kmsg.AlterConfigsRequestResource) bool {
			code, ok := s.configAllowed(ctx, opAlterConfigs, rr.ResourceType, rr.ResourceName)
			if ok {
				return false
			}
			out := kmsg.NewAlterConfigsResponseResource()
			out.ResourceType, out.ResourceName, out.ErrorCode = rr.ResourceType, rr.ResourceName, code
			refused = append(refused, out)
			return true
		})
		return &trimmed, func(resp kmsg.Response) kmsg.Response {
			resp.(*kmsg.AlterConfigsResponse).Resources = append(resp.(*kmsg.AlterConfigsResponse).Resources, refused...)
			return resp
		}, nil
	case *kmsg.IncrementalAlterConfigsRequest:
		var refused []kmsg.IncrementalAlterConfigsResponseResource
		trimmed := *r
		trimmed.Resources = slices.DeleteFunc(slices.Clone(r.Resources), func(rr kmsg.IncrementalAlterConfigsRequestResource) bool {
			code, ok := s.configAllowed(ctx, opAlterConfigs, rr.ResourceType, rr.ResourceName)
			if ok {
				return false
			}
			out := kmsg.NewIncrementalAlterConfigsResponseResource()
			out.ResourceType, out.ResourceName, out.ErrorCode = rr.ResourceType, rr.ResourceName, code
			refused = append(refused, out)
			return true
		})
		return &trimmed, func(resp kmsg.Response) kmsg.Response {
			resp.(*kmsg.IncrementalAlterConfigsResponse).Resources = append(resp.(*kmsg.IncrementalAlterConfigsResponse).Resources, refused...)
			return resp
		}, nil
	case *kmsg.EnvelopeRequest:
		// From another sidecar: its principal needs CLUSTER_ACTION, as
		// Kafka's controller requires of a forwarding broker; the
		// request inside is checked as its client's (handleEnvelope).
		if !s.authorizedCluster(ctx, kmsg.ACLOperationClusterAction) {
			out := r.ResponseKind().(*kmsg.EnvelopeResponse)
			out.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return nil, nil, out
		}
	case *kmsg.DescribeLogDirsRequest:
		if !s.authorizedCluster(ctx, opDescribe) {
			out := r.ResponseKind().(*kmsg.DescribeLogDirsResponse)
			out.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return nil, nil, out
		}
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		if !s.authorizedCluster(ctx, opDescribe) {
			out := r.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
			out.ErrorCode, out.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, kmsg.StringPtr("")
			return nil, nil, out
		}
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		if !s.authorizedCluster(ctx, opAlter) {
			out := notController(r).(*kmsg.AlterUserSCRAMCredentialsResponse)
			for i := range out.Results {
				out.Results[i].ErrorCode, out.Results[i].ErrorMessage = kerr.ClusterAuthorizationFailed.Code, nil
			}
			return nil, nil, out
		}
	case *kmsg.DescribeClientQuotasRequest:
		if !s.authorizedCluster(ctx, opDescribeConfigs) {
			out := r.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
			out.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return nil, nil, out
		}
	case *kmsg.InitProducerIDRequest:
		out := r.ResponseKind().(*kmsg.InitProducerIDResponse)
		out.ProducerID, out.ProducerEpoch = -1, -1
		if r.TransactionalID != nil {
			if *r.TransactionalID != "" && !s.authorized(ctx, opWrite, rtTxnID, *r.TransactionalID) {
				out.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
				return nil, nil, out
			}
		} else if !s.authorizedCluster(ctx, opIdempotentWrite) &&
			!s.cfg.Authorizer.AuthorizeByResourceType(aclRequest(ctx), opWrite, rtTopic) {
			out.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return nil, nil, out
		}
	default:
		if req.Key() >= rpcmsg.MinKey {
			if !s.authorizedCluster(ctx, kmsg.ACLOperationClusterAction) {
				return nil, nil, rpcRefused(req)
			}
			return req, nil, nil
		}
		return s.gateGroups(ctx, req)
	}
	return req, nil, nil
}

// rpcRefused is the answer to a coordinator RPC (SPEC §9) from a principal
// without CLUSTER_ACTION on the cluster: CLUSTER_AUTHORIZATION_FAILED as
// a whole (DescribeFiles: for each file).
func rpcRefused(req kmsg.Request) kmsg.Response {
	code := kerr.ClusterAuthorizationFailed.Code
	msg := kmsg.StringPtr(kerr.ClusterAuthorizationFailed.Description)
	switch r := req.(type) {
	case *rpcmsg.DescribeFilesRequest:
		resp := r.ResponseKind().(*rpcmsg.DescribeFilesResponse)
		for _, k := range r.ObjectKeys {
			resp.Files = append(resp.Files, rpcmsg.DescribeFilesFile{ObjectKey: k, ErrorCode: code})
		}
		return resp
	case *rpcmsg.CommitFileRequest:
		resp := r.ResponseKind().(*rpcmsg.CommitFileResponse)
		resp.ErrorCode, resp.ErrorMessage = code, msg
		return resp
	case *rpcmsg.FindBatchesRequest:
		resp := r.ResponseKind().(*rpcmsg.FindBatchesResponse)
		resp.ErrorCode, resp.ErrorMessage = code, msg
		return resp
	case *rpcmsg.ListOffsetsRequest:
		resp := r.ResponseKind().(*rpcmsg.ListOffsetsResponse)
		resp.ErrorCode, resp.ErrorMessage = code, msg
		return resp
	case *rpcmsg.DeleteRecordsRequest:
		resp := r.ResponseKind().(*rpcmsg.DeleteRecordsResponse)
		resp.ErrorCode, resp.ErrorMessage = code, msg
		return resp
	case *rpcmsg.CreatePartitionsRequest:
		resp := r.ResponseKind().(*rpcmsg.CreatePartitionsResponse)
		resp.ErrorCode, resp.ErrorMessage = code, msg
		return resp
	case *rpcmsg.DeleteTopicsRequest:
		resp := r.ResponseKind().(*rpcmsg.DeleteTopicsResponse)
		resp.ErrorCode, resp.ErrorMessage = code, msg
		return resp
	case *rpcmsg.DeleteFilesRequest:
		resp := r.ResponseKind().(*rpcmsg.DeleteFilesResponse)
		resp.ErrorCode, resp.ErrorMessage = code, msg
		return resp
	case *rpcmsg.AllocateProducerIDsRequest:
		resp := r.ResponseKind().(*rpcmsg.AllocateProducerIDsResponse)
		resp.ErrorCode, resp.ErrorMessage = code, msg
		return resp
	case *rpcmsg.DisableTopicRequest:
		resp := r.ResponseKind().(*rpcmsg.DisableTopicResponse)
		resp.ErrorCode, resp.ErrorMessage = code, msg
		return resp
	}
	panic(fmt.Sprintf("server: coordinator RPC %T has no refusal", req))
}

// topicAuthMsg is Kafka's message of TOPIC_AUTHORIZATION_FAILED.
const topicAuthMsg = "Authorization failed."

// configAllowed decides a config resource: a topic needs op on it
// (TOPIC_AUTHORIZATION_FAILED), a broker or the cluster op on the cluster
// (CLUSTER_AUTHORIZATION_FAILED); other types are left to the handler.
func (s *Server) configAllowed(ctx context.Context, op kmsg.ACLOperation, rt kmsg.ConfigResourceType, name string) (int16, bool) {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		return topicAuthFailed, s.authorized(ctx, op, rtTopic, name)
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		return kerr.ClusterAuthorizationFailed.Code, s.authorizedCluster(ctx, op)
	}
	return 0, true
}
