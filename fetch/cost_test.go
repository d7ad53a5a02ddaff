package fetch

// Counted and golden tests of what fetching costs in object-store requests
// (DESIGN §Tests): the real fetch handler over a real coordinator (one
// shard, a metadata log that keeps nothing) and the real block cache over
// objstoretest.Memory, which counts every request.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/metalog/metalogtest"
	"github.com/diskless-sidecar/sidecar/objstore/objstoretest"
)

// countingStore is objstoretest.Memory that also counts the bytes its reads
// return; Memory counts the requests.
type countingStore struct {
	*objstoretest.Memory
	bytes atomic.Int64
}

func (s *countingStore) ReadRange(ctx context.Context, key string, off int64, p []byte) (int, int64, error) {
	n, size, err := s.Memory.ReadRange(ctx, key, off, p)
	s.bytes.Add(int64(n))
	return n, size, err
}

// costEnv is one sidecar's fetch path over a shared clock: coordinator
// (log-append times), cache (block use times) and producer timestamps
// all read clk, in ms.
type costEnv struct {
	tb    testing.TB
	clk   atomic.Int64
	store *countingStore
	coord *coordinator.Coordinator
	cache *cache.Cache
	h     *Handler
	files int
}

const costT0 = 1_700_000_000_000

func newCostEnv(tb testing.TB, cfg cache.Config, topics map[string]int32) *costEnv {
	return newCostEnvWith(tb, cfg, topics, nil)
}

// newCostEnvWith is newCostEnv with the coordinator's Config changed by
// mutate (if set) before Open.
func newCostEnvWith(tb testing.TB, cfg cache.Config, topics map[string]int32, mutate func(*coordinator.Config, *countingStore)) *costEnv {
	tb.Helper()
	e := &costEnv{tb: tb, store: &countingStore{Memory: objstoretest.NewMemory()}}
	e.clk.Store(costT0)
	now := func() time.Time { return time.UnixMilli(e.clk.Load()) }
	ccfg := coordinator.Config{
		NumShards: 1, Logger: discardLogger, SnapshotIntervalRecords: -1, Now: now,
		RetentionCheckInterval: -1, OrphanScanInterval: -1,
		OpenLog: new(metalogtest.Memory).Open,
	}
	if mutate != nil {
		mutate(&ccfg, e.store)
	}
	c, err := coordinator.Open(ccfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	e.coord = c
	for name, n := range topics {
		if _, err := c.CreateTopic(context.Background(), name, n, nil); err != nil {
			tb.Fatal(err)
		}
	}
	cfg.Now = now
	if e.cache, err = cache.New(cfg, e.store); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.cache.Close() })
	if e.h, err = New(Config{Logger: discardLogger}, c, e.cache); err != nil {
		tb.Fatal(err)
	}
	return e
}

func (e *costEnv) at(ms int64) { e.clk.Store(costT0 + ms) }

// produce does what the produce pipeline does with one file, at the
// clock's time: uploads one WAL object holding, for each partition of
// topic in parts (in that order, as the WAL groups them), n batches of one
// record with a value of 8000 bytes; commits it; and, if put, offers it to
// the cache (this sidecar's own upload; otherwise another sidecar's). It
// returns the object's key and size.
func (e *costEnv) produce(topic string, put bool, parts []int32, n int) (string, int) {
	e.tb.Helper()
	t, _ := e.coord.Topic(topic)
	e.files++
	key := fmt.Sprintf("wal/%04d", e.files)
	req := &diskless.CommitFileRequest{ObjectKey: key, ObjectFormat: diskless.ObjectFormatWriteAheadMultiSegment, OwnerIDs: []int32{0}}
	var obj []byte
	for _, p := range parts {
		for range n {
			b := makeBatch(e.tb, batch.CodecNone, 8000, e.clk.Load())
			req.Batches = append(req.Batches, diskless.CommitBatch{
				TopicID: t.ID, Partition: p, Magic: 2, ByteOffset: int32(len(obj)), ByteSize: int32(len(b)),
				BatchMaxTimestamp: e.clk.Load(), TimestampType: batch.TimestampCreateTime,
				ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, LastSequence: -1,
			})
			obj = append(obj, b...)
		}
	}
	req.FileSize = int64(len(obj))
	if err := e.store.Memory.Put(context.Background(), key, obj); err != nil {
		e.tb.Fatal(err)
	}
	if put {
		e.cache.Put(key, slices.Clone(obj))
	}
	res, err := e.coord.CommitFile(context.Background(), 0, req)
	if err != nil {
		e.tb.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			e.tb.Fatalf("commit %s: %v", key, r.Err)
		}
	}
	return key, len(obj)
}

