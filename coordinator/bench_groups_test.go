package coordinator

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/diskless-sidecar/sidecar/metalog/metalogtest"
)

// BenchmarkOffsetCommit measures OffsetCommit throughput of one shard:
// committers concurrent simple-group commits (one partition each, each
// committer its own group) through the shard driver, answered once
// durable. log "memory" is the in-memory log keeping no body (the
// decision path alone); "file" is the embedded file log under a temp
// directory (one fsync per group commit). Reports commits/s and, for the
// file log, commits per fsync (records appended per Append call).
func BenchmarkOffsetCommit(b *testing.B) {
	for _, log := range []string{"memory", "file"} {
		for _, committers := range []int{1, 16, 128} {
			b.Run(fmt.Sprintf("log=%s/committers=%d", log, committers), func(b *testing.B) {
				cfg := Config{NumShards: 1, SnapshotIntervalRecords: -1, Logger: discardLogger(), OffsetsRetentionCheckInterval: -1}
				if log == "memory" {
					cfg.OpenLog = (&metalogtest.Memory{Discard: true}).Open
				} else {
					cfg.Dir = b.TempDir()
				}
				c, err := Open(cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				if _, err := c.CreateTopic(context.Background(), "t", 8, nil); err != nil {
					b.Fatal(err)
				}
				var next atomic.Int64
				b.ReportAllocs()
				b.ResetTimer()
				var wg sync.WaitGroup
				for w := range committers {
					req := simpleCommit(fmt.Sprintf("bench-%d", w), "t", int32(w%8), 0)
					wg.Go(func() {
						for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
							req.Topics[0].Partitions[0].Offset = i
							resp, err := c.CommitOffsets(context.Background(), req)
							if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
								b.Errorf("commit: %v %+v", err, resp)
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
			})
		}
	}
}
