package coordinator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/batchtest"
	"github.com/diskless-sidecar/sidecar/objstore/objstoretest"
	"github.com/diskless-sidecar/sidecar/segment"
)

// withConsolidation makes e consolidate through store, driven by the test
// (runConsolidation): WAL runs older than a minute, segments sealed at the
// end of the pass that fills them (segment.ms 1 ms) unless a topic says
// otherwise.
func withConsolidation(store *objstoretest.Memory) func(*Config) {
	return func(c *Config) {
		c.Segments = store
		c.ConsolidationMinAge = time.Minute
		c.ConsolidationInterval = -1
		c.ConsolidationMaxBytesPerSec = -1
		c.SegmentRollTime = time.Millisecond
		c.ConsolidationIndexIntervalBytes = 300
	}
}

// walBatch is one batch of a WAL object a test commits: its partition and
// records' timestamps.
type walBatch struct {
	partition int32
	ts        []int64
	lat       bool
}

// commitWAL builds a WAL object of real batches (one record per
// timestamp, 40-byte values), grouped by partition as the packer lays
// them out, puts it under a fresh key and commits it to the shard of the
// first batch's partition (all of them must be of that shard); it returns the key,
// the object and the batches' base offsets in the order given.
func (e *env) commitWAL(store *objstoretest.Memory, top diskless.Topic, bs ...walBatch) (string, []byte, []int64) {
	e.t.Helper()
	order := make([]int, len(bs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(bs[a].partition - bs[b].partition) })
	var obj []byte
	req := commitRequest(e.c, nextKey())
	for _, i := range order {
		b := bs[i]
		recs := make([]batchtest.Record, len(b.ts))
		for j, ts := range b.ts {
			recs[j] = batchtest.Record{Value: bytes.Repeat([]byte{byte('a' + j%26)}, 40), TimestampDelta: ts - b.ts[0]}
		}
		raw := batchtest.Make(batchtest.Plain(b.ts[0]), recs...)
		cb := plain(top, b.partition, int32(len(b.ts)))
		cb.ByteOffset, cb.ByteSize = int32(len(obj)), int32(len(raw))
		cb.BatchMaxTimestamp = batch.Header(raw).MaxTimestamp()
		if b.lat {
			cb.TimestampType = batch.TimestampLogAppendTime
		}
		req.Batches = append(req.Batches, cb)
		obj = append(obj, raw...)
	}
	req.FileSize = int64(len(obj))
	if err := store.Put(context.Background(), req.ObjectKey, obj); err != nil {
		e.t.Fatal(err)
	}
	shard := e.c.ShardFor(top.ID, bs[0].partition)
	req.OwnerIDs = []int32{shard}
	res, err := e.c.CommitFile(context.Background(), shard, req)
	if err != nil {
		e.t.Fatal(err)
	}
	bases := make([]int64, len(bs))
	for k, i := range order {
		if res[k].Err != nil {
			e.t.Fatalf("commit: %s", resName(res[k]))
		}
		bases[i] = res[k].BaseOffset
	}
	return req.ObjectKey, obj, bases
}

func (e *env) consolidate() {
	e.t.Helper()
	if err := e.c.runConsolidation(context.Background()); err != nil {
		e.t.Fatalf("runConsolidation: %v", err)
	}
}

// readSegment reads a segment object and decodes its index.
func readSegment(t *testing.T, store *objstoretest.Memory, c diskless.RunCoordinate) ([]byte, segment.Trailer, []segment.Entry) {
	t.Helper()
	obj := make([]byte, c.FileSize)
	if n, size, err := store.ReadRange(context.Background(), c.ObjectKey, 0, obj); err != nil || n != len(obj) || size != c.FileSize {
		t.Fatalf("reading segment %s: %d of %d bytes, %v", c.ObjectKey, n, size, err)
	}
	tr, es, err := segment.DecodeIndex(obj[c.ByteSize:], int64(c.ByteSize), c.FileSize)
	if err != nil {
		t.Fatalf("segment %s: %v", c.ObjectKey, err)
	}
	return obj, tr, es
}

