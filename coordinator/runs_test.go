package coordinator

import (
	"context"
	"reflect"
	"testing"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// TestRunsOfAFile: a file commit indexes one run per partition — the
// partition's accepted batches back to back in the object — and more only
// where its batches are interrupted: by a refused batch (a duplicate),
// another partition's batch between them, or a change of timestamp type.
// The runs, their coordinates, the answers to a repeated commit (rebuilt
// from the runs once the answer cache is gone) and the state are the same
// after a replay and after a snapshot.
func TestRunsOfAFile(t *testing.T) {
	for _, snapshots := range []int64{-1, 1} {
		e := newEnv(t, 1, func(c *Config) { c.SnapshotIntervalRecords = snapshots })
		top := e.createTopic("t", 2, nil)
		lat := func(b diskless.CommitBatch) diskless.CommitBatch {
			b.TimestampType = batch.TimestampLogAppendTime
			return b
		}
		// Partition 0 of the first file: [0,1] [2] [3,5] back to back,
		// the retry of [2] (refused: a duplicate), [6,7], then
		// partition 1's [0], then partition 0's [8] and a LogAppendTime
		// [9,10].
		first := e.commit(nextKey(), idem(top, 0, 1, 0, 0, 2))
		if first[0].Err != nil {
			t.Fatal(first[0].Err)
		}
		key := nextKey()
		batches := []diskless.CommitBatch{
			withMaxTs(idem(top, 0, 1, 0, 2, 1), 10),
			withMaxTs(idem(top, 0, 1, 0, 3, 3), 30),
			withMaxTs(idem(top, 0, 1, 0, 2, 1), 10), // a duplicate of the first
			withMaxTs(plain(top, 0, 2), 20),
			plain(top, 1, 1),
			withMaxTs(plain(top, 0, 1), 5),
			lat(withMaxTs(plain(top, 0, 2), 99)),
		}
		res := e.commit(key, batches...)
		wantBase := []int64{2, 3, 2, 6, 0, 8, 9}
		for i, r := range res {
			if r.Err != nil || r.BaseOffset != wantBase[i] || r.Duplicate != (i == 2) {
				t.Fatalf("batch %d: %s at %d (duplicate %v), want %d", i, resName(r), r.BaseOffset, r.Duplicate, wantBase[i])
			}
		}
		type run struct {
			base, last, byteOffset int64
			size                   int32
			maxTs                  int64
			tsType                 int8
		}
		want := []run{
			{0, 1, 0, 100, 1000, batch.TimestampCreateTime},     // the first file
			{2, 5, 0, 200, 30, batch.TimestampCreateTime},       // [2] [3,5]
			{6, 7, 300, 100, 20, batch.TimestampCreateTime},     // after the duplicate
			{8, 8, 500, 100, 5, batch.TimestampCreateTime},      // after partition 1's batch
			{9, 10, 600, 100, 99, batch.TimestampLogAppendTime}, // another timestamp type
		}
		check := func(stage string) {
			t.Helper()
			r := e.find(top, 0, 0, 1<<30)
			var got []run
			for _, c := range r.Runs {
				got = append(got, run{c.BaseOffset, c.LastOffset, c.ByteOffset, c.ByteSize, c.BatchMaxTimestamp, c.TimestampType})
				if c.FileSize != 700 && c.BaseOffset > 0 {
					t.Fatalf("%s: run %+v, file size %d, want 700", stage, c, c.FileSize)
				}
			}
			if r.Err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: runs\n%+v\nwant\n%+v", stage, got, want)
			}
			// A fetch from inside a run gets the whole run.
			if r := e.find(top, 0, 4, 0); len(r.Runs) != 1 || r.Runs[0].BaseOffset != 2 || r.Runs[0].LastOffset != 5 {
				t.Fatalf("%s: find from 4: %+v", stage, r.Runs)
			}
			if r := e.find(top, 1, 0, 0); len(r.Runs) != 1 || r.Runs[0].ByteOffset != 400 {
				t.Fatalf("%s: partition 1: %+v", stage, r.Runs)
			}
			s := e.c.shards[0]
			s.mu.RLock()
			live := s.mu.st.files[s.mu.st.fileByKey[key]].live
			s.mu.RUnlock()
			if live != 5 {
				t.Fatalf("%s: the file has %d live runs, want 5 (4 of partition 0, 1 of partition 1)", stage, live)
			}
		}
		check("online")
		e.reopenSame()
		check("after restart")
		// The answer cache is gone: the repeat is answered from the runs.
		again := e.commit(key, batches...)
		for i, r := range again {
			want := res[i]
			want.Duplicate = true
			if i == 2 {
				// The refused copy is no batch of the file: its first
				// answer (a duplicate of [2]) is unknown now.
				if r.Err == nil {
					t.Fatalf("repeat of the refused batch: %s at %d", resName(r), r.BaseOffset)
				}
				continue
			}
			if r != want {
				t.Fatalf("repeat %d: %+v, want %+v", i, r, want)
			}
		}
	}
}

// TestRunOffsetSpanBounded: a run never spans more than MaxInt32 offsets
// (runEntry.lastOffsetDelta): the batch that would take it past starts a
// new run.
func TestRunOffsetSpanBounded(t *testing.T) {
	e := newEnv(t, 1)
	top := e.createTopic("t", 1, nil)
	big := plain(top, 0, 1)
	big.LastOffsetDelta = 1<<30 - 1 // 2^30 records
	e.commit(nextKey(), big, big, big)
	// Two batches make a run of exactly MaxInt32+1 offsets; the third
	// starts another.
	r := e.find(top, 0, 0, 1<<30)
	if len(r.Runs) != 2 || r.Runs[0].LastOffset != 1<<31-1 || r.Runs[1].BaseOffset != 1<<31 || r.Runs[1].LastOffset != 3<<30-1 {
		t.Fatalf("runs %+v", r.Runs)
	}
	restartIdentical(t, e)
	if _, err := e.c.DeleteRecords(context.Background(), diskless.TopicPartition{TopicID: top.ID}, 1<<31); err != nil {
		t.Fatal(err)
	}
	if r := e.find(top, 0, 1<<31, 0); len(r.Runs) != 1 || r.LogStartOffset != 1<<31 {
		t.Fatalf("after DeleteRecords: %+v", r)
	}
}
