package fetch

// Counted tests of catch-up reads (issue 9, defect 3): what readers of
// data older than the cache's reach cost in GETs and bytes. They use only
// costEnv and Fetch, so that they run unchanged against the code before
// catch-up reads (which read each partition's range with its own GET).

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/diskless"
)

// catchUpFixture uploads, as another sidecar (nothing put into the cache),
// objects old objects each holding batches batches of 8,072 bytes for
// each of topic "t"'s partitions, committed at t = 0…objects−1 s, then
// fills the cache (8 blocks of 64 KiB) with fresher data this sidecar
// uploaded (topic "hot": 8 objects of one block), so the old data is
// beyond the cache's reach.
func catchUpFixture(t *testing.T, partitions int32, objects, batches int) (*costEnv, int64) {
	t.Helper()
	const blockSize = 64 << 10
	e := newCostEnv(t, cache.Config{BlockBytes: blockSize, MaxBytes: 8 * blockSize}, map[string]int32{"t": partitions, "hot": 1})
	parts := make([]int32, partitions)
	for i := range parts {
		parts[i] = int32(i)
	}
	var size int64
	for i := range objects {
		e.at(int64(i) * 1000)
		_, n := e.produce("t", false, parts, batches)
		size += int64(n)
	}
	for i := range 8 { // 8 objects of 64,576 bytes: one block each, the cache full
		e.at(int64(objects+i) * 1000)
		e.produce("hot", true, []int32{0}, 8)
	}
	e.at(int64(objects+8) * 1000)
	return e, size
}

// catchUpConsumer reads partitions of "t" from start[p] to the high
// watermark, one fetch of every partition at a time, partitionMaxBytes per
// partition, as a client catching up does, calling after (if set) after
// each fetch. It returns the batches read.
func catchUpConsumer(t *testing.T, e *costEnv, h *Handler, start []int64, partitionMaxBytes int32, hwm int64, after func()) int {
	t.Helper()
	top, _ := e.coord.Topic("t")
	pos := append([]int64(nil), start...)
	total := 0
	for fetches := 0; ; fetches++ {
		if fetches > 10_000 {
			t.Fatal("the consumer makes no progress")
		}
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxBytes, req.SessionEpoch = 16, 50<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = top.ID
		for p, off := range pos {
			if off >= hwm {
				continue
			}
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = int32(p), off, partitionMaxBytes, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(rt.Partitions) == 0 {
			return total
		}
		req.Topics = append(req.Topics, rt)
		for _, p := range flat(h.Fetch(context.Background(), req)) {
			if p.ErrorCode != 0 {
				t.Fatalf("partition %d at %d: error %d", p.Partition, pos[p.Partition], p.ErrorCode)
			}
			bases := baseOffsets(t, p.RecordBatches)
			if len(bases) == 0 || bases[0] > pos[p.Partition] {
				t.Fatalf("partition %d at %d: batches %v", p.Partition, pos[p.Partition], bases)
			}
			pos[p.Partition] = bases[len(bases)-1] + 1 // one record per batch
			total += len(bases)
		}
		if after != nil {
			after()
		}
	}
}

// TestCatchUpCostConsumersOfOldData: three consumers read the same old
// data (20 objects of two partitions) at the same time, from the start:
// each object is read from the store once, whole (one GET), and shared.
// Before catch-up reads each consumer's fetch read each object with its
// own GET (three per object, more when a partition's range spans a fetch).
func TestCatchUpCostConsumersOfOldData(t *testing.T) {
	const objects = 20
	e, size := catchUpFixture(t, 2, objects, 10)
	before := e.snapshot()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if n := catchUpConsumer(t, e, e.h, []int64{0, 0}, 6*8072, objects*10, nil); n != 2*objects*10 {
				t.Errorf("read %d batches, want %d", n, 2*objects*10)
			}
		})
	}
	wg.Wait()
	got := e.since(before)
	if got.GETs != objects || got.Bytes != size || got.Evictions != 0 {
		t.Fatalf("three consumers of %d old objects (%d bytes) cost %d GETs, %d bytes, %d evictions; "+
			"want one GET of each whole object and nothing evicted", objects, size, got.GETs, got.Bytes, got.Evictions)
	}
	e.hotStillCached(t)
}

// TestCatchUpCostEightPartitionsBehind: one consumer eight partitions
// behind, their positions drifting across object boundaries (each fetch
// takes 6 of each partition's 10 batches per object, partition p starting
// at offset p): each of the 12 objects is read once, whole, whatever fetch
// first needs it — not once per partition per object.
func TestCatchUpCostEightPartitionsBehind(t *testing.T) {
	const objects, batches = 12, 10
	e, size := catchUpFixture(t, 8, objects, batches)
	start := make([]int64, 8)
	for p := range start {
		start[p] = int64(p)
	}
	before := e.snapshot()
	if n := catchUpConsumer(t, e, e.h, start, 6*8072, objects*batches, nil); n != 8*objects*batches-28 {
		t.Fatalf("read %d batches, want %d", n, 8*objects*batches-28)
	}
	got := e.since(before)
	if got.GETs != objects || got.Bytes != size || got.Evictions != 0 {
		t.Fatalf("one consumer 8 partitions behind over %d objects (%d bytes) cost %d GETs, %d bytes, %d evictions; "+
			"want one GET of each whole object", objects, size, got.GETs, got.Bytes, got.Evictions)
	}
	e.hotStillCached(t)
}

