package server

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var groupAuthFailed = kerr.GroupAuthorizationFailed.Code

// gateGroups is gate's part for the group and transaction APIs (SPEC §14,
// ACLs). The read-only ones (FindCoordinator, OffsetFetch,
// DescribeGroups, ConsumerGroupDescribe, ListGroups) are answered by their
// handler and what the principal may not DESCRIBE is refused or left out
// of the answer; the others are refused before the handler.
func (s *Server) gateGroups(ctx context.Context, req kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response, kmsg.Response) {
	group := func(op kmsg.ACLOperation, g string) bool { return s.authorized(ctx, op, rtGroup, g) }
	txnID := func(id string) bool { return s.authorized(ctx, opWrite, rtTxnID, id) }
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		if !group(opRead, r.Group) {
			out := r.ResponseKind().(*kmsg.JoinGroupResponse)
			out.ErrorCode, out.Generation = groupAuthFailed, -1
			return nil, nil, out
		}
	case *kmsg.SyncGroupRequest:
		if !group(opRead, r.Group) {
			out := r.ResponseKind().(*kmsg.SyncGroupResponse)
			out.ErrorCode = groupAuthFailed
			return nil, nil, out
		}
	case *kmsg.HeartbeatRequest:
		if !group(opRead, r.Group) {
			out := r.ResponseKind().(*kmsg.HeartbeatResponse)
			out.ErrorCode = groupAuthFailed
			return nil, nil, out
		}
	case *kmsg.LeaveGroupRequest:
		if !group(opRead, r.Group) {
			out := r.ResponseKind().(*kmsg.LeaveGroupResponse)
			out.ErrorCode = groupAuthFailed
			return nil, nil, out
		}
	case *kmsg.ConsumerGroupHeartbeatRequest:
		if !group(opRead, r.Group) {
			out := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
			out.ErrorCode = groupAuthFailed
			return nil, nil, out
		}
	case *kmsg.OffsetCommitRequest:
		if !group(opRead, r.Group) {
			out := r.ResponseKind().(*kmsg.OffsetCommitResponse)
			for _, t := range r.Topics {
				out.Topics = append(out.Topics, offsetCommitRefused(t, groupAuthFailed))
			}
			return nil, nil, out
		}
		var refused []kmsg.OffsetCommitResponseTopic
		trimmed := *r
		trimmed.Topics = slices.DeleteFunc(slices.Clone(r.Topics), func(t kmsg.OffsetCommitRequestTopic) bool {
			name, ok := s.topicName(t.Topic, t.TopicID)
			if !ok || s.authorized(ctx, opRead, rtTopic, name) {
				return false
			}
			refused = append(refused, offsetCommitRefused(t, topicAuthFailed))
			return true
		})
		return &trimmed, func(resp kmsg.Response) kmsg.Response {
			resp.(*kmsg.OffsetCommitResponse).Topics = append(resp.(*kmsg.OffsetCommitResponse).Topics, refused...)
			return resp
		}, nil
	case *kmsg.OffsetDeleteRequest:
		if !group(opDelete, r.Group) {
			out := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
			out.ErrorCode = groupAuthFailed
			return nil, nil, out
		}
		var refused []kmsg.OffsetDeleteResponseTopic
		trimmed := *r
		trimmed.Topics = slices.DeleteFunc(slices.Clone(r.Topics), func(t kmsg.OffsetDeleteRequestTopic) bool {
			if s.authorized(ctx, opRead, rtTopic, t.Topic) {
				return false
			}
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, topicAuthFailed
				rt.Partitions = append(rt.Partitions, rp)
			}
			refused = append(refused, rt)
			return true
		})
		return &trimmed, func(resp kmsg.Response) kmsg.Response {
			resp.(*kmsg.OffsetDeleteResponse).Topics = append(resp.(*kmsg.OffsetDeleteResponse).Topics, refused...)
			return resp
		}, nil
	case *kmsg.DeleteGroupsRequest:
		var refused []kmsg.DeleteGroupsResponseGroup
		trimmed := *r
		trimmed.Groups = slices.DeleteFunc(slices.Clone(r.Groups), func(g string) bool {
			if group(opDelete, g) {
				return false
			}
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, groupAuthFailed
			refused = append(refused, rg)
			return true
		})
		return &trimmed, func(resp kmsg.Response) kmsg.Response {
			resp.(*kmsg.DeleteGroupsResponse).Groups = append(resp.(*kmsg.DeleteGroupsResponse).Groups, refused...)
			return resp
		}, nil
	case *kmsg.FindCoordinatorRequest:
		allowed := func(key string) (int16, bool) {
			if r.CoordinatorType == 1 {
				return kerr.TransactionalIDAuthorizationFailed.Code, s.authorized(ctx, opDescribe, rtTxnID, key)
			}
			return groupAuthFailed, group(opDescribe, key)
		}
		return req, func(resp kmsg.Response) kmsg.Response {
			out := resp.(*kmsg.FindCoordinatorResponse)
			if r.Version < 4 {
				if code, ok := allowed(r.CoordinatorKey); !ok {
					out.ErrorCode, out.NodeID, out.Host, out.Port, out.ErrorMessage = code, -1, "", -1, nil
				}
				return out
			}
			for i := range out.Coordinators {
				c := &out.Coordinators[i]
				if code, ok := allowed(c.Key); !ok {
					c.ErrorCode, c.NodeID, c.Host, c.Port, c.ErrorMessage = code, -1, "", -1, nil
				}
			}
			return out
		}, nil
	case *kmsg.OffsetFetchRequest:
		return req, func(resp kmsg.Response) kmsg.Response {
			return s.filterOffsetFetch(ctx, r, resp.(*kmsg.OffsetFetchResponse))
		}, nil
	case *kmsg.DescribeGroupsRequest:
		return req, func(resp kmsg.Response) kmsg.Response {
			out := resp.(*kmsg.DescribeGroupsResponse)
			for i := range out.Groups {
				if g := &out.Groups[i]; !group(opDescribe, g.Group) {
					*g = kmsg.NewDescribeGroupsResponseGroup()
					g.Group, g.ErrorCode = out.Groups[i].Group, groupAuthFailed
				}
			}
			return out
		}, nil
	case *kmsg.ConsumerGroupDescribeRequest:
		return req, func(resp kmsg.Response) kmsg.Response {
			out := resp.(*kmsg.ConsumerGroupDescribeResponse)
			for i := range out.Groups {
				if g := &out.Groups[i]; !group(opDescribe, g.Group) {
					name := g.Group
					*g = kmsg.NewConsumerGroupDescribeResponseGroup()
					g.Group, g.ErrorCode = name, groupAuthFailed
				}
			}
			return out
		}, nil
	case *kmsg.ListGroupsRequest:
		if s.authorizedCluster(ctx, opDescribe) {
			return req, nil, nil
		}
		return req, func(resp kmsg.Response) kmsg.Response {
			out := resp.(*kmsg.ListGroupsResponse)
			out.Groups = slices.DeleteFunc(out.Groups, func(g kmsg.ListGroupsResponseGroup) bool { return !group(opDescribe, g.Group) })
			return out
		}, nil
	case *kmsg.EndTxnRequest:
		if !txnID(r.TransactionalID) {
			out := r.ResponseKind().(*kmsg.EndTxnResponse)
			out.ErrorCode, out.ProducerID, out.ProducerEpoch = kerr.TransactionalIDAuthorizationFailed.Code, -1, -1
			return nil, nil, out
		}
	case *kmsg.AddOffsetsToTxnRequest:
		out := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		switch {
		case !txnID(r.TransactionalID):
			out.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			return nil, nil, out
		case !group(opRead, r.Group):
			out.ErrorCode = groupAuthFailed
			return nil, nil, out
		}
	case *kmsg.AddPartitionsToTxnRequest:
		if r.Version >= 4 {
			// The brokers' batched form (KIP-890): CLUSTER_ACTION on the
			// cluster.
			if !s.authorizedCluster(ctx, kmsg.ACLOperationClusterAction) {
				out := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
				out.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				return nil, nil, out
			}
			return req, nil, nil
		}
		// Each topic's code: TRANSACTIONAL_ID_AUTHORIZATION_FAILED for
		// all without WRITE on the id, else TOPIC_AUTHORIZATION_FAILED
		// for those without WRITE on it and OPERATION_NOT_ATTEMPTED for
		// the others once one is refused.
		idRefused := !txnID(r.TransactionalID)
		refused := idRefused
		codes := make([]int16, len(r.Topics))
		for i, t := range r.Topics {
			switch {
			case idRefused:
				codes[i] = kerr.TransactionalIDAuthorizationFailed.Code
			case s.authorized(ctx, opWrite, rtTopic, t.Topic):
				codes[i] = kerr.OperationNotAttempted.Code
			default:
				codes[i], refused = topicAuthFailed, true
			}
		}
		if refused {
			out := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
			for i, t := range r.Topics {
				rt := kmsg.NewAddPartitionsToTxnResponseTopic()
				rt.Topic = t.Topic
				c := codes[i]
				for _, p := range t.Partitions {
					rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p, c
					rt.Partitions = append(rt.Partitions, rp)
				}
				out.Topics = append(out.Topics, rt)
			}
			return nil, nil, out
		}
	case *kmsg.TxnOffsetCommitRequest:
		code := int16(0)
		switch {
		case !txnID(r.TransactionalID):
			code = kerr.TransactionalIDAuthorizationFailed.Code
		case !group(opRead, r.Group):
			code = groupAuthFailed
		case slices.ContainsFunc(r.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) bool { return !s.authorized(ctx, opRead, rtTopic, t.Topic) }):
			code = topicAuthFailed
		}
		if code != 0 {
			out := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
			for _, t := range r.Topics {
				rt := kmsg.NewTxnOffsetCommitResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, code
					rt.Partitions = append(rt.Partitions, rp)
				}
				out.Topics = append(out.Topics, rt)
			}
			return nil, nil, out
		}
	case *kmsg.DescribeTransactionsRequest, *kmsg.ListTransactionsRequest, *kmsg.DescribeProducersRequest, *kmsg.WriteTxnMarkersRequest:
		return s.gateTxnAdmin(ctx, req)
	}
	return req, nil, nil
}

