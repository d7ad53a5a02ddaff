package coordinator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
)

// fileTable returns the size of shard's file table: slots (free ones
// included) and keys.
func (e *env) fileTable(shard int32) (slots, keys int) {
	s := e.c.shards[shard]
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.mu.st.files), len(s.mu.st.fileByKey)
}

// churnFiles commits files to a topic of its own ("churn", two
// partitions), one every 10 minutes, each released at once
// (DeleteRecords) and closed 20 minutes after its commit (record 106, as
// the file lifecycle writes it; the least grace period is 10 minutes), so
// that its shard forgets closed files and reuses their slots. It returns
// how many files the shards forgot.
func churnFiles(t *testing.T, e *env, rounds int) int64 {
	t.Helper()
	top := e.createTopic("churn", 2, map[string]string{"retention.ms": "-1"})
	type open struct {
		key   string
		shard int32
		at    time.Time
	}
	var pending []open
	forgotten := e.c.Stats().FilesForgotten.Load()
	for r := range rounds {
		e.clock.Advance(10 * time.Minute)
		p := int32(r % 2)
		k := nextKey()
		e.commit(k, plain(top, p, 1))
		pending = append(pending, open{k, e.c.ShardFor(top.ID, p), e.clock.Now()})
		if _, err := e.c.DeleteRecords(context.Background(), diskless.TopicPartition{TopicID: top.ID, Partition: p}, -1); err != nil {
			t.Fatal(err)
		}
		for len(pending) > 0 && e.clock.Now().Sub(pending[0].at) >= 20*time.Minute {
			e.admin(pending[0].shard, &records.FileDeleted{ObjectKey: pending[0].key, DeleterShard: pending[0].shard})
			pending = pending[1:]
		}
	}
	return e.c.Stats().FilesForgotten.Load() - forgotten
}

// TestClosedFilesForgotten runs files through their whole life — commit,
// release (DeleteRecords), deletion and close (runFileDeletion) — for ten
// hours of log time, one file every 10 minutes, while other files stay
// live, and checks that the file table holds only the live files and
// those of the last hour or so (closed ones forgotten, their slots
// reused), that a forgotten key is unknown and a recently closed one
// closed, that the live files' batches still name their objects, and that
// a restart (replay, or snapshots plus replay) rebuilds the same table.
func TestClosedFilesForgotten(t *testing.T) {
	for _, tc := range []struct {
		name      string
		snapshots int64
	}{{"replay only", -1}, {"snapshot every 7 records", 7}} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newEnvObjects(t, 1, func(c *Config) { c.SnapshotIntervalRecords = tc.snapshots })
			top := e.createTopic("t", 2, map[string]string{"retention.ms": "-1"})
			var (
				churned, kept []string
				keptRes       [][]diskless.CommitBatchResult
			)
			const rounds = 60
			for r := range rounds {
				e.clock.Advance(10 * time.Minute)
				k := nextKey()
				e.commit(k, plain(top, 0, 2))
				churned = append(churned, k)
				if r%4 == 0 {
					k := nextKey()
					keptRes = append(keptRes, e.commit(k, plain(top, 1, 1), plain(top, 1, 2)))
					kept = append(kept, k)
				}
				if _, err := e.c.DeleteRecords(context.Background(), diskless.TopicPartition{TopicID: top.ID, Partition: 0}, -1); err != nil {
					t.Fatal(err)
				}
				e.runFileDeletion()
			}
			// Churned file r is released at once, deleted and closed a
			// deletion delay later (round r+1: its shard is its only owner,
			// so no grace period), and forgotten by the first commit more
			// than an hour of log time after its own (round r+7).
			check := func(stage string) {
				t.Helper()
				for _, c := range []struct {
					key  string
					want diskless.FileState
				}{
					{churned[0], diskless.FileUnknown},
					{churned[rounds-8], diskless.FileUnknown},
					{churned[rounds-7], diskless.FileClosed},
					{churned[rounds-2], diskless.FileClosed},
					{churned[rounds-1], diskless.FileReleased},
					{kept[0], diskless.FileLive},
					{kept[len(kept)-1], diskless.FileLive},
				} {
					if got := e.fileStates(c.key)[0]; got != c.want {
						t.Fatalf("%s: %s is %v, want %v", stage, c.key, got, c.want)
					}
				}
				slots, keys := e.fileTable(0)
				if want := len(kept) + 7; keys != want {
					t.Fatalf("%s: %d keys in the file table, want %d (the live files and the last 7 churned)", stage, keys, want)
				}
				if slots > keys+2 {
					t.Fatalf("%s: %d slots for %d files", stage, slots, keys)
				}
				// The live files' batches, in slots their neighbours' freed
				// slots were reused around, still name their objects.
				// Each kept file's two batches of the partition are one run.
				r := e.find(top, 1, 0, 1<<30)
				if r.Err != nil || len(r.Runs) != len(kept) {
					t.Fatalf("%s: find: %+v", stage, r)
				}
				for i, b := range r.Runs {
					if want := kept[i]; b.ObjectKey != want || b.BaseOffset != keptRes[i][0].BaseOffset ||
						b.LastOffset != keptRes[i][1].BaseOffset+1 {
						t.Fatalf("%s: run %d at [%d, %d] in %s, want batches at %d and %d in %s", stage, i, b.BaseOffset, b.LastOffset,
							b.ObjectKey, keptRes[i][0].BaseOffset, keptRes[i][1].BaseOffset, want)
					}
				}
			}
			check("online")
			if n := e.c.Stats().FilesForgotten.Load(); n != rounds-7 {
				t.Fatalf("FilesForgotten %d, want %d", n, rounds-7)
			}
			before := e.reopenSame()
			check("after restart")
			// A restart empties the answer cache: repeats are answered
			// from the file table. A live file's, found by commit order
			// among reused slots, as before; a recently closed file's is
			// not committed again.
			for i, k := range kept {
				res := e.commit(k, plain(top, 1, 1), plain(top, 1, 2))
				for j, r := range res {
					if r.Err != nil || !r.Duplicate || r.BaseOffset != keptRes[i][j].BaseOffset {
						t.Fatalf("repeat of live %s: batch %d: %+v, want duplicate at %d", k, j, r, keptRes[i][j].BaseOffset)
					}
				}
			}
			hwm := e.find(top, 0, 0, 0).HighWatermark
			e.commit(churned[rounds-7], plain(top, 0, 2))
			if got := e.find(top, 0, 0, 0).HighWatermark; got != hwm {
				t.Fatalf("repeat of a closed file committed it again: high watermark %d, want %d", got, hwm)
			}
			if !reflect.DeepEqual(stateBytes(e.c), before) {
				t.Fatal("repeated commits changed the state")
			}
		})
	}
}