// TestConsolidation: WAL runs older than the minimum age become one
// segment object per partition, byte for byte the batches of the runs in
// offset order; the runs leave the index (FindBatches answers the
// segment), the WAL objects are released and, after the deletion delay,
// deleted; younger runs stay; the state replays and snapshots the same.
func TestConsolidation(t *testing.T) {
	for _, snapshots := range []int64{-1, 1} {
		store := objstoretest.NewMemory()
		e := newEnv(t, 1, withObjects(store), withConsolidation(store), func(c *Config) { c.SnapshotIntervalRecords = snapshots })
		store.SetClock(e.clock.Now)
		top := e.createTopic("t", 2, nil)
		var old [][]byte
		var keys []string
		for f := range 3 {
			key, obj, _ := e.commitWAL(store, top,
				walBatch{partition: 0, ts: []int64{int64(100 * f), int64(100*f + 1)}},
				walBatch{partition: 1, ts: []int64{int64(100*f + 5)}},
				walBatch{partition: 0, ts: []int64{int64(100*f + 2)}})
			old, keys = append(old, obj), append(keys, key)
			e.clock.Advance(time.Second)
		}
		e.clock.Advance(time.Minute)
		youngKey, _, _ := e.commitWAL(store, top, walBatch{partition: 0, ts: []int64{900}})

		e.consolidate()
		if n := e.c.Stats().SegmentsCommitted.Load(); n != 2 {
			t.Fatalf("%d segments committed, want 2", n)
		}
		check := func(stage string) {
			t.Helper()
			r := e.find(top, 0, 0, 1<<30)
			if r.Err != nil || len(r.Runs) != 2 || !r.Runs[0].Segment() || r.Runs[0].BaseOffset != 0 || r.Runs[0].LastOffset != 8 ||
				r.Runs[1].Segment() || r.Runs[1].ObjectKey != youngKey || r.Runs[1].BaseOffset != 9 {
				t.Fatalf("%s: partition 0: %+v", stage, r.Runs)
			}
			obj, tr, es := readSegment(t, store, r.Runs[0])
			var want []byte
			for _, o := range old {
				// Partition 0's batches come first in each object.
				n := 0
				for range 2 {
					h, size, _ := batch.Parse(o[n:])
					_ = h
					n += size
				}
				want = append(want, o[:n]...)
			}
			if !bytes.Equal(obj[:tr.DataSize], want) || tr.Partition != 0 || tr.TopicID != top.ID || tr.BaseOffset != 0 {
				t.Fatalf("%s: segment data differs from the WAL runs' bytes (trailer %+v)", stage, tr)
			}
			if r.Runs[0].BatchMaxTimestamp != 202 || len(es) < 2 {
				t.Fatalf("%s: segment coordinate %+v, %d index entries", stage, r.Runs[0], len(es))
			}
			if r := e.find(top, 1, 0, 1<<30); len(r.Runs) != 1 || !r.Runs[0].Segment() || r.Runs[0].LastOffset != 2 {
				t.Fatalf("%s: partition 1: %+v", stage, r.Runs)
			}
			states, err := e.c.DescribeFiles(context.Background(), 0, append(slices.Clone(keys), youngKey))
			if err != nil || !slices.Equal(states, []diskless.FileState{diskless.FileReleased, diskless.FileReleased, diskless.FileReleased, diskless.FileLive}) {
				t.Fatalf("%s: WAL files %v (%v)", stage, states, err)
			}
		}
		check("online")
		e.reopenSame()
		check("after restart")
		// The released WAL objects go after the deletion delay; the
		// segments and the young object stay.
		e.runFileDeletion()
		e.clock.Advance(2 * time.Minute)
		e.runFileDeletion()
		for _, k := range keys {
			if _, _, err := store.ReadRange(context.Background(), k, 0, nil); err == nil {
				t.Fatalf("WAL object %s not deleted", k)
			}
		}
		if _, _, err := store.ReadRange(context.Background(), youngKey, 0, nil); err != nil {
			t.Fatalf("the young WAL object: %v", err)
		}
		e.reopen()
		check2 := e.find(top, 0, 0, 1<<30)
		if !check2.Runs[0].Segment() {
			t.Fatalf("after deletion: %+v", check2.Runs)
		}
	}
}