// gateTxnAdmin is gate's part for the operators' transaction APIs, as
// Kafka checks them: DescribeTransactions refuses an id the principal may
// not DESCRIBE (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and leaves out of
// an answer the topics it may not DESCRIBE; ListTransactions leaves out
// the ids it may not DESCRIBE; DescribeProducers refuses the partitions of
// a topic it may not READ (TOPIC_AUTHORIZATION_FAILED); WriteTxnMarkers
// needs CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED on
// every partition). Answers keep the request's order.
func (s *Server) gateTxnAdmin(ctx context.Context, req kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response, kmsg.Response) {
	describeID := func(id string) bool { return s.authorized(ctx, opDescribe, rtTxnID, id) }
	switch r := req.(type) {
	case *kmsg.DescribeTransactionsRequest:
		allowed := make([]bool, len(r.TransactionalIDs))
		trimmed := *r
		trimmed.TransactionalIDs = nil
		for i, id := range r.TransactionalIDs {
			if allowed[i] = describeID(id); allowed[i] {
				trimmed.TransactionalIDs = append(trimmed.TransactionalIDs, id)
			}
		}
		return &trimmed, func(resp kmsg.Response) kmsg.Response {
			out := resp.(*kmsg.DescribeTransactionsResponse)
			answered := out.TransactionStates
			out.TransactionStates = make([]kmsg.DescribeTransactionsResponseTransactionState, 0, len(r.TransactionalIDs))
			for i, id := range r.TransactionalIDs {
				if !allowed[i] {
					st := kmsg.NewDescribeTransactionsResponseTransactionState()
					st.TransactionalID, st.ErrorCode = id, kerr.TransactionalIDAuthorizationFailed.Code
					out.TransactionStates = append(out.TransactionStates, st)
					continue
				}
				st := answered[0]
				answered = answered[1:]
				st.Topics = slices.DeleteFunc(st.Topics, func(t kmsg.DescribeTransactionsResponseTransactionStateTopic) bool {
					return !s.authorized(ctx, opDescribe, rtTopic, t.Topic)
				})
				out.TransactionStates = append(out.TransactionStates, st)
			}
			return out
		}, nil
	case *kmsg.ListTransactionsRequest:
		return req, func(resp kmsg.Response) kmsg.Response {
			out := resp.(*kmsg.ListTransactionsResponse)
			out.TransactionStates = slices.DeleteFunc(out.TransactionStates, func(st kmsg.ListTransactionsResponseTransactionState) bool {
				return !describeID(st.TransactionalID)
			})
			return out
		}, nil
	case *kmsg.WriteTxnMarkersRequest:
		if !s.authorizedCluster(ctx, kmsg.ACLOperationClusterAction) {
			out := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
			for _, m := range r.Markers {
				om := kmsg.NewWriteTxnMarkersResponseMarker()
				om.ProducerID = m.ProducerID
				for _, t := range m.Topics {
					ot := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
					ot.Topic = t.Topic
					for _, p := range t.Partitions {
						op := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
						op.Partition, op.ErrorCode = p, kerr.ClusterAuthorizationFailed.Code
						ot.Partitions = append(ot.Partitions, op)
					}
					om.Topics = append(om.Topics, ot)
				}
				out.Markers = append(out.Markers, om)
			}
			return nil, nil, out
		}
	case *kmsg.DescribeProducersRequest:
		allowed := make([]bool, len(r.Topics))
		trimmed := *r
		trimmed.Topics = nil
		for i, t := range r.Topics {
			if allowed[i] = s.authorized(ctx, opRead, rtTopic, t.Topic); allowed[i] {
				trimmed.Topics = append(trimmed.Topics, t)
			}
		}
		return &trimmed, func(resp kmsg.Response) kmsg.Response {
			out := resp.(*kmsg.DescribeProducersResponse)
			answered := out.Topics
			out.Topics = make([]kmsg.DescribeProducersResponseTopic, 0, len(r.Topics))
			for i, t := range r.Topics {
				if allowed[i] {
					out.Topics = append(out.Topics, answered[0])
					answered = answered[1:]
					continue
				}
				ot := kmsg.NewDescribeProducersResponseTopic()
				ot.Topic = t.Topic
				for _, p := range t.Partitions {
					op := kmsg.NewDescribeProducersResponseTopicPartition()
					op.Partition, op.ErrorCode = p, topicAuthFailed
					ot.Partitions = append(ot.Partitions, op)
				}
				out.Topics = append(out.Topics, ot)
			}
			return out
		}, nil
	}
	return req, nil, nil
}