// lifecycleRecords returns the records of a shard (0) whose files go
// through their whole life: one file every 7–8 minutes of log time,
// some shared with shard 2 or spanning two partitions, partitions trimmed
// now and then (to the high watermark or halfway), and released files
// closed 20 minutes or more after their commit (the least grace period
// is 10) in random order, some of them only passes later: the closed-file
// queue is not in commit order, and closed files wait in it across
// commits.
// It also returns the state they build.
func lifecycleRecords(tb testing.TB, files int) ([]records.Record, *state) {
	tb.Helper()
	st := newState(0, DefaultProducerIDExpirationMs, discardLogger())
	var recs []records.Record
	add := func(r records.Record) {
		tb.Helper()
		if err := st.apply(r); err != nil {
			tb.Fatalf("record %d: %v", len(recs), err)
		}
		recs = append(recs, r)
	}
	tid := diskless.TopicID{9}
	for p := range int32(3) {
		add(&records.PartitionCreated{TopicID: tid, TopicName: "t", Partition: p})
	}
	rnd := rand.New(rand.NewPCG(3, 4))
	now := int64(1_700_000_000_000)
	for i := range files {
		now += 7*60_000 + rnd.Int64N(60_000)
		parts := []int32{int32(i % 3)}
		if i%5 == 0 {
			parts = append(parts, int32((i+1)%3))
		}
		rec := &records.FileCommitted{ObjectKey: fmt.Sprintf("wal/%06d", i), ObjectFormat: 1, FileSize: 1000,
			OwnerIDs: []int32{0, 2}[:1+i%2]}
		ft := records.FileTopic{TopicID: tid}
		for j, p := range parts {
			hwm := st.partitions[diskless.TopicPartition{TopicID: tid, Partition: p}].hwm
			fp := records.FilePartition{Partition: p}
			for k := range 1 + rnd.IntN(3) {
				fp.Batches = append(fp.Batches, records.CommittedBatch{Magic: 2, ByteOffset: int32(j*100 + k*10), ByteSize: 10,
					AssignedBaseOffset: hwm, AssignedLastOffset: hwm, LogAppendTimestamp: now, BatchMaxTimestamp: now, ProducerID: -1})
				hwm++
			}
			ft.Partitions = append(ft.Partitions, fp)
		}
		rec.Topics = []records.FileTopic{ft}
		add(rec)
		if i%2 == 1 {
			p := st.partitions[diskless.TopicPartition{TopicID: tid, Partition: int32(rnd.IntN(3))}]
			to := p.hwm
			if rnd.IntN(3) == 0 {
				to = (p.logStart + p.hwm) / 2
			}
			if to > p.logStart {
				add(&records.RecordsDeleted{TopicID: tid, Partition: p.tp.Partition, NewLogStartOffset: to})
			}
		}
		var due []string
		for fi := range st.released {
			if f := &st.files[fi]; now-f.appendTime >= 20*60_000 {
				due = append(due, f.key)
			}
		}
		slices.Sort(due)
		rnd.Shuffle(len(due), func(a, b int) { due[a], due[b] = due[b], due[a] })
		for _, k := range due[:rnd.IntN(len(due)+1)] {
			add(&records.FileDeleted{ObjectKey: k})
		}
	}
	return recs, st
}