// TestConsolidationRolls: a segment is sealed before it would pass
// segment.bytes (the topic's), a LogAppendTime run starts a new one, and
// a partition's runs keep waiting for their segment to fill until
// segment.ms past the minimum age.
func TestConsolidationRolls(t *testing.T) {
	store := objstoretest.NewMemory()
	e := newEnv(t, 1, withObjects(store), withConsolidation(store), func(c *Config) { c.SegmentRollTime = time.Hour })
	store.SetClock(e.clock.Now)
	// 1 MiB segments; batches of 200 records of 40 bytes (~9 KiB).
	top := e.createTopic("t", 1, map[string]string{"segment.bytes": "1048576"})
	ts := make([]int64, 200)
	for i := range ts {
		ts[i] = int64(i)
	}
	for range 30 {
		e.commitWAL(store, top, walBatch{ts: ts}, walBatch{ts: ts}, walBatch{ts: ts}, walBatch{ts: ts})
	}
	e.commitWAL(store, top, walBatch{ts: ts, lat: true})
	e.commitWAL(store, top, walBatch{ts: ts})
	e.clock.Advance(2 * time.Minute)
	e.consolidate()
	r := e.find(top, 0, 0, 1<<30)
	var sizes []int32
	var segs int
	for _, c := range r.Runs {
		if c.Segment() {
			segs++
			sizes = append(sizes, c.ByteSize)
			if c.FileSize > 1<<20 {
				t.Fatalf("segment object of %d bytes (%d of data): past segment.bytes", c.FileSize, c.ByteSize)
			}
		}
	}
	// 120 batches of ~9 KiB: a MiB holds ~110, so 2 segments; then the
	// LogAppendTime run is a segment of its own. The last builder (one
	// CreateTime run) waits for segment.ms.
	if segs != 3 || len(r.Runs) != 4 || r.Runs[2].TimestampType != batch.TimestampLogAppendTime || r.Runs[3].Segment() {
		t.Fatalf("%d segments (%v bytes), runs %+v", segs, sizes, r.Runs)
	}
	e.clock.Advance(time.Hour)
	e.consolidate()
	if r := e.find(top, 0, 0, 1<<30); len(r.Runs) != 4 || !r.Runs[3].Segment() {
		t.Fatalf("after segment.ms: %+v", r.Runs)
	}
	restartIdentical(t, e)
}

// TestConsolidationSegmentBytesBoundsObject: segment.bytes bounds the
// whole segment object, index and trailer included — not only its data —
// so that a segment of the default size fits a lagging consumer's
// whole-object read (half the catch-up segment). The batches are sized so
// that k of them fill 1 MiB of data while their object, with an index
// entry each, would not fit.
func TestConsolidationSegmentBytesBoundsObject(t *testing.T) {
	const limit = 1 << 20
	batchSize := func(n int) int {
		recs := make([]batchtest.Record, n)
		for j := range recs {
			recs[j] = batchtest.Record{Value: bytes.Repeat([]byte{byte('a' + j%26)}, 40)}
		}
		return len(batchtest.Make(batchtest.Plain(0), recs...))
	}
	n, k := 0, 0
	for m := 100; m < 400 && n == 0; m++ {
		size := batchSize(m)
		if kk := limit / size; kk*(size+segment.EntrySize)+segment.TrailerSize > limit {
			n, k = m, kk
		}
	}
	if n == 0 {
		t.Fatal("no batch size to test with")
	}
	store := objstoretest.NewMemory()
	e := newEnv(t, 1, withObjects(store), withConsolidation(store), func(c *Config) { c.SegmentRollTime = time.Hour })
	store.SetClock(e.clock.Now)
	top := e.createTopic("t", 1, map[string]string{"segment.bytes": strconv.Itoa(limit)})
	ts := make([]int64, n)
	for range k + 1 {
		e.commitWAL(store, top, walBatch{ts: ts})
	}
	e.clock.Advance(2 * time.Minute)
	e.consolidate()
	r := e.find(top, 0, 0, 1<<30)
	if len(r.Runs) == 0 || !r.Runs[0].Segment() {
		t.Fatalf("runs %+v", r.Runs)
	}
	first := r.Runs[0]
	// k−1 batches fit; SizeWith's bound may leave out one more.
	if first.FileSize > limit || first.LastOffset+1 < int64((k-2)*n) {
		t.Fatalf("first segment: object of %d bytes (%d of data) holding %d offsets; want at most %d bytes, %d batches of %d",
			first.FileSize, first.ByteSize, first.LastOffset+1, limit, k-2, n)
	}
}

