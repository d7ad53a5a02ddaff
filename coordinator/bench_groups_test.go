package coordinator

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

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

// BenchmarkGroupHeartbeat measures how many classic Heartbeats one
// shard's driver answers per second: members of a Stable group (one per
// caller) heartbeating through the driver, as group requests share it
// with file commits. At concurrency 64 the driver is the bottleneck, so
// heartbeats/s is its capacity for group requests that write nothing, and
// a storm's request rate divided by it the share of the driver it takes
// from commits (bench/RESULTS.md entry 15).
func BenchmarkGroupHeartbeat(b *testing.B) {
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			cfg := Config{NumShards: 1, SnapshotIntervalRecords: -1, Logger: discardLogger(), OffsetsRetentionCheckInterval: -1,
				OpenLog: (&metalogtest.Memory{Discard: true}).Open}
			cfg.Groups.InitialRebalanceDelay = time.Millisecond
			c, err := Open(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			members, gen := stableClassicGroup(b, c, "hb", callers)
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for _, m := range members {
				req := kmsg.NewPtrHeartbeatRequest()
				req.Version, req.Group, req.MemberID, req.Generation = 4, "hb", m, gen
				wg.Go(func() {
					for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
						resp, err := c.Heartbeat(ctx, req)
						if err != nil || resp.ErrorCode != 0 {
							b.Errorf("heartbeat: %v %+v", err, resp)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "heartbeats/s")
		})
	}
}

// stableClassicGroup joins n classic members to group through c (JoinGroup
// v9 twice each, concurrently), syncs them and returns their ids and the
// generation.
func stableClassicGroup(b *testing.B, c *Coordinator, group string, n int) ([]string, int32) {
	ctx := context.Background()
	ids := make([]string, n)
	var (
		wg  sync.WaitGroup
		gen atomic.Int32
	)
	for i := range n {
		wg.Go(func() {
			join := kmsg.NewPtrJoinGroupRequest()
			join.Version, join.Group = 9, group
			join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 600_000, 60_000
			join.ProtocolType = "consumer"
			join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0}}}
			var resp *kmsg.JoinGroupResponse
			for range 2 {
				r, err := c.JoinGroup(ctx, join, "c", "/h")
				if err != nil {
					b.Error(err)
					return
				}
				resp = r
				join.MemberID = r.MemberID
			}
			if resp.ErrorCode != 0 {
				b.Errorf("join: %d", resp.ErrorCode)
				return
			}
			ids[i] = resp.MemberID
			gen.Store(resp.Generation)
			sync := kmsg.NewPtrSyncGroupRequest()
			sync.Version, sync.Group, sync.MemberID, sync.Generation = 5, group, resp.MemberID, resp.Generation
			sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), resp.Protocol
			if resp.LeaderID == resp.MemberID {
				for _, m := range resp.Members {
					sync.GroupAssignment = append(sync.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m.MemberID, MemberAssignment: []byte{}})
				}
			}
			if r, err := c.SyncGroup(ctx, sync); err != nil || r.ErrorCode != 0 {
				b.Errorf("sync: %v %+v", err, r)
			}
		})
	}
	wg.Wait()
	return ids, gen.Load()
}