// TestSnapshotAnywhereEqualsReplay: for a log that forgets files and
// reuses their slots, the state loaded from a snapshot taken after any
// record, then replayed to the end, equals the state replayed from the
// start — same slots, same free list, same closed-file queue.
func TestSnapshotAnywhereEqualsReplay(t *testing.T) {
	const files = 300
	recs, full := lifecycleRecords(t, files)
	want := full.appendSnapshot(nil)
	// The life did forget files and reuse slots.
	if len(full.files) > files/6 || len(full.fileByKey) > len(full.files) {
		t.Fatalf("file table of %d slots, %d keys after %d files", len(full.files), len(full.fileByKey), files)
	}
	if fs := full.fileState("wal/000000"); fs != diskless.FileUnknown {
		t.Fatalf("the first file is %v, want forgotten", fs)
	}
	st := newState(0, DefaultProducerIDExpirationMs, discardLogger())
	for i := 0; i <= len(recs); i++ {
		if i%3 == 0 || i == len(recs) {
			snap := st.appendSnapshot(nil)
			loaded := newState(0, DefaultProducerIDExpirationMs, discardLogger())
			if err := loaded.decodeSnapshot(snap); err != nil {
				t.Fatalf("snapshot after %d records: %v", i, err)
			}
			if got := loaded.appendSnapshot(nil); !bytes.Equal(got, snap) {
				t.Fatalf("snapshot after %d records does not round-trip", i)
			}
			for j, r := range recs[i:] {
				if err := loaded.apply(r); err != nil {
					t.Fatalf("snapshot after %d records, record %d: %v", i, i+j, err)
				}
			}
			if got := loaded.appendSnapshot(nil); !bytes.Equal(got, want) {
				t.Fatalf("snapshot after %d records, then replay, differs from replay from the start", i)
			}
		}
		if i < len(recs) {
			if err := st.apply(recs[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	// And every live batch still names its own file.
	for _, rec := range recs {
		fc, ok := rec.(*records.FileCommitted)
		if !ok {
			continue
		}
		for _, ft := range fc.Topics {
			for _, fp := range ft.Partitions {
				p := full.partitions[diskless.TopicPartition{TopicID: ft.TopicID, Partition: fp.Partition}]
				for _, b := range fp.Batches {
					if b.AssignedBaseOffset < p.logStart {
						continue
					}
					e := p.runs.at(int(p.runs.searchOffset(p.runs.len(), b.AssignedBaseOffset)))
					if got := full.files[e.file].key; got != fc.ObjectKey {
						t.Fatalf("batch at %d names %q, want %q", b.AssignedBaseOffset, got, fc.ObjectKey)
					}
				}
			}
		}
	}
}

// TestForgetKeepsCloseOrder checks forgetClosed directly: files are
// forgotten in close order, only once committed more than the horizon
// before the commit that forgets them, a later-closed file waiting behind
// an earlier-closed younger one, and the next commits take the freed
// slots, last freed first.
func TestForgetKeepsCloseOrder(t *testing.T) {
	st := newState(0, DefaultProducerIDExpirationMs, discardLogger())
	tid := diskless.TopicID{1}
	if err := st.apply(&records.PartitionCreated{TopicID: tid, TopicName: "t"}); err != nil {
		t.Fatal(err)
	}
	const h = forgetClosedFilesAfterMs
	commit := func(key string, at int64) {
		t.Helper()
		hwm := st.partitions[diskless.TopicPartition{TopicID: tid, Partition: 0}].hwm
		if err := st.apply(&records.FileCommitted{ObjectKey: key, ObjectFormat: 1, FileSize: 10, OwnerIDs: []int32{0},
			Topics: []records.FileTopic{{TopicID: tid, Partitions: []records.FilePartition{{Batches: []records.CommittedBatch{{Magic: 2, ByteSize: 10,
				AssignedBaseOffset: hwm, AssignedLastOffset: hwm, LogAppendTimestamp: at, ProducerID: -1}}}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	apply := func(r records.Record) {
		t.Helper()
		if err := st.apply(r); err != nil {
			t.Fatal(err)
		}
	}
	commit("a", 0)
	commit("b", 1000)
	commit("c", 2000)
	apply(&records.RecordsDeleted{TopicID: tid, NewLogStartOffset: 3})
	// Closed in the order b, a, c.
	for _, k := range []string{"b", "a", "c"} {
		apply(&records.FileDeleted{ObjectKey: k})
	}
	states := func() []diskless.FileState {
		return []diskless.FileState{st.fileState("a"), st.fileState("b"), st.fileState("c")}
	}
	commit("d", h+1000) // a is due, but waits behind b (committed at 1000, not before h+1000−h)
	if got := states(); !slices.Equal(got, []diskless.FileState{diskless.FileClosed, diskless.FileClosed, diskless.FileClosed}) {
		t.Fatalf("after d: %v", got)
	}
	commit("e", h+1001) // b, then a, are due; c is not
	if got := states(); !slices.Equal(got, []diskless.FileState{diskless.FileUnknown, diskless.FileUnknown, diskless.FileClosed}) {
		t.Fatalf("after e: %v", got)
	}
	// b's slot (1) was freed before a's (0): the next file takes a's.
	if got := st.freeSlots; !slices.Equal(got, []int32{1, 0}) {
		t.Fatalf("free slots %v, want [1 0]", got)
	}
	commit("f", h+1002)
	commit("g", h+2001) // c is due now, after g took the last free slot
	if fi := st.fileByKey["f"]; fi != 0 {
		t.Fatalf("f in slot %d, want 0", fi)
	}
	if fi := st.fileByKey["g"]; fi != 1 {
		t.Fatalf("g in slot %d, want 1", fi)
	}
	if st.fileState("c") != diskless.FileUnknown || !slices.Equal(st.freeSlots, []int32{2}) || len(st.files) != 5 {
		t.Fatalf("c %v, free %v, %d slots", st.fileState("c"), st.freeSlots, len(st.files))
	}
}

// TestDecodeSnapshotFileTable: snapshots whose file table, free slots or
// closed-file queue contradict each other are refused.
func TestDecodeSnapshotFileTable(t *testing.T) {
	_, base := lifecycleRecords(t, 120)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for fi := range base.released {
			if !yield(base.files[fi].key) {
				return
			}
		}
	}) {
		if err := base.apply(&records.FileDeleted{ObjectKey: k}); err != nil {
			t.Fatal(err)
		}
	}
	if len(base.freeSlots) < 2 || len(base.closedFiles()) < 2 {
		t.Fatalf("fixture has %d free slots and %d closed files, want ≥ 2 of each", len(base.freeSlots), len(base.closedFiles()))
	}
	// Two files with live batches, one after the other in a partition.
	var a, b int32 = -1, -1
	for _, p := range base.partitions {
		v := p.runs.freeze()
		for es := range v.chunks {
			for _, e := range es {
				if a < 0 {
					a = e.file
				} else if b < 0 && e.file != a {
					b = e.file
				}
			}
		}
		if b >= 0 {
			break
		}
		a = -1
	}
	if b < 0 {
		t.Fatal("no partition holds two files")
	}
	cases := []struct {
		name   string
		mutate func(fz *frozenState)
	}{
		{"free slot listed twice", func(fz *frozenState) { fz.free = append(fz.free[1:], fz.free[1]) }},
		{"free slot not listed", func(fz *frozenState) { fz.free = fz.free[1:] }},
		{"closed file listed as free", func(fz *frozenState) { fz.free[0] = fz.closed[0] }},
		{"free slot listed as closed", func(fz *frozenState) { fz.closed[0] = fz.free[0] }},
		{"closed file not queued", func(fz *frozenState) { fz.closed = fz.closed[1:] }},
		{"open file queued", func(fz *frozenState) { fz.closed[0] = a }},
		{"slot out of range", func(fz *frozenState) { fz.free[0] = int32(len(fz.files)) }},
		{"free slot with a size", func(fz *frozenState) { fz.files[fz.free[0]].size = 1 }},
		{"commit number repeated", func(fz *frozenState) { fz.files[b].seq = fz.files[a].seq }},
		{"commit number not below the next", func(fz *frozenState) { fz.files[a].seq = fz.nextFileSeq }},
		{"files out of commit order in a partition", func(fz *frozenState) {
			fz.files[a].seq, fz.files[b].seq = fz.files[b].seq, fz.files[a].seq
		}},
		{"batch in a free slot", func(fz *frozenState) {
			fz.files[a] = freeFile
			fz.free = append(fz.free, a)
		}},
	}
	if err := newState(0, DefaultProducerIDExpirationMs, discardLogger()).decodeSnapshot(base.freeze().appendTo(nil)); err != nil {
		t.Fatalf("unmodified: %v", err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fz := base.freeze()
			tc.mutate(fz)
			err := newState(0, DefaultProducerIDExpirationMs, discardLogger()).decodeSnapshot(fz.appendTo(nil))
			if !errors.Is(err, errBadSnapshot) {
				t.Fatalf("decode: %v, want errBadSnapshot", err)
			}
		})
	}
}