// fetch fetches partitions of topic from offset (v16, by topic id, 50 MiB
// and 1 MiB per partition, no wait).
func (e *costEnv) fetch(h *Handler, topic string, offset int64, parts ...int32) []*kmsg.FetchResponseTopicPartition {
	e.tb.Helper()
	t, _ := e.coord.Topic(topic)
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxBytes, req.SessionEpoch = 16, 50<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.TopicID = t.ID
	for _, p := range parts {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, offset, 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return flat(h.Fetch(context.Background(), req))
}

// cost is what a step cost: object-store GETs and bytes, and the cache's
// view of it.
type cost struct {
	GETs, Bytes             int64
	Hits, Misses, Evictions int64
	Bypassed, CatchUp       int64
	BytesCachedAfter        int64
}

func (e *costEnv) snapshot() cost {
	s := e.cache.Stats()
	return cost{
		GETs: e.store.Count(objstoretest.OpReadRange), Bytes: e.store.bytes.Load(),
		Hits: s.Hits.Load(), Misses: s.Misses.Load(), Evictions: s.Evictions.Load(),
		Bypassed: s.BypassReads.Load(), CatchUp: s.CatchUpReads.Load(), BytesCachedAfter: s.BytesCached.Load(),
	}
}

// since returns the cost of what happened after before was taken.
func (e *costEnv) since(before cost) cost {
	c := e.snapshot()
	c.GETs -= before.GETs
	c.Bytes -= before.Bytes
	c.Hits -= before.Hits
	c.Misses -= before.Misses
	c.Evictions -= before.Evictions
	c.Bypassed -= before.Bypassed
	c.CatchUp -= before.CatchUp
	return c
}

// records checks that each partition answered without error with n
// batches, whole and with good CRCs.
func records(tb testing.TB, ps []*kmsg.FetchResponseTopicPartition, n int) {
	tb.Helper()
	for _, p := range ps {
		if p.ErrorCode != 0 {
			tb.Fatalf("partition %d: error %d", p.Partition, p.ErrorCode)
		}
		if got := len(baseOffsets(tb, p.RecordBatches)); got != n {
			tb.Fatalf("partition %d: %d batches, want %d", p.Partition, got, n)
		}
	}
}

// TestFetchCostConcurrentConsumers: 16 consumers fetch the same recent
// data (two partitions in three objects another sidecar uploaded) at once,
// all missing every block together: the store sees exactly one GET per
// block, not 16, and each object's bytes once.
func TestFetchCostConcurrentConsumers(t *testing.T) {
	const (
		consumers = 16
		blockSize = 64 << 10
	)
	e := newCostEnv(t, cache.Config{BlockBytes: blockSize, MaxBytes: 64 * blockSize}, map[string]int32{"t": 2})
	// Each consumer looks up the blocks of two ranges per object, p0's
	// first half and p1's second: a block they share is looked up twice.
	var blocks, lookups, size int64
	span := func(off, n int64) int64 { return (off+n-1)/blockSize - off/blockSize + 1 }
	for i := range 3 {
		e.at(int64(i) * 1000)
		_, n := e.produce("t", false, []int32{0, 1}, 10)
		blocks += span(0, int64(n))
		lookups += span(0, int64(n)/2) + span(int64(n)/2, int64(n)/2)
		size += int64(n)
	}
	e.at(3000)

	// Hold every GET until all consumers wait for every block, so that
	// none is served by a block an earlier consumer cached.
	release := make(chan struct{})
	e.store.SetFault(func(ctx context.Context, op objstoretest.Op, _ string) error {
		if op == objstoretest.OpReadRange {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	results := make([][]*kmsg.FetchResponseTopicPartition, consumers)
	var wg sync.WaitGroup
	for i := range consumers {
		wg.Go(func() { results[i] = e.fetch(e.h, "t", 0, 0, 1) })
	}
	for deadline := time.Now().Add(10 * time.Second); e.cache.Stats().Misses.Load() < consumers*lookups; {
		if time.Now().After(deadline) {
			t.Fatalf("%d block misses, want %d: consumers did not all reach the store", e.cache.Stats().Misses.Load(), consumers*lookups)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()

	for i := range results {
		records(t, results[i], 30)
		for j := range results[i] {
			if !bytes.Equal(results[i][j].RecordBatches, results[0][j].RecordBatches) {
				t.Fatalf("consumer %d partition %d: records differ from consumer 0's", i, j)
			}
		}
	}
	got := e.snapshot()
	if blocks != 9 || got.GETs != blocks || got.Bytes != size || got.Misses != consumers*lookups || got.Hits != 0 || got.Bypassed != 0 {
		t.Fatalf("%d consumers over %d blocks (%d bytes) cost %+v; want one GET per block (9), each byte read once",
			consumers, blocks, size, got)
	}
}

// TestFetchCostGolden pins what a fixed scenario costs, step by step, so
// that a change in GETs or bytes shows. Blocks of 64 KiB, a cache of 8
// blocks (512 KiB); every object holds 10 batches of 8,072 bytes for each
// of topic t's two partitions: 161,440 bytes, three blocks (the last
// short).
//
//  1. This sidecar produces A1–A3 (t = 0, 1, 2 s): uploaded and put into
//     the cache; 484,320 bytes fit.
//  2. A consumer that keeps up reads p0 and p1 from offset 0: all hits.
//  3. It produces B1–B3 (t = 3, 4, 5 s): their Puts evict A's blocks.
//  4. A lagging consumer reads p0 and p1 from offset 0 at t = 6 s: A is
//     older than the cache's reach, so each A object is one GET of the
//     whole object into the catch-up segment (both partitions' ranges in
//     one read; the one block of A3 still cached is a hit); B is hits.
//     Nothing in the main LRU is cached or evicted.
//  5. The consumer that keeps up reads B again: all hits — the lagging
//     read evicted nothing.
//  6. ListOffsets by timestamp lands in A2: a hit in the catch-up segment
//     (before it, one GET of exactly one batch).
//  7. Another sidecar uploads C1 (t = 7 s), which two consumers read while
//     fresh: one GET per block, through the cache.
//
// For comparison, the same scenario over a reader that hides the commit
// times from the cache (lagging reads through the blocks, as before they
// were priced per object) costs at step 4 8–18 GETs and 454–969 KB and
// evicts 9–18 blocks, and B, pushed out by A's blocks, is read from the
// store again, in step 4 or in step 5; the exact figures vary with the
// order in which parallel block loads land, so that run checks bounds
// only: at least a GET for each of the 8 blocks of A that step 3 evicted,
// as many evictions, and more GETs over steps 4 and 5 than those 8.
func TestFetchCostGolden(t *testing.T) {
	golden := []costRow{
		{"2 hot read of A", cost{GETs: 0, Bytes: 0, Hits: 12, Misses: 0, Evictions: 0, Bypassed: 0, CatchUp: 0, BytesCachedAfter: 484320}},
		{"3 produce B", cost{GETs: 0, Bytes: 0, Hits: 0, Misses: 0, Evictions: 8, Bypassed: 0, CatchUp: 0, BytesCachedAfter: 514688}},
		{"4 lagging read of A and B", cost{GETs: 3, Bytes: 484320, Hits: 13, Misses: 0, Evictions: 0, Bypassed: 0, CatchUp: 3, BytesCachedAfter: 514688}},
		{"5 hot read of B", cost{GETs: 0, Bytes: 0, Hits: 12, Misses: 0, Evictions: 0, Bypassed: 0, CatchUp: 0, BytesCachedAfter: 514688}},
		{"6 ListOffsets in A", cost{GETs: 0, Bytes: 0, Hits: 2, Misses: 0, Evictions: 0, Bypassed: 0, CatchUp: 0, BytesCachedAfter: 514688}},
		{"7 two fresh reads of C", cost{GETs: 3, Bytes: 161440, Hits: 4, Misses: 4, Evictions: 3, Bypassed: 0, CatchUp: 0, BytesCachedAfter: 514688}},
	}
	got := costScenario(t, false)
	if !slices.Equal(got, golden) {
		var b bytes.Buffer
		for i, r := range got {
			mark := "  "
			if i >= len(golden) || r != golden[i] {
				mark = "≠ "
			}
			w := r.cost
			fmt.Fprintf(&b, "%s{%q, cost{GETs: %d, Bytes: %d, Hits: %d, Misses: %d, Evictions: %d, Bypassed: %d, CatchUp: %d, BytesCachedAfter: %d}},\n",
				mark, r.step, w.GETs, w.Bytes, w.Hits, w.Misses, w.Evictions, w.Bypassed, w.CatchUp, w.BytesCachedAfter)
		}
		t.Fatalf("costs differ from the golden figures (≠ marks the rows); got:\n%s", b.String())
	}

	t.Run("through the blocks, for comparison", func(t *testing.T) {
		rows := costScenario(t, true)
		lag, hot := rows[2].cost, rows[3].cost
		t.Logf("lagging read through the blocks: %+v; hot read after it: %+v", lag, hot)
		evicted := rows[1].cost.Evictions // A's blocks that B pushed out (8 of its 9)
		if lag.GETs < evicted || lag.Bytes < 3*161440-(64<<10) || lag.Evictions < evicted || lag.GETs+hot.GETs <= evicted {
			t.Fatalf("through the blocks the lagging read cost %+v and the hot read after it %+v; "+
				"want ≥ %d GETs and evictions (a block each of A's evicted ones), and B read again in one of them", lag, hot, evicted)
		}
	})
}

// throughBlocks reads through the cache's blocks whatever the data's age:
// it tells the cache no commit time.
type throughBlocks struct{ c *cache.Cache }

func (r throughBlocks) ReadRanges(ctx context.Context, obj cache.Object, rs []cache.Range, check cache.Checker) error {
	obj.WrittenMs = -1
	return r.c.ReadRanges(ctx, obj, rs, check)
}

func (r throughBlocks) ReadAhead(cache.Object) {}

// costRow is the cost of one step of costScenario.
type costRow struct {
	step string
	cost cost
}

// costScenario runs TestFetchCostGolden's scenario and returns the cost
// of steps 2–7. hide hides the commit times from the cache (throughBlocks).
func costScenario(t *testing.T, hide bool) []costRow {
	const blockSize = 64 << 10
	e := newCostEnv(t, cache.Config{BlockBytes: blockSize, MaxBytes: 8 * blockSize}, map[string]int32{"t": 2})
	// One object at a time: the LRU order, and so which blocks step 7
	// evicts, must not depend on how parallel reads interleave. (The
	// comparison checks bounds only, with the default concurrency.)
	var r ObjectReader = e.cache
	conc := 1
	if hide {
		r, conc = throughBlocks{e.cache}, 0
	}
	h, err := New(Config{Logger: discardLogger, ReadConcurrency: conc}, e.coord, r)
	if err != nil {
		t.Fatal(err)
	}
	var rows []costRow
	step := func(name string, f func()) {
		before := e.snapshot()
		f()
		rows = append(rows, costRow{name, e.since(before)})
	}

	for i := range 3 { // 1
		e.at(int64(i) * 1000)
		if _, n := e.produce("t", true, []int32{0, 1}, 10); n != 161440 {
			t.Fatalf("object of %d bytes, the scenario assumes 161440", n)
		}
	}
	e.at(2500)
	step("2 hot read of A", func() { records(t, e.fetch(h, "t", 0, 0, 1), 30) })
	step("3 produce B", func() {
		for i := range 3 {
			e.at(3000 + int64(i)*1000)
			e.produce("t", true, []int32{0, 1}, 10)
		}
	})
	e.at(6000)
	step("4 lagging read of A and B", func() { records(t, e.fetch(h, "t", 0, 0, 1), 60) })
	step("5 hot read of B", func() { records(t, e.fetch(h, "t", 30, 0, 1), 30) })
	step("6 ListOffsets in A", func() {
		resp := h.ListOffsets(context.Background(), listReq(8, "t", 0, costT0+1000))
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != 10 {
			t.Fatalf("ListOffsets = error %d, offset %d; want 10", p.ErrorCode, p.Offset)
		}
	})
	e.at(7000)
	e.produce("t", false, []int32{0, 1}, 10)
	e.at(7100)
	step("7 two fresh reads of C", func() {
		for range 2 {
			records(t, e.fetch(h, "t", 60, 0, 1), 10)
		}
	})
	return rows
}

// TestFetchCostFailedGet: a GET that fails answers KAFKA_STORAGE_ERROR for
// the partition whose object it was, serves the other partition, caches
// nothing, and the next fetch reads the object again and succeeds — whether
// the read went through the blocks or bypassed them.
func TestFetchCostFailedGet(t *testing.T) {
	for _, tc := range []struct {
		name string
		old  bool // the data is older than the cache's reach
		// getsFailed is what the failed fetch costs (p0's failed GETs,
		// p1's good ones), getsOK what the next fetch of p0 costs.
		getsFailed, getsOK int64
	}{
		{name: "through the blocks", getsFailed: 6, getsOK: 3},
		{name: "bypassing the cache", old: true, getsFailed: 2, getsOK: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const blockSize = 64 << 10
			e := newCostEnv(t, cache.Config{BlockBytes: blockSize, MaxBytes: 8 * blockSize}, map[string]int32{"t": 2, "hot": 1})
			keyP0, _ := e.produce("t", false, []int32{0}, 20) // p0 alone: 161,440 bytes, 3 blocks
			e.produce("t", false, []int32{1}, 20)
			if tc.old {
				for i := range 4 { // fill the cache with fresher data
					e.at(1000 + int64(i))
					e.produce("hot", true, []int32{0}, 20)
				}
			}
			e.at(2000)
			errBoom := errors.New("connection reset")
			e.store.SetFault(func(_ context.Context, op objstoretest.Op, key string) error {
				if op == objstoretest.OpReadRange && key == keyP0 {
					return errBoom
				}
				return nil
			})
			before := e.snapshot()
			ps := e.fetch(e.h, "t", 0, 0, 1)
			if ps[0].ErrorCode != kerr.KafkaStorageError.Code || len(ps[0].RecordBatches) != 0 {
				t.Fatalf("partition 0: error %d, %d bytes; want KAFKA_STORAGE_ERROR", ps[0].ErrorCode, len(ps[0].RecordBatches))
			}
			records(t, ps[1:], 20)
			// A failed read gives up the block loads it no longer waits
			// for; they are cancelled but may still reach the store, after
			// Fetch returns. Wait for them, so they are not charged to the
			// next fetch.
			for deadline := time.Now().Add(10 * time.Second); e.since(before).GETs < tc.getsFailed; {
				if time.Now().After(deadline) {
					t.Fatalf("failed fetch: %d GETs, want %d", e.since(before).GETs, tc.getsFailed)
				}
				time.Sleep(time.Millisecond)
			}
			failed := e.since(before)
			if failed.GETs != tc.getsFailed {
				t.Fatalf("failed fetch cost %+v, want %d GETs", failed, tc.getsFailed)
			}

			e.store.SetFault(nil)
			before = e.snapshot()
			records(t, e.fetch(e.h, "t", 0, 0), 20)
			if got := e.since(before); got.GETs != tc.getsOK || (got.CatchUp != 0) != tc.old {
				t.Fatalf("fetch after the failure cost %+v; want %d GETs of partition 0's object (the failure was not cached)", got, tc.getsOK)
			}
			if failed.BytesCachedAfter != before.BytesCachedAfter {
				t.Fatalf("bytes cached changed from %d to %d between the fetches", failed.BytesCachedAfter, before.BytesCachedAfter)
			}
		})
	}
}

// TestCatchUpReadAhead: a consumer eight partitions behind (as in
// TestCatchUpCostEightPartitionsBehind) finds every object but the first
// read ahead: when a partition's batches end in one object and its next
// batch lies in another, the fetch hints that object, and the cache reads
// it whole in the background, before the fetch that needs it — the
// store's first-byte latency is not on that fetch's path. The GETs stay
// one per object. (synctest: each fetch's read-ahead ends before the next
// fetch, as it does when the client takes longer than the store.)
func TestCatchUpReadAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const objects, batches = 12, 10
		e, size := catchUpFixture(t, 8, objects, batches)
		start := make([]int64, 8)
		for p := range start {
			start[p] = int64(p)
		}
		before := e.snapshot()
		catchUpConsumer(t, e, e.h, start, 6*8072, objects*batches, synctest.Wait)
		got, st := e.since(before), e.cache.Stats()
		if got.GETs != objects || got.Bytes != size || got.CatchUp != objects || st.ReadAheads.Load() != objects-1 {
			t.Fatalf("%+v, %d read-aheads; want %d GETs of whole objects (%d bytes), all but the first read ahead",
				got, st.ReadAheads.Load(), objects, size)
		}
	})
}