// TestConsolidationLosesToRetention: a segment whose runs retention moved
// the log start past while it was built is not committed, and its object
// is deleted at once; the next pass consolidates what is left.
func TestConsolidationLosesToRetention(t *testing.T) {
	store := objstoretest.NewMemory()
	e := newEnv(t, 1, withObjects(store), withConsolidation(store), func(c *Config) { c.SegmentRollTime = time.Hour })
	store.SetClock(e.clock.Now)
	top := e.createTopic("t", 1, nil)
	e.commitWAL(store, top, walBatch{ts: []int64{1}})
	e.commitWAL(store, top, walBatch{ts: []int64{2}})
	e.clock.Advance(2 * time.Minute)
	e.consolidate() // the builder holds both runs, waiting for segment.ms
	if _, err := e.c.DeleteRecords(context.Background(), diskless.TopicPartition{TopicID: top.ID}, 1); err != nil {
		t.Fatal(err)
	}
	puts := store.Count(objstoretest.OpPut)
	e.clock.Advance(time.Hour)
	e.consolidate()
	// The stale builder was dropped; the pass built a new one from the
	// one run left and sealed it.
	r := e.find(top, 0, 1, 1<<30)
	if len(r.Runs) != 1 || !r.Runs[0].Segment() || r.Runs[0].BaseOffset != 1 {
		t.Fatalf("runs %+v", r.Runs)
	}
	if n := store.Count(objstoretest.OpPut) - puts; n != 1 {
		t.Fatalf("%d segment uploads, want 1", n)
	}
	// A builder that goes stale after the plan, before its commit: the
	// record is refused against the durable state and the object deleted.
	e.commitWAL(store, top, walBatch{ts: []int64{3}})
	e.clock.Advance(2 * time.Minute)
	e.consolidate() // the builder holds [2]
	if _, err := e.c.DeleteRecords(context.Background(), diskless.TopicPartition{TopicID: top.ID}, 3); err != nil {
		t.Fatal(err)
	}
	bs := e.c.consolidation.shards[0]
	b := bs[diskless.TopicPartition{TopicID: top.ID}]
	if b == nil || len(b.runs) != 1 {
		t.Fatalf("builder %+v", b)
	}
	puts, dels := store.Count(objstoretest.OpPut), store.Count(objstoretest.OpDelete)
	if err := e.c.sealSegment(context.Background(), e.c.shards[0], bs, b); !errors.Is(err, errSegmentStale) {
		t.Fatalf("sealing a stale builder: %v", err)
	}
	if store.Count(objstoretest.OpPut) != puts+1 || store.Count(objstoretest.OpDelete) != dels+1 || e.c.Stats().SegmentsAbandoned.Load() != 1 {
		t.Fatalf("%d puts, %d deletes, %d abandoned; want 1, 1, 1", store.Count(objstoretest.OpPut)-puts,
			store.Count(objstoretest.OpDelete)-dels, e.c.Stats().SegmentsAbandoned.Load())
	}
	if len(bs) != 0 {
		t.Fatal("the stale builder was kept")
	}
	restartIdentical(t, e)
}

// TestConsolidationCorruptRun: a WAL run whose bytes do not check out is
// not consolidated (its partition waits, counted), the others are.
func TestConsolidationCorruptRun(t *testing.T) {
	store := objstoretest.NewMemory()
	e := newEnv(t, 1, withObjects(store), withConsolidation(store))
	store.SetClock(e.clock.Now)
	top := e.createTopic("t", 2, nil)
	key, obj, _ := e.commitWAL(store, top, walBatch{partition: 0, ts: []int64{1, 2}}, walBatch{partition: 1, ts: []int64{3}})
	bad := slices.Clone(obj)
	bad[len(obj)-1] ^= 1 // partition 1's batch, its last record
	if err := store.Put(context.Background(), key, bad); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Minute)
	e.consolidate()
	if !e.find(top, 0, 0, 1<<30).Runs[0].Segment() || e.find(top, 1, 0, 1<<30).Runs[0].Segment() {
		t.Fatal("partition 0 not consolidated, or partition 1 was")
	}
	if n := e.c.Stats().ConsolidationFailures.Load(); n != 1 {
		t.Fatalf("%d failures, want 1", n)
	}
	if !bytes.Contains([]byte(e.logs.String()), []byte("does not check out")) {
		t.Fatal("the corrupt run is not logged")
	}
}

