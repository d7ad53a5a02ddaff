package fetch

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// offsetForLeaderEpochVersions: OffsetForLeaderEpoch 0–4, every version
// kmsg knows; consumers (franz-go first) validate their position with it
// once they know an epoch.
var offsetForLeaderEpochVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 23, MinVersion: 0, MaxVersion: 4}

// OffsetForLeaderEpoch answers req, an OffsetForLeaderEpoch v0–4 request
// (Kafka API 23, KIP-101/KIP-320), with exactly one response of the same
// version. Consumers send it to validate their position after learning a
// leader epoch (franz-go does whenever a fetched batch or ListOffsets
// carried one); SPEC §4.
//
// A diskless partition has one leader epoch for its whole life,
// [Config.LeaderEpoch], and every batch is served with it. So, per
// partition: asked for that epoch, the answer is (epoch, high watermark) —
// the end of the epoch is the end of the log; asked for any other epoch,
// (−1, −1), Kafka's "undefined epoch" answer. Errors, per partition:
// UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH
// (v2+, CurrentLeaderEpoch checked as in Fetch), KAFKA_STORAGE_ERROR.
func (h *Handler) OffsetForLeaderEpoch(ctx context.Context, req *kmsg.OffsetForLeaderEpochRequest) *kmsg.OffsetForLeaderEpochResponse {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	resp.Topics = make([]kmsg.OffsetForLeaderEpochResponseTopic, len(req.Topics))
	var lookups map[int32][]func() // by shard (byShard)
	for i := range req.Topics {
		rt, out := &req.Topics[i], &resp.Topics[i]
		*out = kmsg.NewOffsetForLeaderEpochResponseTopic()
		out.Topic = rt.Topic
		t, ok := h.coord.Topic(rt.Topic)
		out.Partitions = make([]kmsg.OffsetForLeaderEpochResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp, o := &rt.Partitions[j], &out.Partitions[j]
			*o = kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			o.Partition = rp.Partition
			o.LeaderEpoch, o.EndOffset = -1, -1
			var errc *kerr.Error
			switch {
			case !ok || !partitionExists(&t, rp.Partition):
				errc = kerr.UnknownTopicOrPartition
			case req.Version >= 2:
				errc = h.checkLeaderEpoch(rp.CurrentLeaderEpoch)
			}
			if errc != nil {
				o.ErrorCode = errc.Code
				continue
			}
			if rp.LeaderEpoch != h.cfg.LeaderEpoch {
				continue
			}
			if lookups == nil {
				lookups = map[int32][]func(){}
			}
			tp := diskless.TopicPartition{TopicID: t.ID, Partition: rp.Partition}
			shard := h.coord.ShardFor(tp.TopicID, tp.Partition)
			lookups[shard] = append(lookups[shard], func() {
				if r := h.coord.ListOffsets(ctx, tp, diskless.ListOffsetsLatest); r.Err != nil {
					o.ErrorCode = r.Err.Code
				} else {
					o.LeaderEpoch, o.EndOffset = h.cfg.LeaderEpoch, r.HighWatermark
				}
			})
		}
	}
	byShard(lookups)
	return resp
}
