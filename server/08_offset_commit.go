package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/group"
)

// offsetCommitVersions: OffsetCommit 2–10. v0–1 were removed in Kafka 4.0
// (KIP-896); v9 is the first KIP-848 members commit with; v10 names
// topics by id.
var offsetCommitVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 8, MinVersion: 2, MaxVersion: 10}

// handleOffsetCommit commits offsets on the group's shard and answers once
// they are durable (records 107). A v10 topic id the catalog does not know
// gets UNKNOWN_TOPIC_ID on its partitions; a write that failed, every
// partition the coordinator accepted COORDINATOR_NOT_AVAILABLE (or
// NOT_COORDINATOR while stopping), which clients retry.
func (s *Server) handleOffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) kmsg.Response {
	var unknown []kmsg.OffsetCommitResponseTopic
	if req.Version >= 10 {
		known := req.Topics[:0:0]
		for _, t := range req.Topics {
			tp, ok := s.catalog.TopicByID(diskless.TopicID(t.TopicID))
			if !ok {
				rt := kmsg.OffsetCommitResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
				for _, p := range t.Partitions {
					rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: kerr.UnknownTopicID.Code})
				}
				unknown = append(unknown, rt)
				continue
			}
			t.Topic = tp.Name
			known = append(known, t)
		}
		req.Topics = known
	}
	var (
		resp *kmsg.OffsetCommitResponse
		err  error
	)
	if s.cfg.Groups == nil {
		err = errNoGroups
	} else {
		resp, err = s.cfg.Groups.CommitOffsets(ctx, req)
	}
	switch {
	case err != nil && resp != nil:
		group.FailCommit(resp, groupErrCode(err))
	case err != nil:
		resp = req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, t := range req.Topics {
			rt := kmsg.OffsetCommitResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: groupErrCode(err)})
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	resp.Topics = append(resp.Topics, unknown...)
	return resp
}