// TestCatchUpCostTailReader: a consumer at the head reading what this
// sidecar uploaded costs no GET; reading what another sidecar uploaded, one
// GET per block, through the main LRU (data within reach is never a
// catch-up read).
func TestCatchUpCostTailReader(t *testing.T) {
	const blockSize = 64 << 10
	e := newCostEnv(t, cache.Config{BlockBytes: blockSize, MaxBytes: 8 * blockSize}, map[string]int32{"t": 2})
	for i := range 6 {
		e.at(int64(i) * 1000)
		before := e.snapshot()
		own := i%2 == 0
		_, n := e.produce("t", own, []int32{0, 1}, 4) // 64,576 bytes: 1 block
		records(t, e.fetch(e.h, "t", int64(i)*4, 0, 1), 4)
		got := e.since(before)
		want := int64(1)
		if own {
			want = 0
		}
		if got.GETs != want || got.Bytes != want*int64(n) {
			t.Fatalf("object %d (put: %v): the tail read cost %d GETs, %d bytes; want %d, %d", i, own, got.GETs, got.Bytes, want, want*int64(n))
		}
	}
}

// hotStillCached checks that the fresh data the fixture put is still
// cached: catch-up reads evicted none of it.
func (e *costEnv) hotStillCached(t *testing.T) {
	t.Helper()
	before := e.snapshot()
	records(t, e.fetch(e.h, "hot", 0, 0), 64)
	if got := e.since(before); got.GETs != 0 {
		t.Fatalf("reading the hot data after the catch-up cost %d GETs: it was evicted", got.GETs)
	}
}

// TestCatchUpCostSegments: a consumer lagging over consolidated data — 16
// files of each partition rewritten into segment objects of 1 MiB, beyond
// the cache's reach — reads each segment object with one GET, whole, its
// index and data together, and its fetches of 100 KB are served from it:
// GETs per GiB fetched are one per segment's size (with the default 128 MiB
// segments and 256 MiB catch-up segment, 8 per GiB), not one per fetch;
// the hot data stays cached. The catch-up segment holds two segments (the
// defaults' ratio): with one partition, the next segment is read ahead;
// with two read at once, each partition's segment stays until its reader
// is done with it (cache.Object.SequentialEnd).
func TestCatchUpCostSegments(t *testing.T) {
	for _, parts := range []int32{1, 2} {
		t.Run(fmt.Sprintf("%d partitions", parts), func(t *testing.T) {
			const blockSize = 64 << 10
			e := newCostEnvWith(t, cache.Config{BlockBytes: blockSize, MaxBytes: 8 * blockSize, CatchUpMaxBytes: 2 << 20},
				map[string]int32{"t": parts, "hot": 1}, func(c *coordinator.Config, s *countingStore) {
					c.Segments, c.ConsolidationMinAge, c.ConsolidationInterval = s, time.Second, -1
					c.ConsolidationMaxBytesPerSec, c.SegmentBytes, c.SegmentRollTime = -1, 1<<20, time.Millisecond
				})
			all := make([]int32, parts)
			for p := range all {
				all[p] = int32(p)
			}
			for i := range 16 {
				e.at(int64(i) * 1000)
				e.produce("t", false, all, 64) // per partition, 64 batches of 8 KB: 516,608 bytes
			}
			e.at(60_000)
			if err := e.coord.Consolidate(context.Background()); err != nil {
				t.Fatal(err)
			}
			top, _ := e.coord.Topic("t")
			var segments, size int64
			for p := range parts {
				r := e.coord.FindBatches(context.Background(), []diskless.FindBatchesRequest{{TopicID: top.ID, Partition: p, MaxBytes: 1 << 30}})[0]
				for _, c := range r.Runs {
					if !c.Segment() {
						t.Fatalf("a WAL run left: %+v", c)
					}
					segments++
					size += c.FileSize
				}
			}
			if segments != 8*int64(parts) {
				t.Fatalf("%d segments of 16 files of 516,608 bytes per partition in 1 MiB segments, want %d", segments, 8*parts)
			}
			for i := range 8 { // the cache full of fresher data: the segments are beyond its reach
				e.at(int64(61+i) * 1000)
				e.produce("hot", true, []int32{0}, 8)
			}
			e.at(70_000)
			before := e.snapshot()
			if n := catchUpConsumer(t, e, e.h, make([]int64, parts), 100_000, 16*64, nil); n != 16*64*int(parts) {
				t.Fatalf("read %d batches, want %d", n, 16*64*parts)
			}
			got := e.since(before)
			if got.GETs != segments || got.Bytes != size || got.Evictions != 0 {
				t.Fatalf("a lagging consumer of %d segments (%d bytes) cost %d GETs, %d bytes, %d evictions; "+
					"want one GET of each whole segment", segments, size, got.GETs, got.Bytes, got.Evictions)
			}
			e.hotStillCached(t)
		})
	}
}
