package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// deleteTopicsVersions: DeleteTopics 0–6, all of kmsg's versions (Kafka
// 4.x serves 1–6); v6 names topics by name or by id [KIP-516].
var deleteTopicsVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 20, MinVersion: 0, MaxVersion: 6}

// handleDeleteTopics answers DeleteTopics (SPEC §6), each topic in request
// order, as Kafka 4.4 answers (observed):
//
//   - v6 by id: the answer carries name and id; an unknown id gets
//     UNKNOWN_TOPIC_ID "This server does not host this topic ID." with a
//     null name. By name (zero id): the real id is filled in. Both a name
//     and an id: INVALID_REQUEST "You may not specify both topic name and
//     topic id."; neither: INVALID_REQUEST "Neither topic name nor id were
//     specified."; a name whose id was also given by id:
//     INVALID_REQUEST "The provided topic name maps to an ID that was
//     already supplied."
//   - v0–5 by name: an unknown name gets UNKNOWN_TOPIC_OR_PARTITION.
//
// The deletion is durable before the answer (the catalog's record 101);
// the data is purged in the background. TimeoutMillis > 0 bounds the
// call: REQUEST_TIMED_OUT past it.
func (s *Server) handleDeleteTopics(ctx context.Context, req *kmsg.DeleteTopicsRequest) kmsg.Response {
	if fwd, ok := s.forwardAdmin(ctx, req); ok {
		return fwd // the catalog is written at the controller
	}
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	ctx, cancel := withRequestTimeout(ctx, req.TimeoutMillis)
	defer cancel()
	type item struct {
		name *string
		id   diskless.TopicID
	}
	var items []item
	if req.Version >= 6 {
		for _, t := range req.Topics {
			items = append(items, item{t.Topic, diskless.TopicID(t.TopicID)})
		}
	} else {
		for i := range req.TopicNames {
			items = append(items, item{name: &req.TopicNames[i]})
		}
	}
	byID := make(map[diskless.TopicID]bool)
	for _, it := range items {
		if it.id != (diskless.TopicID{}) {
			byID[it.id] = true
		}
	}
	for _, it := range items {
		out := kmsg.NewDeleteTopicsResponseTopic()
		out.Topic, out.TopicID = it.name, it.id
		fail := func(err *kerr.Error, msg string) {
			out.ErrorCode = err.Code
			if req.Version >= 5 {
				out.ErrorMessage = kmsg.StringPtr(msg)
			}
		}
		hasName := it.name != nil && *it.name != ""
		hasID := it.id != (diskless.TopicID{})
		var (
			t  diskless.Topic
			ok bool
		)
		switch {
		case hasName && hasID:
			fail(kerr.InvalidRequest, "You may not specify both topic name and topic id.")
		case !hasName && !hasID && req.Version >= 6:
			fail(kerr.InvalidRequest, "Neither topic name nor id were specified.")
		case hasID:
			if t, ok = s.catalog.TopicByID(it.id); !ok {
				out.Topic = nil
				fail(kerr.UnknownTopicID, "This server does not host this topic ID.")
			}
		default:
			if t, ok = s.catalog.Topic(*it.name); !ok {
				fail(kerr.UnknownTopicOrPartition, kerr.UnknownTopicOrPartition.Description)
			} else if byID[t.ID] {
				ok = false
				fail(kerr.InvalidRequest, "The provided topic name maps to an ID that was already supplied.")
			} else if req.Version >= 6 {
				out.TopicID = t.ID
			}
		}
		if ok {
			out.Topic = kmsg.StringPtr(t.Name)
			if _, err := s.catalog.DeleteTopic(ctx, t.ID); err != nil {
				code, msg := s.adminErrorCode("delete topic", t.Name, err)
				out.ErrorCode = code
				if req.Version >= 5 {
					out.ErrorMessage = kmsg.StringPtr(msg)
				}
			} else {
				s.log.Info("deleted topic", "topic", t.Name, "topic_id", t.ID.String())
			}
		}
		resp.Topics = append(resp.Topics, out)
	}
	return resp
}
