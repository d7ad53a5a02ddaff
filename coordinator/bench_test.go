package coordinator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/metalog/metalogtest"
)

// BenchmarkCommitFile measures one CommitFile of 100 idempotent batches
// over 10 partitions through the shard driver, over an in-memory log that
// keeps no body (no fsync, no copy, no growing heap).
func BenchmarkCommitFile(b *testing.B) {
	c, err := Open(Config{NumShards: 1, SnapshotIntervalRecords: -1, OpenLog: (&metalogtest.Memory{Discard: true}).Open, Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	top, err := c.CreateTopic(context.Background(), "t", 10, nil)
	if err != nil {
		b.Fatal(err)
	}
	seq := make([]int32, 10)
	reqs := make([]*diskless.CommitFileRequest, b.N)
	for i := range reqs {
		var batches []diskless.CommitBatch
		for j := range 100 {
			p := int32(j % 10)
			batches = append(batches, idem(top, p, int64(p), 0, seq[p], 5))
			seq[p] += 5
		}
		reqs[i] = commitRequest(c, nextKey(), batches...)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := c.CommitFile(context.Background(), 0, reqs[i]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFindBatches looks up random offsets in a partition index of 1M
// batches (each its own run: 1M index entries), 1 MiB per answer, and
// reports the index's memory per entry.
func BenchmarkFindBatches(b *testing.B) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	st, p := benchIndex(b, batch.TimestampCreateTime, false)
	runtime.GC()
	runtime.ReadMemStats(&after)
	heapPerBatch := float64(after.HeapAlloc-before.HeapAlloc) / float64(p.runs.len())
	r := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		res := st.findBatches(p, r.Int64N(p.hwm), 1<<20, false)
		if res.Err != nil || len(res.Runs) == 0 {
			b.Fatal(res.Err)
		}
	}
	b.ReportMetric(heapPerBatch, "heapB/batch")
}

// benchIndex returns a state with one published partition of 1000 files
// × 1000 batches (10 records, 16 KiB each) of type tsType, each its own
// run (16 bytes apart in its file, as refused batches leave them: an
// index of 1M entries), whose max
// timestamps (CreateTime) or append times (LogAppendTime) are the file's
// number: rising through the index, equal within a file. With outlier, a
// file of one CreateTime batch at 2^40 ms comes first: the candidate of
// every lookup, so that a lookup past it takes ListOffsetsFrom's slow
// path, as fetch's TestListOffsetsWalkCost does.
func benchIndex(b *testing.B, tsType int8, outlier bool) (*state, *partition) {
	const files, perFile = 1000, 1000
	st := newState(0, DefaultProducerIDExpirationMs, discardLogger())
	tid := diskless.TopicID{1}
	if err := st.apply(&records.PartitionCreated{TopicID: tid, TopicName: "t"}); err != nil {
		b.Fatal(err)
	}
	p := st.partitions[diskless.TopicPartition{TopicID: tid, Partition: 0}]
	commit := func(bs []records.CommittedBatch) {
		rec := &records.FileCommitted{ObjectKey: nextKey(), ObjectFormat: 1, FileSize: 1 << 30,
			Topics: []records.FileTopic{{TopicID: tid, Partitions: []records.FilePartition{{Batches: bs}}}}}
		if err := st.apply(rec); err != nil {
			b.Fatal(err)
		}
	}
	if outlier {
		commit([]records.CommittedBatch{{Magic: 2, ByteSize: 16384, AssignedLastOffset: 9, BatchMaxTimestamp: 1 << 40, ProducerID: -1}})
	}
	for f := range files {
		bs := make([]records.CommittedBatch, perFile)
		for i := range bs {
			base := p.hwm + int64(i)*10
			bs[i] = records.CommittedBatch{Magic: 2, ByteOffset: int32(i) * 16400, ByteSize: 16384, AssignedBaseOffset: base,
				AssignedLastOffset: base + 9, LogAppendTimestamp: int64(f), BatchMaxTimestamp: int64(f), TimestampType: tsType,
				ProducerID: -1}
		}
		commit(bs)
	}
	p.visible, p.visHWM = true, p.hwm
	return st, p
}

// BenchmarkListOffsetsFrom measures timestamp lookups in a partition index
// of 1M batches (benchIndex): ListOffsets, for comparison; ListOffsetsFrom
// from random offsets with random targets (mostly its O(log n) path, as
// no earlier batch reaches the target); and its worst case, from the
// batch after a candidate holding the largest timestamp at the start of
// the index, as fetch asks when the log start lies inside the candidate
// or its header is false: the rest of the first chunk (4095 batches) read
// one by one, 244 chunk summaries, one binary search in the last chunk.
// fetch's lookups used to page through the coordinates instead, all of
// them for a max timestamp no later batch reaches
// (TestListOffsetsWalkCost).
func BenchmarkListOffsetsFrom(b *testing.B) {
	for _, bc := range []struct {
		name    string
		tsType  int8
		outlier bool
		from    func(r *rand.Rand, hwm int64) int64
		ts      func(r *rand.Rand) int64
		want    int64 // the candidate's base offset, −1: any
	}{
		{name: "ListOffsets/timestamp", ts: func(r *rand.Rand) int64 { return r.Int64N(1000) }, want: -1},
		{name: "ListOffsets/max", ts: func(*rand.Rand) int64 { return diskless.ListOffsetsMaxTimestamp }, want: 999 * 10_000},
		{name: "random/timestamp", from: func(r *rand.Rand, hwm int64) int64 { return r.Int64N(hwm) },
			ts: func(r *rand.Rand) int64 { return r.Int64N(1000) }, want: -1},
		{name: "random/max", from: func(r *rand.Rand, hwm int64) int64 { return r.Int64N(hwm) },
			ts: func(*rand.Rand) int64 { return diskless.ListOffsetsMaxTimestamp }, want: -1},
		{name: "past the candidate/timestamp", outlier: true, from: func(*rand.Rand, int64) int64 { return 10 },
			ts: func(*rand.Rand) int64 { return 999 }, want: 10 + 999*10_000},
		{name: "past the candidate/max", outlier: true, from: func(*rand.Rand, int64) int64 { return 10 },
			ts: func(*rand.Rand) int64 { return diskless.ListOffsetsMaxTimestamp }, want: 10 + 999*10_000},
		{name: "past the candidate/max/LogAppendTime", tsType: batch.TimestampLogAppendTime, outlier: true,
			from: func(*rand.Rand, int64) int64 { return 10 },
			ts:   func(*rand.Rand) int64 { return diskless.ListOffsetsMaxTimestamp }, want: 10 + 999*10_000},
	} {
		b.Run(bc.name, func(b *testing.B) {
			st, p := benchIndex(b, bc.tsType, bc.outlier)
			r := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				var res diskless.ListOffsetsResult
				if bc.from == nil {
					res = st.listOffsets(p, bc.ts(r))
				} else {
					res = st.listOffsetsFrom(p, bc.ts(r), bc.from(r, p.hwm))
				}
				if res.Err != nil || res.Candidate == nil || (bc.want >= 0 && res.Candidate.BaseOffset != bc.want) {
					b.Fatalf("%+v, candidate %+v; want the batch at %d", res, res.Candidate, bc.want)
				}
			}
		})
	}
}

// BenchmarkSnapshot measures, for a shard of 2M batches (1000 partitions,
// 20 000 files), what a snapshot costs the shard driver (freeze: the copy
// taken on the commit path) against the encoding that now runs on the
// snapshot goroutine (encode).
func BenchmarkSnapshot(b *testing.B) {
	const partitions, files, perFile = 1000, 20_000, 100
	st := newState(0, DefaultProducerIDExpirationMs, discardLogger())
	tid := diskless.TopicID{1}
	for p := range int32(partitions) {
		if err := st.apply(&records.PartitionCreated{TopicID: tid, TopicName: "t", Partition: p}); err != nil {
			b.Fatal(err)
		}
	}
	for f := range files {
		rec := &records.FileCommitted{ObjectKey: nextKey(), ObjectFormat: 1, FileSize: 1 << 30, OwnerIDs: []int32{0}}
		ft := records.FileTopic{TopicID: tid}
		for i := range perFile {
			p := st.partitions[diskless.TopicPartition{TopicID: tid, Partition: int32((f*perFile + i) % partitions)}]
			base := p.hwm
			for _, fp := range ft.Partitions {
				if fp.Partition == p.tp.Partition {
					base = fp.Batches[len(fp.Batches)-1].AssignedLastOffset + 1
				}
			}
			cb := records.CommittedBatch{Magic: 2, ByteOffset: int32(i) * 16384, ByteSize: 16384,
				AssignedBaseOffset: base, AssignedLastOffset: base + 9, LogAppendTimestamp: int64(f), BatchMaxTimestamp: int64(f),
				ProducerID: int64(i % 10), ProducerEpoch: 0, BaseSequence: int32(base), LastSequence: int32(base + 9)}
			found := false
			for j := range ft.Partitions {
				if ft.Partitions[j].Partition == p.tp.Partition {
					ft.Partitions[j].Batches = append(ft.Partitions[j].Batches, cb)
					found = true
				}
			}
			if !found {
				ft.Partitions = append(ft.Partitions, records.FilePartition{Partition: p.tp.Partition, Batches: []records.CommittedBatch{cb}})
			}
		}
		rec.Topics = []records.FileTopic{ft}
		if err := st.apply(rec); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("freeze", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			st.freeze()
		}
	})
	b.Run("encode", func(b *testing.B) {
		fz := st.freeze()
		buf := fz.appendTo(nil)
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			buf = fz.appendTo(buf[:0])
		}
	})
}

