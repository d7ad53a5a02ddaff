package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/metalog"
	"github.com/diskless-sidecar/sidecar/metalog/metalogtest"
)

// commitBatchesPerFile is the size of every file committed: 1000 batches,
// spread round-robin over the case's partitions (a default 8 MiB file of
// 8 KiB batches).
const commitBatchesPerFile = 1000

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// countingLog counts Appends of the embedded file log: each is one group of
// records written with one fsync.
type countingLog struct {
	metalog.Log
	appends *atomic.Int64
}

func (l countingLog) Append(ctx context.Context, b [][]byte) error {
	l.appends.Add(1)
	return l.Log.Append(ctx, b)
}

// commitFixture is a coordinator with one shard and, per committer, one
// topic of the case's partitions with one idempotent producer per
// partition, so that concurrent committers never race on one producer's
// sequence.
type commitFixture struct {
	c       *coordinator.Coordinator
	appends atomic.Int64
}

// stream is one committer's topic and its reusable commit request.
type stream struct {
	topic diskless.Topic
	seq   []int32
	req   diskless.CommitFileRequest
	files int
}

func newCommitFixture(b *testing.B, durable bool) *commitFixture {
	f := &commitFixture{}
	cfg := coordinator.Config{NumShards: 1, Logger: quiet, SnapshotIntervalRecords: -1}
	if durable {
		dir := b.TempDir()
		cfg.OpenLog = func(shard int32) (metalog.Log, error) {
			l, err := metalog.OpenFileLog(filepath.Join(dir, fmt.Sprintf("shard-%d", shard)), quiet)
			if err != nil {
				return nil, err
			}
			return countingLog{Log: l, appends: &f.appends}, nil
		}
	} else {
		// An in-memory log that keeps no body: the coordinator's decision
		// path alone.
		cfg.OpenLog = (&metalogtest.Memory{Discard: true}).Open
	}
	c, err := coordinator.Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	f.c = c
	return f
}

func (f *commitFixture) newStream(b *testing.B, name string, partitions int) *stream {
	t, err := f.c.CreateTopic(context.Background(), name, int32(partitions), nil)
	if err != nil {
		b.Fatal(err)
	}
	s := &stream{topic: t, seq: make([]int32, partitions)}
	s.req = diskless.CommitFileRequest{
		ObjectFormat: diskless.ObjectFormatWriteAheadMultiSegment,
		FileSize:     commitBatchesPerFile * 8192,
		OwnerIDs:     []int32{0},
		Batches:      make([]diskless.CommitBatch, commitBatchesPerFile),
	}
	for i := range s.req.Batches {
		p := i % partitions
		s.req.Batches[i] = diskless.CommitBatch{
			TopicID: t.ID, Partition: int32(p), Magic: 2,
			ByteOffset: int32(i * 8192), ByteSize: 8192, LastOffsetDelta: 9,
			BatchMaxTimestamp: 1_700_000_000_000, TimestampType: batch.TimestampCreateTime,
			ProducerID: int64(1000 + p), ProducerEpoch: 0,
		}
	}
	return s
}

// next turns the stream's request into its next file: a fresh object key
// and, per batch, the next sequence of its producer. The coordinator keeps
// nothing of a request once CommitFile returns, so reusing it is safe and
// keeps the generator's allocations out of the figures.
func (s *stream) next() *diskless.CommitFileRequest {
	s.files++
	s.req.ObjectKey = fmt.Sprintf("wal/%s-%d", s.topic.Name, s.files)
	for i := range s.req.Batches {
		bt := &s.req.Batches[i]
		bt.BaseSequence = s.seq[bt.Partition]
		bt.LastSequence = bt.BaseSequence + 9
		s.seq[bt.Partition] += 10
	}
	return &s.req
}

// BenchmarkCommit measures one coordinator shard deciding files of 1000
// batches: for each batch it checks the producer's epoch and sequence,
// assigns offsets from the high watermark and records an index entry; per
// file it encodes the DisklessFileCommittedRecord and appends it to the
// metadata log. "memory" uses a log that keeps nothing; "durable" the
// embedded log with its fsync, with 1 committer (one fsync per file) and
// with 8 concurrent committers (group commit: several files per fsync).
// Reported: batches/s, allocs per batch, and for the durable log fsyncs
// per file.
func BenchmarkCommit(b *testing.B) {
	for _, parts := range []int{1, 100, 1000} {
		for _, mode := range []struct {
			name       string
			durable    bool
			committers int
		}{{"memory", false, 1}, {"durable", true, 1}, {"durable-8-committers", true, 8}} {
			b.Run(fmt.Sprintf("partitions=%d/%s", parts, mode.name), func(b *testing.B) {
				f := newCommitFixture(b, mode.durable)
				streams := make([]*stream, mode.committers)
				for i := range streams {
					streams[i] = f.newStream(b, fmt.Sprintf("t%d", i), parts)
				}
				var (
					left   atomic.Int64
					errs   = make(chan error, mode.committers)
					ms0    runtime.MemStats
					ms1    runtime.MemStats
					before = f.appends.Load()
				)
				left.Store(int64(b.N))
				runtime.ReadMemStats(&ms0)
				b.ResetTimer()
				for _, s := range streams {
					go func() {
						for left.Add(-1) >= 0 {
							rs, err := f.c.CommitFile(context.Background(), 0, s.next())
							if err == nil && rs[0].Err != nil {
								err = rs[0].Err
							}
							if err != nil {
								errs <- err
								return
							}
						}
						errs <- nil
					}()
				}
				for range streams {
					if err := <-errs; err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				runtime.ReadMemStats(&ms1)
				batches := float64(b.N) * commitBatchesPerFile
				b.ReportMetric(batches/b.Elapsed().Seconds(), "batches/s")
				b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/batches, "allocs/batch")
				if mode.durable {
					b.ReportMetric(float64(f.appends.Load()-before)/float64(b.N), "fsyncs/file")
				}
			})
		}
	}
}
