package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/group"
)

// offsetFetchVersions: OffsetFetch 1–10. v0 (offsets in ZooKeeper) was
// removed in Kafka 4.0 (KIP-896); v2+ a null topic list asks for every
// offset, v7 RequireStable (KIP-447), v8+ several groups (KIP-709), v9
// KIP-848 member ids and epochs, v10 topic ids.
var offsetFetchVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 9, MinVersion: 1, MaxVersion: 10}

// handleOffsetFetch answers OffsetFetch from each group's shard. A group
// whose shard cannot answer gets COORDINATOR_NOT_AVAILABLE (or
// NOT_COORDINATOR while stopping) as its error. v10 topic ids are
// resolved through the catalog; an unknown one gets UNKNOWN_TOPIC_ID on
// its partitions.
func (s *Server) handleOffsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, g := range req.Groups {
			resp.Groups = append(resp.Groups, s.fetchGroupOffsets(ctx, req.Version, g, req.RequireStable))
		}
		return resp
	}
	rg := kmsg.OffsetFetchRequestGroup{Group: req.Group, MemberEpoch: -1}
	if req.Topics != nil {
		rg.Topics = make([]kmsg.OffsetFetchRequestGroupTopic, 0, len(req.Topics))
		for _, t := range req.Topics {
			rg.Topics = append(rg.Topics, kmsg.OffsetFetchRequestGroupTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
	}
	g := s.fetchGroupOffsets(ctx, req.Version, rg, req.RequireStable)
	resp.ErrorCode = g.ErrorCode
	for _, t := range g.Topics {
		rt := kmsg.OffsetFetchResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			code := p.ErrorCode
			if code == 0 && req.Version < 2 {
				code = g.ErrorCode // v0–1 have no group error
			}
			rt.Partitions = append(rt.Partitions, kmsg.OffsetFetchResponseTopicPartition{
				Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, ErrorCode: code,
			})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// fetchGroupOffsets answers one group, resolving v10 topic ids.
func (s *Server) fetchGroupOffsets(ctx context.Context, version int16, g kmsg.OffsetFetchRequestGroup, requireStable bool) kmsg.OffsetFetchResponseGroup {
	fr := group.FetchRequest{Group: g.Group, MemberID: g.MemberID, MemberEpoch: g.MemberEpoch, Topics: g.Topics}
	if version < 9 {
		fr.MemberID, fr.MemberEpoch = nil, -1
	}
	var unknown []kmsg.OffsetFetchResponseGroupTopic
	if version >= 10 && g.Topics != nil {
		fr.Topics = make([]kmsg.OffsetFetchRequestGroupTopic, 0, len(g.Topics))
		for _, t := range g.Topics {
			tp, ok := s.catalog.TopicByID(diskless.TopicID(t.TopicID))
			if !ok {
				rt := kmsg.OffsetFetchResponseGroupTopic{TopicID: t.TopicID}
				for _, p := range t.Partitions {
					rt.Partitions = append(rt.Partitions, kmsg.OffsetFetchResponseGroupTopicPartition{
						Partition: p, Offset: -1, LeaderEpoch: -1, ErrorCode: kerr.UnknownTopicID.Code,
					})
				}
				unknown = append(unknown, rt)
				continue
			}
			t.Topic = tp.Name
			fr.Topics = append(fr.Topics, t)
		}
	}
	var (
		out kmsg.OffsetFetchResponseGroup
		err error
	)
	if s.cfg.Groups == nil {
		err = errNoGroups
	} else {
		out, err = s.cfg.Groups.FetchOffsets(ctx, fr, requireStable)
	}
	if err != nil {
		return kmsg.OffsetFetchResponseGroup{Group: g.Group, ErrorCode: groupErrCode(err)}
	}
	if version >= 10 {
		// Offsets committed by name carry no id: name them by the topic
		// the catalog holds now; a topic that is gone cannot be named.
		topics := out.Topics[:0]
		for _, t := range out.Topics {
			if t.TopicID == ([16]byte{}) {
				tp, ok := s.catalog.Topic(t.Topic)
				if !ok {
					continue
				}
				t.TopicID = tp.ID
			}
			topics = append(topics, t)
		}
		out.Topics = append(topics, unknown...)
	}
	return out
}