// TestConsolidationThrottle: a pass reads at most
// ConsolidationMaxBytesPerSec: 1 MiB of WAL runs at 256 KiB/s takes 3 s
// of waiting (the first read is free).
func TestConsolidationThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var th throttle
		th.rate = 256 << 10
		start := time.Now()
		for range 4 {
			if err := th.wait(context.Background(), 256<<10); err != nil {
				t.Fatal(err)
			}
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Fatalf("4 reads of 256 KiB at 256 KiB/s took %v, want 3s", d)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := th.wait(ctx, 1); err == nil {
			t.Fatal("a cancelled wait returned nil")
		}
	})
}

// TestFileStage: a segment staged in a file (ConsolidationStagingDir),
// through its buffer, reads back whole; remove deletes the file; Open
// empties the staging directory of what a previous process left.
func TestFileStage(t *testing.T) {
	store := objstoretest.NewMemory()
	dir := t.TempDir()
	e := newEnv(t, 1, withObjects(store), withConsolidation(store), func(c *Config) { c.ConsolidationStagingDir = dir })
	st, err := e.c.newStage(0)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i := range 50 {
		p := bytes.Repeat([]byte{byte(i)}, 5000+i)
		if _, err := st.Write(p); err != nil {
			t.Fatal(err)
		}
		want = append(want, p...)
	}
	got, err := st.bytes(10)
	if err != nil || !bytes.Equal(got, want) || cap(got) < len(want)+10 {
		t.Fatalf("staged %d bytes, read %d back (%v)", len(want), len(got), err)
	}
	name := st.(*fileStage).name
	st.remove()
	if _, err := os.Stat(name); !os.IsNotExist(err) {
		t.Fatalf("the staging file is still there: %v", err)
	}
	// A staging file left by a crash goes at the next Open.
	st, _ = e.c.newStage(0)
	_, _ = st.Write(make([]byte, stageBufferBytes))
	e.reopen()
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Fatalf("the staging directory holds %d entries after Open (%v)", len(ents), err)
	}
	// And a consolidation through file stages commits the same segments.
	top := e.createTopic("t", 1, nil)
	e.commitWAL(store, top, walBatch{ts: []int64{1, 2, 3}})
	e.clock.Advance(2 * time.Minute)
	e.consolidate()
	if r := e.find(top, 0, 0, 1<<30); len(r.Runs) != 1 || !r.Runs[0].Segment() {
		t.Fatalf("runs %+v", r.Runs)
	}
}

