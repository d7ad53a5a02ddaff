package coordinator

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/metalog/metalogtest"
)

// BenchmarkPurgeTopic deletes a topic of 1M runs (one partition, 20
// files, each batch its own run: fillPartition) and purges it while
// another topic on the same shard commits a file of 100 batches in a
// loop: the figures are the purge's duration (purge-ms), how many passes
// it took, and the commits' latency while it ran (p50, p99 and max, µs),
// against commit-alone-p99-µs measured before the delete. The purge moves
// purgeRunsPerRecord runs per group, so no commit waits behind more than
// one step.
func BenchmarkPurgeTopic(b *testing.B) {
	const total = 1_000_000
	for range b.N {
		b.StopTimer()
		c, err := Open(Config{NumShards: 1, SnapshotIntervalRecords: -1, LifecycleInterval: -1,
			OpenLog: (&metalogtest.Memory{Discard: true}).Open, Logger: discardLogger()})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		big, err := c.CreateTopic(ctx, "big", 1, nil)
		if err != nil {
			b.Fatal(err)
		}
		live, err := c.CreateTopic(ctx, "live", 1, nil)
		if err != nil {
			b.Fatal(err)
		}
		fillPartition(b, c, diskless.TopicPartition{TopicID: big.ID}, total)
		batches := make([]diskless.CommitBatch, 100)
		for i := range batches {
			batches[i] = plain(live, 0, 1)
			batches[i].ByteOffset = int32(i * 100)
		}
		commitOnce := func() time.Duration {
			req := commitRequest(c, nextKey(), batches...)
			start := time.Now()
			if _, err := c.CommitFile(ctx, 0, req); err != nil {
				b.Fatal(err)
			}
			return time.Since(start)
		}
		var alone []time.Duration
		for range 200 {
			alone = append(alone, commitOnce())
		}
		if _, err := c.DeleteTopic(ctx, big.ID); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		var done atomic.Bool
		var lat []time.Duration
		finished := make(chan struct{})
		go func() {
			defer close(finished)
			for !done.Load() {
				lat = append(lat, commitOnce())
			}
		}()
		start := time.Now()
		passes := 0
		for purgePending(c) {
			if err := c.runPurge(ctx); err != nil {
				b.Fatal(err)
			}
			passes++
		}
		purge := time.Since(start)
		done.Store(true)
		<-finished
		b.StopTimer()
		slices.Sort(lat)
		slices.Sort(alone)
		b.ReportMetric(float64(purge.Milliseconds()), "purge-ms")
		b.ReportMetric(float64(passes), "passes")
		b.ReportMetric(float64(len(lat)), "commits-during")
		if len(lat) > 0 {
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "commit-p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "commit-p99-µs")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "commit-max-µs")
		}
		b.ReportMetric(float64(alone[len(alone)*99/100].Microseconds()), "commit-alone-p99-µs")
		c.Close()
		b.StartTimer()
	}
}

// fillPartition appends n one-offset batches to tp's index directly (the
// replay path), in records of at most MaxCommitBatches, 10 bytes apart
// in their files (as refused batches leave them), so each is a run of its
// own: n index entries.
func fillPartition(b *testing.B, c *Coordinator, tp diskless.TopicPartition, n int) {
	s := c.shards[c.ShardFor(tp.TopicID, tp.Partition)]
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.mu.st
	p := st.partitions[tp]
	for left := n; left > 0; {
		k := min(left, diskless.MaxCommitBatches)
		left -= k
		bs := make([]records.CommittedBatch, k)
		for i := range bs {
			base := p.hwm + int64(i)
			bs[i] = records.CommittedBatch{Magic: 2, ByteOffset: int32(i) * 110, ByteSize: 100, AssignedBaseOffset: base,
				AssignedLastOffset: base, LogAppendTimestamp: 1, BatchMaxTimestamp: 1, ProducerID: -1}
		}
		rec := &records.FileCommitted{ObjectKey: nextKey(), ObjectFormat: 1, FileSize: 1 << 30, OwnerIDs: []int32{0},
			Topics: []records.FileTopic{{TopicID: tp.TopicID, Partitions: []records.FilePartition{{Partition: tp.Partition, Batches: bs}}}}}
		if err := st.apply(rec); err != nil {
			b.Fatal(err)
		}
	}
	p.visHWM, p.visLogStart = p.hwm, p.logStart
}

// purgePending reports whether shard 0 still holds deleted topics.
func purgePending(c *Coordinator) bool {
	s := c.shards[0]
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.mu.st.deletedTopics) > 0
}
