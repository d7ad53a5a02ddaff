package bench

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
	"github.com/diskless-sidecar/sidecar/metalog/kafkalog"
	"github.com/diskless-sidecar/sidecar/objstore/objstoretest"
)

// replayBatches is the size of BenchmarkReplayKafka's log. The default
// keeps `make bench-ci` (every benchmark once) short; bench/RESULTS.md's
// figure is of -replay-batches=10000000.
var replayBatches = flag.Int("replay-batches", 1_000_000, "batches committed before BenchmarkReplayKafka replays them (a multiple of 1000)")

// BenchmarkReplayKafka measures a takeover of a coordinator shard whose
// metadata log is a partition of a 3-broker Apache Kafka on this machine
// (RF 3, min.insync.replicas 2): -replay-batches batches committed as
// files of 1000 (over 100 partitions, idempotent producers) by 8
// concurrent committers, then, per iteration, a new Topic handle and
// coordinator.Open — the takeover's claim, the read of the whole
// partition through the validity rule and the rebuild of the index —
// timed until Open returns. No snapshot is taken (10,000 files stay
// below the default snapshot interval of 100,000 records), so every batch
// is replayed from Kafka records. Reported: seconds per replay and
// batches replayed per second.
func BenchmarkReplayKafka(b *testing.B) {
	if *replayBatches < commitBatchesPerFile || *replayBatches%commitBatchesPerFile != 0 {
		b.Fatalf("-replay-batches %d: want a positive multiple of %d", *replayBatches, commitBatchesPerFile)
	}
	c := kafkatest.Start(b, kafkatest.Options{Brokers: 3})
	snaps := objstoretest.NewMemory()
	open := func() (*kafkalog.Topic, *coordinator.Coordinator) {
		tp, err := kafkalog.Open(context.Background(), kafkalog.Config{
			Brokers:    strings.Split(c.BootstrapServers(), ","),
			Topic:      "replay",
			Partitions: 1,
			Snapshots:  snaps,
			Logger:     quiet,
		})
		if err != nil {
			b.Fatal(err)
		}
		co, err := coordinator.Open(coordinator.Config{NumShards: 1, OpenLog: tp.OpenLog, Logger: quiet,
			SnapshotIntervalRecords: -1, RetentionCheckInterval: -1, OrphanScanInterval: -1})
		if err != nil {
			tp.Close()
			b.Fatal(err)
		}
		return tp, co
	}

	// Build the log: committers in parallel, so that the shard groups
	// several files per Append, as under load.
	t0 := time.Now()
	tp, co := open()
	f := &commitFixture{c: co}
	const committers = 8
	files := *replayBatches / commitBatchesPerFile
	var (
		wg     sync.WaitGroup
		first  diskless.Topic
		firstN int
	)
	errs := make(chan error, committers)
	for w := range committers {
		s := f.newStream(b, fmt.Sprintf("t%d", w), 100)
		n := files / committers
		if w < files%committers {
			n++
		}
		if w == 0 {
			first, firstN = s.topic, n
		}
		wg.Go(func() {
			for range n {
				rs, err := co.CommitFile(context.Background(), 0, s.next())
				if err == nil && rs[0].Err != nil {
					err = rs[0].Err
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	if err := co.Close(); err != nil {
		b.Fatal(err)
	}
	tp.Close()
	b.Logf("committed %d batches in %d files in %v", *replayBatches, files, time.Since(t0).Round(time.Millisecond))

	b.ResetTimer()
	var total time.Duration
	for b.Loop() {
		start := time.Now()
		tp, co := open()
		total += time.Since(start)
		b.StopTimer()
		// Everything is back: partition 0 of the first committer's topic
		// got 10 of every 100 batches of its files, 10 records each.
		want := int64(firstN) * commitBatchesPerFile / 100 * 10
		if r := co.ListOffsets(context.Background(), diskless.TopicPartition{TopicID: first.ID, Partition: 0}, diskless.ListOffsetsLatest); r.Err != nil || r.Offset != want {
			b.Fatalf("after the replay: high watermark %d (%v), want %d", r.Offset, r.Err, want)
		}
		co.Close()
		tp.Close()
		b.StartTimer()
	}
	per := total.Seconds() / float64(b.N)
	b.ReportMetric(per, "s/replay")
	b.ReportMetric(float64(*replayBatches)/per, "batches/s")
}
