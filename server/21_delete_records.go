package server

import (
	"context"
	"errors"
	"log/slog"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// deleteRecordsVersions: DeleteRecords 0–2, all of kmsg's versions.
var deleteRecordsVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 21, MinVersion: 0, MaxVersion: 2}

// handleDeleteRecords answers DeleteRecords (SPEC §5): per partition, the
// log start offset moves up to the requested offset (−1: the high
// watermark) and the answer carries the low watermark after the move.
// Offsets below the current log start are no-ops; other negative offsets
// and offsets above the high watermark get OFFSET_OUT_OF_RANGE. The
// request's timeout bounds the whole call; partitions not done by then get
// REQUEST_TIMED_OUT.
func (s *Server) handleDeleteRecords(ctx context.Context, req *kmsg.DeleteRecordsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	ctx, cancel := withRequestTimeout(ctx, req.TimeoutMillis)
	defer cancel()
	resp.Topics = make([]kmsg.DeleteRecordsResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt, out := &req.Topics[i], &resp.Topics[i]
		*out = kmsg.NewDeleteRecordsResponseTopic()
		out.Topic = rt.Topic
		t, ok := s.catalog.Topic(rt.Topic)
		out.Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp, o := &rt.Partitions[j], &out.Partitions[j]
			*o = kmsg.NewDeleteRecordsResponseTopicPartition()
			o.Partition, o.LowWatermark = rp.Partition, -1
			if !ok || rp.Partition < 0 || rp.Partition >= t.Partitions {
				o.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			low, err := s.catalog.DeleteRecords(ctx, diskless.TopicPartition{TopicID: t.ID, Partition: rp.Partition}, rp.Offset)
			var kErr *kerr.Error
			switch {
			case err == nil:
				o.LowWatermark = low
			case errors.As(err, &kErr):
				o.ErrorCode = kErr.Code
			case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
				o.ErrorCode = kerr.RequestTimedOut.Code
			default:
				s.rl.Log(ctx, slog.LevelWarn, rt.Topic+"-"+strconv.Itoa(int(rp.Partition)), "DeleteRecords failed",
					slog.String("topic", rt.Topic), slog.Int("partition", int(rp.Partition)), slog.Any("err", err))
				o.ErrorCode = kerr.KafkaStorageError.Code
			}
		}
	}
	return resp
}