func offsetCommitRefused(t kmsg.OffsetCommitRequestTopic, code int16) kmsg.OffsetCommitResponseTopic {
	rt := kmsg.NewOffsetCommitResponseTopic()
	rt.Topic, rt.TopicID = t.Topic, t.TopicID
	for _, p := range t.Partitions {
		rp := kmsg.NewOffsetCommitResponseTopicPartition()
		rp.Partition, rp.ErrorCode = p.Partition, code
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

// filterOffsetFetch refuses in out what the principal may not DESCRIBE:
// a group (GROUP_AUTHORIZATION_FAILED, no topics), a topic named in the
// request (its partitions TOPIC_AUTHORIZATION_FAILED), a topic of an
// all-topics fetch (left out).
func (s *Server) filterOffsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest, out *kmsg.OffsetFetchResponse) *kmsg.OffsetFetchResponse {
	topicOK := func(name string, id [16]byte) bool {
		n, ok := s.topicName(name, id)
		return !ok || s.authorized(ctx, opDescribe, rtTopic, n)
	}
	if req.Version < 8 {
		if !s.authorized(ctx, opDescribe, rtGroup, req.Group) {
			out.Topics, out.ErrorCode = nil, groupAuthFailed
			return out
		}
		out.Topics = slices.DeleteFunc(out.Topics, func(t kmsg.OffsetFetchResponseTopic) bool {
			if topicOK(t.Topic, [16]byte{}) {
				return false
			}
			return req.Topics == nil
		})
		for i := range out.Topics {
			if t := &out.Topics[i]; !topicOK(t.Topic, [16]byte{}) {
				for j := range t.Partitions {
					t.Partitions[j].ErrorCode, t.Partitions[j].Offset, t.Partitions[j].Metadata = topicAuthFailed, -1, nil
				}
			}
		}
		return out
	}
	for i := range out.Groups {
		g := &out.Groups[i]
		if !s.authorized(ctx, opDescribe, rtGroup, g.Group) {
			g.Topics, g.ErrorCode = nil, groupAuthFailed
			continue
		}
		all := true
		for _, rg := range req.Groups {
			if rg.Group == g.Group && rg.Topics != nil {
				all = false
			}
		}
		g.Topics = slices.DeleteFunc(g.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) bool { return all && !topicOK(t.Topic, t.TopicID) })
		for j := range g.Topics {
			if t := &g.Topics[j]; !topicOK(t.Topic, t.TopicID) {
				for k := range t.Partitions {
					t.Partitions[k].ErrorCode, t.Partitions[k].Offset, t.Partitions[k].Metadata = topicAuthFailed, -1, nil
				}
			}
		}
	}
	return out
}
