package bench

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/metalog/metalogtest"
)

var (
	stateBatches = flag.Int("state-batches", 2_000_000, "batches BenchmarkShardState commits")
	statePerPart = flag.Int("state-batches-per-partition", 11, "batches per partition per file in BenchmarkShardState")
)

// statePartitions is BenchmarkShardState's partition count: issue 17's
// outside measurement (one small batch per partition per request).
const statePartitions = 1000

// BenchmarkShardState measures what one coordinator shard keeps per
// committed batch, in process: -state-batches batches (not idempotent, as
// raw Produce requests send them) over 1000 partitions, committed as files
// of -state-batches-per-partition batches per partition (11: the issue's
// ~45,000 batches/s sealed every 250 ms), each partition's batches of one
// file back to back in the object, as the WAL packer lays them out.
// Reported per batch: the heap the state holds (after a collection, log
// bodies not kept), the metadata log's record bytes, the snapshot's bytes,
// the time Open takes to replay the records (no snapshot), and to load the
// snapshot. bench/heap measures the same from outside the process.
func BenchmarkShardState(b *testing.B) {
	per := *statePerPart
	perFile := statePartitions * per
	files := max(*stateBatches/perFile, 1)
	batches := float64(files * perFile)
	for range b.N {
		// The heap, with a log that keeps no body.
		mem := &metalogtest.Memory{Discard: true}
		c := openState(b, mem, -1)
		var ms0, ms1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms0)
		commitState(b, c, files, per)
		runtime.GC()
		runtime.ReadMemStats(&ms1)
		c.Close()
		b.ReportMetric(float64(int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc))/batches, "heapB/batch")

		// The log's bytes and replay, with a log that keeps the records.
		mem = &metalogtest.Memory{}
		c = openState(b, mem, -1)
		commitState(b, c, files, per)
		c.Close()
		l, err := mem.Open(0)
		if err != nil {
			b.Fatal(err)
		}
		var logBytes int64
		if _, err := l.Replay(context.Background(), 0, func(_ int64, body []byte) error {
			logBytes += int64(len(body))
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		l.Close()
		b.ReportMetric(float64(logBytes)/batches, "logB/batch")
		t0 := time.Now()
		c = openState(b, mem, 1)
		b.ReportMetric(float64(time.Since(t0).Nanoseconds())/batches, "replayns/batch")

		// A snapshot: the next commit's group starts one.
		commitState(b, c, 1, per)
		c.Close()
		if l, err = mem.Open(0); err != nil {
			b.Fatal(err)
		}
		_, snap, err := l.ReadSnapshot(context.Background())
		l.Close()
		if err != nil || len(snap) == 0 {
			b.Fatalf("no snapshot (%v)", err)
		}
		b.ReportMetric(float64(len(snap))/batches, "snapshotB/batch")
		t0 = time.Now()
		c = openState(b, mem, -1)
		b.ReportMetric(float64(time.Since(t0).Nanoseconds())/batches, "snapshotLoadns/batch")
		c.Close()
	}
}

func openState(b *testing.B, mem *metalogtest.Memory, snapshotEvery int64) *coordinator.Coordinator {
	c, err := coordinator.Open(coordinator.Config{NumShards: 1, Logger: quiet, OpenLog: mem.Open,
		SnapshotIntervalRecords: snapshotEvery, RetentionCheckInterval: -1, OrphanScanInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// commitState commits files files of per batches per partition to the
// topic "state", creating it first if the coordinator has no such topic.
func commitState(b *testing.B, c *coordinator.Coordinator, files, per int) {
	ctx := context.Background()
	t, ok := c.Topic("state")
	if !ok {
		var err error
		if t, err = c.CreateTopic(ctx, "state", statePartitions, nil); err != nil {
			b.Fatal(err)
		}
	}
	const size = 80 // a one-record batch of a 16-byte value
	req := diskless.CommitFileRequest{
		ObjectFormat: diskless.ObjectFormatWriteAheadMultiSegment,
		FileSize:     int64(statePartitions * per * size),
		OwnerIDs:     []int32{0},
		Batches:      make([]diskless.CommitBatch, 0, statePartitions*per),
	}
	for p := range statePartitions {
		for range per {
			req.Batches = append(req.Batches, diskless.CommitBatch{
				TopicID: t.ID, Partition: int32(p), Magic: 2,
				ByteOffset: int32(len(req.Batches) * size), ByteSize: size,
				BatchMaxTimestamp: 1_700_000_000_000, TimestampType: batch.TimestampCreateTime,
				ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, LastSequence: -1,
			})
		}
	}
	for f := range files {
		req.ObjectKey = fmt.Sprintf("wal/state-%d-%d", time.Now().UnixNano(), f)
		rs, err := c.CommitFile(ctx, 0, &req)
		if err == nil && rs[0].Err != nil {
			err = rs[0].Err
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}
