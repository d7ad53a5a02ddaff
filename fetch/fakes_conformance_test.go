package fetch

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/metalog/metalogtest"
)

// TestFakeCoordConformance holds fakeCoord, the coordinator the fetch
// tests run against, to the real one: the same files are committed to
// both (batches of random sizes, offset spans and timestamps, CreateTime
// and LogAppendTime topics, over two shards) and the same log starts
// moved (inside batches, at the high watermark), and after every step
// each FindBatches, ListOffsets and ListOffsetsFrom question over a grid
// of offsets, byte budgets and timestamps — unknown topics and partitions
// included — gets the same answer from both. The fake differs only in
// what the tests need of it (mutate, setLogStart anywhere, onFind, deaf):
// not in what it answers.
func TestFakeCoordConformance(t *testing.T) {
	ctx := t.Context()
	var now atomic.Int64
	now.Store(1_700_000_000_000)
	real, err := coordinator.Open(coordinator.Config{
		NumShards: 2, Logger: discardLogger, SnapshotIntervalRecords: -1,
		Now:                    func() time.Time { return time.UnixMilli(now.Load()) },
		RetentionCheckInterval: -1, OrphanScanInterval: -1,
		OpenLog: new(metalogtest.Memory).Open,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	fake := newFakeCoord()

	type topic struct {
		name     string
		parts    int32
		lat      bool
		realID   diskless.TopicID
		fakeID   diskless.TopicID
		maxBatch int // of any partition, for the grid
	}
	topics := []*topic{{name: "c", parts: 3}, {name: "l", parts: 2, lat: true}}
	for _, tp := range topics {
		var cfg map[string]string
		if tp.lat {
			cfg = map[string]string{"message.timestamp.type": "LogAppendTime"}
		}
		rt, err := real.CreateTopic(ctx, tp.name, tp.parts, cfg)
		if err != nil {
			t.Fatal(err)
		}
		tp.realID, tp.fakeID = rt.ID, fake.createTopic(tp.name, tp.parts)
	}

	r := rand.New(rand.NewPCG(11, 12))
	files := 0
	// commit writes one file of random batches over the topics'
	// partitions, committed to every owner shard, and adds the same
	// coordinates to the fake.
	commit := func() {
		files++
		key := fmt.Sprintf("wal/%04d", files)
		now.Add(r.Int64N(3) * 1000) // a log-append time may repeat
		type placed struct {
			t *topic
			b diskless.CommitBatch
		}
		var bs []placed
		off := int32(0)
		for range 1 + r.IntN(12) {
			tp := topics[r.IntN(len(topics))]
			b := diskless.CommitBatch{
				TopicID: tp.realID, Partition: r.Int32N(tp.parts), Magic: 2,
				ByteOffset: off, ByteSize: 61 + r.Int32N(2000), LastOffsetDelta: r.Int32N(10),
				BatchMaxTimestamp: []int64{-1, 0, 5, 1_000, 1_700_000_000_000}[r.IntN(5)] + r.Int64N(50),
				TimestampType:     batch.TimestampCreateTime, ProducerID: -1,
			}
			if tp.lat {
				b.TimestampType = batch.TimestampLogAppendTime
			}
			off += b.ByteSize
			bs = append(bs, placed{tp, b})
		}
		byShard := map[int32][]int{}
		for i, p := range bs {
			s := real.ShardFor(p.b.TopicID, p.b.Partition)
			byShard[s] = append(byShard[s], i)
		}
		var owners []int32
		for s := range byShard {
			owners = append(owners, s)
		}
		slices.Sort(owners)
		appendTime := make([]int64, len(bs))
		for _, s := range owners {
			req := &diskless.CommitFileRequest{ObjectKey: key, ObjectFormat: diskless.ObjectFormatWriteAheadMultiSegment,
				FileSize: int64(off), OwnerIDs: owners}
			for _, i := range byShard[s] {
				req.Batches = append(req.Batches, bs[i].b)
			}
			res, err := real.CommitFile(ctx, s, req)
			if err != nil {
				t.Fatal(err)
			}
			for j, i := range byShard[s] {
				if res[j].Err != nil {
					t.Fatalf("commit: %v", res[j].Err)
				}
				appendTime[i] = res[j].LogAppendTime
			}
		}
		for i, p := range bs {
			fake.mu.Lock()
			hwm := fake.mu.byName[p.t.name].parts[p.b.Partition].hwm
			fake.mu.Unlock()
			fake.add(p.t.name, p.b.Partition, diskless.RunCoordinate{
				ObjectKey: key, ObjectFormat: diskless.ObjectFormatWriteAheadMultiSegment, FileSize: int64(off),
				ByteOffset: int64(p.b.ByteOffset), ByteSize: p.b.ByteSize,
				BaseOffset: hwm, LastOffset: hwm + int64(p.b.LastOffsetDelta), TimestampType: p.b.TimestampType,
				LogAppendTime: appendTime[i], BatchMaxTimestamp: p.b.BatchMaxTimestamp,
			})
			p.t.maxBatch = max(p.t.maxBatch, int(p.b.ByteSize))
		}
	}
	// trim moves one partition's log start forward on both.
	trim := func() {
		tp := topics[r.IntN(len(topics))]
		p := r.Int32N(tp.parts)
		fake.mu.Lock()
		fp := fake.mu.byName[tp.name].parts[p]
		low, high := fp.logStart, fp.hwm
		fake.mu.Unlock()
		to := low + r.Int64N(high-low+1)
		got, err := real.DeleteRecords(ctx, diskless.TopicPartition{TopicID: tp.realID, Partition: p}, to)
		if err != nil || got != to {
			t.Fatalf("DeleteRecords to %d: %d, %v", to, got, err)
		}
		fake.setLogStart(tp.name, p, to)
	}
	// compare asks both every question of the grid.
	compare := func(step string) {
		t.Helper()
		type q struct {
			realTP, fakeTP diskless.TopicPartition
			what           string
			hwm            int64
			maxBatch       int
		}
		var qs []q
		for _, tp := range topics {
			for p := range tp.parts + 1 { // the last is past the topic's partitions
				rtp := diskless.TopicPartition{TopicID: tp.realID, Partition: p}
				fake.mu.Lock()
				hwm := int64(0)
				if p < tp.parts {
					hwm = fake.mu.byName[tp.name].parts[p].hwm
				}
				fake.mu.Unlock()
				qs = append(qs, q{rtp, diskless.TopicPartition{TopicID: tp.fakeID, Partition: p}, fmt.Sprintf("%s/%d", tp.name, p), hwm, tp.maxBatch})
			}
		}
		qs = append(qs, q{diskless.TopicPartition{TopicID: diskless.TopicID{9}}, diskless.TopicPartition{TopicID: diskless.TopicID{9}}, "unknown topic", 3, 100},
			q{diskless.TopicPartition{TopicID: topics[0].realID, Partition: -1}, diskless.TopicPartition{TopicID: topics[0].fakeID, Partition: -1}, "partition -1", 3, 100})
		timestamps := []int64{diskless.ListOffsetsLatest, diskless.ListOffsetsEarliest, diskless.ListOffsetsMaxTimestamp, -4, math.MinInt64,
			0, 1, 4, 5, 30, 54, 1_000, 1_020, 1_049, 1_700_000_000_000, 1_700_000_000_049, now.Load() - 3_000, now.Load(), now.Load() + 1, math.MaxInt64}
		for _, q := range qs {
			for off := int64(-1); off <= q.hwm+1; off++ {
				for _, mb := range []int32{-1, 0, 1, int32(q.maxBatch), int32(2*q.maxBatch + 1), 1 << 20} {
					rr := real.FindBatches(ctx, []diskless.FindBatchesRequest{{TopicID: q.realTP.TopicID, Partition: q.realTP.Partition, Offset: off, MaxBytes: mb}})[0]
					fr := fake.FindBatches(ctx, []diskless.FindBatchesRequest{{TopicID: q.fakeTP.TopicID, Partition: q.fakeTP.Partition, Offset: off, MaxBytes: mb}})[0]
					if len(rr.Runs) == 0 && len(fr.Runs) == 0 {
						rr.Runs, fr.Runs = nil, nil
					}
					if !reflect.DeepEqual(rr, fr) {
						t.Fatalf("%s: %s: FindBatches(%d, %d bytes):\nreal %+v\nfake %+v", step, q.what, off, mb, rr, fr)
					}
				}
				for _, ts := range timestamps {
					rr := real.ListOffsetsFrom(ctx, q.realTP, ts, off)
					fr := fake.ListOffsetsFrom(ctx, q.fakeTP, ts, off)
					if !sameListOffsets(rr, fr) {
						t.Fatalf("%s: %s: ListOffsetsFrom(%d, from %d):\nreal %+v %+v\nfake %+v %+v", step, q.what, ts, off, rr, rr.Candidate, fr, fr.Candidate)
					}
				}
			}
			for _, ts := range timestamps {
				rr, fr := real.ListOffsets(ctx, q.realTP, ts), fake.ListOffsets(ctx, q.fakeTP, ts)
				if !sameListOffsets(rr, fr) {
					t.Fatalf("%s: %s: ListOffsets(%d):\nreal %+v %+v\nfake %+v %+v", step, q.what, ts, rr, rr.Candidate, fr, fr.Candidate)
				}
			}
		}
	}

	compare("empty")
	for step := range 40 {
		if step%5 == 4 {
			trim()
		} else {
			commit()
		}
		compare(fmt.Sprintf("step %d", step))
	}
}

func sameListOffsets(a, b diskless.ListOffsetsResult) bool {
	ac, bc := a.Candidate, b.Candidate
	a.Candidate, b.Candidate = nil, nil
	return reflect.DeepEqual(a, b) && (ac == nil) == (bc == nil) && (ac == nil || *ac == *bc)
}