// BenchmarkCommitIntoIndex measures committing a file of 1000 batches to
// one partition through the shard driver (no fsync) while the partition
// holds a steady number of index entries (retention drops as many as each
// file adds, outside the timing): the cost of an append must not grow with
// the index. The batches lie 10 bytes apart in their files, as refused
// batches leave them, so that each is a run of its own: 1000 entries per
// file, 4M in the index. Besides the mean it reports the slowest file, where a flat
// index that regrows shows its copy.
func BenchmarkCommitIntoIndex(b *testing.B) {
	for _, size := range []int{0, 4 << 20} {
		b.Run(fmt.Sprintf("batches=%d", size), func(b *testing.B) {
			c, err := Open(Config{NumShards: 1, SnapshotIntervalRecords: -1,
				OpenLog: (&metalogtest.Memory{Discard: true}).Open, Logger: discardLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			top, err := c.CreateTopic(context.Background(), "t", 1, nil)
			if err != nil {
				b.Fatal(err)
			}
			tp := diskless.TopicPartition{TopicID: top.ID, Partition: 0}
			// Fill the index directly (the replay path), in records of at
			// most MaxCommitBatches, without filling the answer cache.
			s := c.shards[0]
			s.mu.Lock()
			st := s.mu.st
			p := st.partitions[tp]
			for left := size; left > 0; {
				n := min(left, diskless.MaxCommitBatches)
				left -= n
				bs := make([]records.CommittedBatch, n)
				for i := range bs {
					base := p.hwm + int64(i)
					bs[i] = records.CommittedBatch{Magic: 2, ByteOffset: int32(i) * 110, ByteSize: 100, AssignedBaseOffset: base,
						AssignedLastOffset: base, LogAppendTimestamp: 1, BatchMaxTimestamp: 1, ProducerID: -1}
				}
				rec := &records.FileCommitted{ObjectKey: nextKey(), ObjectFormat: 1, FileSize: 1 << 30, OwnerIDs: []int32{0},
					Topics: []records.FileTopic{{TopicID: top.ID, Partitions: []records.FilePartition{{Batches: bs}}}}}
				if err := st.apply(rec); err != nil {
					s.mu.Unlock()
					b.Fatal(err)
				}
			}
			p.visHWM, p.visLogStart = p.hwm, p.logStart
			s.mu.Unlock()

			batches := make([]diskless.CommitBatch, 1000)
			for i := range batches {
				batches[i] = plain(top, 0, 1)
				batches[i].ByteOffset = int32(i * 110)
			}
			var worst time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				req := commitRequest(c, nextKey(), batches...)
				start := time.Now()
				if _, err := c.CommitFile(context.Background(), 0, req); err != nil {
					b.Fatal(err)
				}
				worst = max(worst, time.Since(start))
				b.StopTimer()
				if size > 0 {
					if _, err := c.DeleteRecords(context.Background(), tp, c.FindBatches(context.Background(),
						[]diskless.FindBatchesRequest{{TopicID: top.ID, Offset: -1}})[0].HighWatermark-int64(size)); err != nil {
						b.Fatal(err)
					}
				} else if _, err := c.DeleteRecords(context.Background(), tp, -1); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(worst.Microseconds()), "max-µs/file")
		})
	}
}

// BenchmarkClosedFiles runs the whole life of 100 000 files through a
// shard state — committed 250 ms of log time apart (the default commit
// interval), released at once by a log start move, closed (record 106) —
// and reports the heap the file table keeps for them (heapB/file: retained
// bytes over all 100 000), its size at the end (slots, keys) and the
// snapshot's (snapshotB). Keys are
// as long as real ones ("wal/<cluster id>/<32 hex digits>", 59 bytes). The
// timed loop goes on with the same life, one file per iteration.
func BenchmarkClosedFiles(b *testing.B) {
	const files, stepMs = 100_000, 250
	st := newState(0, DefaultProducerIDExpirationMs, discardLogger())
	tid := diskless.TopicID{1}
	if err := st.apply(&records.PartitionCreated{TopicID: tid, TopicName: "t"}); err != nil {
		b.Fatal(err)
	}
	p := st.partitions[diskless.TopicPartition{TopicID: tid, Partition: 0}]
	n := 0
	life := func() {
		key := fmt.Sprintf("wal/AAAAAAAAAAAAAAAAAAAAAA/%032x", n)
		t := int64(1_700_000_000_000 + n*stepMs)
		n++
		recs := []records.Record{
			&records.FileCommitted{ObjectKey: key, ObjectFormat: 1, FileSize: 1 << 23, OwnerIDs: []int32{0},
				Topics: []records.FileTopic{{TopicID: tid, Partitions: []records.FilePartition{{Batches: []records.CommittedBatch{{Magic: 2, ByteSize: 1 << 23,
					AssignedBaseOffset: p.hwm, AssignedLastOffset: p.hwm, LogAppendTimestamp: t, BatchMaxTimestamp: t, ProducerID: -1}}}}}}},
			&records.RecordsDeleted{TopicID: tid, NewLogStartOffset: p.hwm + 1},
			&records.FileDeleted{ObjectKey: key},
		}
		for _, r := range recs {
			if err := st.apply(r); err != nil {
				b.Fatal(err)
			}
		}
	}
	life() // the partition's first index chunk and the maps exist from here
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range files {
		life()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	slots, keys := len(st.files), len(st.fileByKey)
	snap := len(st.appendSnapshot(nil))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		life()
	}
	// After the loop: ResetTimer drops reported metrics.
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/files, "heapB/file")
	b.ReportMetric(float64(slots), "slots")
	b.ReportMetric(float64(keys), "keys")
	b.ReportMetric(float64(snap), "snapshotB")
}