// TestClusterConsolidation: in a cluster (coordinators on shared logs and
// one store), a shard's owner alone consolidates it — a pass on a
// coordinator that only follows the shard reads, puts and commits
// nothing —, the replicas apply its records 114 (FindBatches answers the
// same segments everywhere), and once the shard moves its new owner
// consolidates what came after, the offsets dense across both segments.
func TestClusterConsolidation(t *testing.T) {
	store := objstoretest.NewMemory()
	clock := newFakeClock()
	store.SetClock(clock.Now)
	cl := newCluster(t, 2, withObjects(store), withConsolidation(store), func(c *Config) { c.Now = clock.Now })
	a, b := cl.nodes[0], cl.nodes[1]
	cl.host(0, 0, 1, 2, 3)
	top, err := a.CreateTopic(context.Background(), "t", 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	var p int32 = -1 // a partition of shard 1
	for q := range top.Partitions {
		if a.ShardFor(top.ID, q) == 1 {
			p = q
			break
		}
	}
	if p < 0 {
		t.Fatal("no partition on shard 1")
	}
	commit := func(c *Coordinator) {
		t.Helper()
		e := &env{t: t, c: c}
		for range 3 {
			e.commitWAL(store, top, walBatch{partition: p, ts: []int64{1, 2}}, walBatch{partition: p, ts: []int64{3}})
			clock.Advance(time.Second)
		}
	}
	consolidate := func(c *Coordinator) {
		t.Helper()
		if err := c.Consolidate(context.Background()); err != nil {
			t.Fatalf("Consolidate on node %d: %v", c.cfg.NodeID, err)
		}
	}
	find := func(c *Coordinator) diskless.FindBatchesResult {
		return c.FindBatches(context.Background(), []diskless.FindBatchesRequest{{TopicID: top.ID, Partition: p, MaxBytes: 1 << 30}})[0]
	}
	segments := func(r diskless.FindBatchesResult) (n int) {
		for _, c := range r.Runs {
			if c.Segment() {
				n++
			}
		}
		return n
	}

	commit(a)
	clock.Advance(2 * time.Minute)
	waitFor(t, b, "B's replica has the commits", func() bool { return hwm(b, top, p) == 9 })
	puts, reads := store.Count(objstoretest.OpPut), store.Count(objstoretest.OpReadRange)
	consolidate(b)
	if n := b.Stats().SegmentsCommitted.Load() + b.Stats().ConsolidationReads.Load(); n != 0 || store.Count(objstoretest.OpPut) != puts || store.Count(objstoretest.OpReadRange) != reads {
		t.Fatalf("a pass on a coordinator hosting no shard read, put or committed (%d reads and commits, %d puts, %d GETs)", n, store.Count(objstoretest.OpPut)-puts, store.Count(objstoretest.OpReadRange)-reads)
	}
	consolidate(a)
	if n := a.Stats().SegmentsCommitted.Load(); n != 1 {
		t.Fatalf("the owner committed %d segments, want 1", n)
	}
	waitFor(t, b, "B's replica applies the segment", func() bool { return segments(find(b)) == 1 })
	if fa, fb := find(a), find(b); !reflect.DeepEqual(fa, fb) || len(fa.Runs) != 1 || fa.Runs[0].LastOffset != 8 {
		t.Fatalf("FindBatches after consolidation:\nA %+v\nB %+v", fa, fb)
	}

	// The shard moves to B: B consolidates what is committed after.
	if err := a.Release(1); err != nil {
		t.Fatal(err)
	}
	cl.host(1, 1)
	commit(b)
	clock.Advance(2 * time.Minute)
	waitFor(t, a, "A's replica has the commits", func() bool { return hwm(a, top, p) == 18 })
	consolidate(a)
	if n := a.Stats().SegmentsCommitted.Load(); n != 1 {
		t.Fatalf("the former owner committed %d segments after the move, want still 1", n)
	}
	consolidate(b)
	if n := b.Stats().SegmentsCommitted.Load(); n != 1 {
		t.Fatalf("the new owner committed %d segments, want 1", n)
	}
	waitFor(t, a, "A's replica applies the second segment", func() bool { return segments(find(a)) == 2 })
	r := find(a)
	if !reflect.DeepEqual(r, find(b)) || len(r.Runs) != 2 || r.Runs[0].LastOffset != 8 || r.Runs[1].BaseOffset != 9 || r.Runs[1].LastOffset != 17 {
		t.Fatalf("FindBatches after the second segment: %+v", r)
	}

	// The shard moves while B puts a segment: its record is never
	// decided (ErrNotCoordinator), so B deletes the object at once.
	commit(b)
	clock.Advance(2 * time.Minute)
	var segKey string
	store.SetFault(func(_ context.Context, op objstoretest.Op, key string) error {
		if op == objstoretest.OpPut && segKey == "" {
			segKey = key
			if err := b.Release(1); err != nil {
				t.Errorf("Release during the segment's PUT: %v", err)
			}
		}
		return nil
	})
	if err := b.Consolidate(context.Background()); !errors.Is(err, diskless.ErrNotCoordinator) {
		t.Fatalf("a pass whose shard moved during the PUT: %v", err)
	}
	store.SetFault(nil)
	if segKey == "" || exists(store, segKey) || b.Stats().SegmentsAbandoned.Load() != 1 {
		t.Fatalf("the segment put before the move (%q): still stored %v, %d abandoned", segKey, exists(store, segKey), b.Stats().SegmentsAbandoned.Load())
	}
	cl.host(0, 1)
	waitFor(t, a, "A hosts the shard again", func() bool { return a.Hosted(1) })
	consolidate(a)
	if r := find(a); len(r.Runs) != 3 || !r.Runs[2].Segment() || r.Runs[2].BaseOffset != 18 || r.Runs[2].LastOffset != 26 {
		t.Fatalf("FindBatches after the third segment: %+v", r)
	}
}

// TestSegmentRetention: retention drops whole segment objects — by
// retention.ms (a segment goes once its largest timestamp is older, a
// younger one stays, with the WAL run after it) and by retention.bytes
// (the oldest segment goes while the bytes left would still be at least
// retention.bytes) —, the dropped segment's object is released and, after
// the deletion delay, deleted; the segments kept and their objects stay.
func TestSegmentRetention(t *testing.T) {
	store := objstoretest.NewMemory()
	e := newEnv(t, 1, withObjects(store), withConsolidation(store))
	store.SetClock(e.clock.Now)
	byTime := e.createTopic("by-time", 1, map[string]string{"retention.ms": "3600000"})
	byBytes := e.createTopic("by-bytes", 1, map[string]string{"retention.ms": "-1"})
	// Two segments per topic, then a WAL run.
	var walKeys []string
	var secondAt time.Time // the second segment's first records
	for seg := range 2 {
		if seg == 1 {
			secondAt = e.clock.Now()
		}
		for range 2 {
			now := e.clock.Ms()
			k1, _, _ := e.commitWAL(store, byTime, walBatch{ts: []int64{now, now + 1}})
			k2, _, _ := e.commitWAL(store, byBytes, walBatch{ts: []int64{now}})
			walKeys = append(walKeys, k1, k2)
			e.clock.Advance(time.Second)
		}
		e.clock.Advance(2 * time.Minute)
		e.consolidate()
	}
	e.commitWAL(store, byTime, walBatch{ts: []int64{e.clock.Ms()}})
	e.commitWAL(store, byBytes, walBatch{ts: []int64{e.clock.Ms()}})
	segmentsOf := func(top diskless.Topic) []diskless.RunCoordinate {
		t.Helper()
		r := e.find(top, 0, 0, 1<<30)
		if r.Err != nil || len(r.Runs) != 3 || !r.Runs[0].Segment() || !r.Runs[1].Segment() || r.Runs[2].Segment() {
			t.Fatalf("%s: want two segments and a WAL run: %+v (%v)", top.Name, r.Runs, r.Err)
		}
		return r.Runs
	}
	timeRuns, bytesRuns := segmentsOf(byTime), segmentsOf(byBytes)
	// The WAL objects are gone (their runs are in segments) but for the
	// last ones.
	e.runFileDeletion()
	e.clock.Advance(2 * time.Minute)
	e.runFileDeletion()
	for _, k := range walKeys {
		if exists(store, k) {
			t.Fatalf("consolidated WAL object %s not deleted", k)
		}
	}
	// retention.bytes keeps the second segment and the run: the first
	// segment goes.
	keep := int64(bytesRuns[1].ByteSize) + int64(bytesRuns[2].ByteSize)
	if _, err := e.c.AlterTopicConfigs(context.Background(), byBytes.ID, setConfigs("retention.bytes", fmt.Sprint(keep))); err != nil {
		t.Fatal(err)
	}
	// retention.ms: an hour after the first segment's records, not yet
	// after the second's.
	e.clock.Advance(secondAt.Add(time.Hour - 30*time.Second).Sub(e.clock.Now()))
	if err := e.c.runRetention(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		top  diskless.Topic
		runs []diskless.RunCoordinate
	}{{byTime, timeRuns}, {byBytes, bytesRuns}} {
		checkLogStart(t, e, c.top, 0, c.runs[1].BaseOffset, c.runs[2].LastOffset+1)
		r := e.find(c.top, 0, c.runs[1].BaseOffset, 1<<30)
		if len(r.Runs) != 2 || r.Runs[0].ObjectKey != c.runs[1].ObjectKey || r.Runs[1].ObjectKey != c.runs[2].ObjectKey {
			t.Fatalf("%s after retention: %+v", c.top.Name, r.Runs)
		}
		states, err := e.c.DescribeFiles(context.Background(), 0, []string{c.runs[0].ObjectKey, c.runs[1].ObjectKey})
		if err != nil || !slices.Equal(states, []diskless.FileState{diskless.FileReleased, diskless.FileLive}) {
			t.Fatalf("%s: segment objects %v (%v), want released, live", c.top.Name, states, err)
		}
	}
	restartIdentical(t, e)
	e.runFileDeletion()
	e.clock.Advance(2 * time.Minute)
	e.runFileDeletion()
	for _, rs := range [][]diskless.RunCoordinate{timeRuns, bytesRuns} {
		if exists(store, rs[0].ObjectKey) || !exists(store, rs[1].ObjectKey) || !exists(store, rs[2].ObjectKey) {
			t.Fatalf("after the deletion delay: dropped segment stored %v, kept segment %v, WAL object %v; want false, true, true",
				exists(store, rs[0].ObjectKey), exists(store, rs[1].ObjectKey), exists(store, rs[2].ObjectKey))
		}
	}
}
