package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// describeLogDirsVersions: DescribeLogDirs 1–5, Kafka 4.x's range.
var describeLogDirsVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 35, MinVersion: 1, MaxVersion: 5}

// handleDescribeLogDirs answers DescribeLogDirs with one log dir,
// Config.LogDir (where the objects are), holding every partition asked for
// (null topics: all) with its diskless size: the bytes of the record
// batches it holds in object storage (coordinator index), offset lag 0,
// never a future replica. Total and usable bytes are −1 (unknown: an
// object store has no capacity to report). An unknown topic or partition
// is left out, as Kafka leaves out what it does not host (observed).
func (s *Server) handleDescribeLogDirs(_ context.Context, req *kmsg.DescribeLogDirsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = s.cfg.LogDir
	dir.TotalBytes, dir.UsableBytes = -1, -1
	add := func(t diskless.Topic, parts []int32) {
		sizes := s.catalog.PartitionSizes(t.ID)
		out := kmsg.NewDescribeLogDirsResponseDirTopic()
		out.Topic = t.Name
		for _, p := range parts {
			if p < 0 || int(p) >= len(sizes) {
				continue
			}
			dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			dp.Partition, dp.Size = p, sizes[p]
			out.Partitions = append(out.Partitions, dp)
		}
		if len(out.Partitions) > 0 {
			dir.Topics = append(dir.Topics, out)
		}
	}
	if req.Topics == nil {
		for _, t := range s.catalog.Topics() {
			parts := make([]int32, t.Partitions)
			for i := range parts {
				parts[i] = int32(i)
			}
			add(t, parts)
		}
	} else {
		for _, rt := range req.Topics {
			if t, ok := s.catalog.Topic(rt.Topic); ok {
				add(t, rt.Partitions)
			}
		}
	}
	resp.Dirs = []kmsg.DescribeLogDirsResponseDir{dir}
	return resp
}
