package coordinator

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// checkLogStart checks what clients see of a partition whose log start
// is start and high watermark hwm: FindBatches below the log start is
// OFFSET_OUT_OF_RANGE, at it returns the batch holding it; ListOffsets
// earliest is the log start and timestamp lookups never answer below it.
func checkLogStart(t *testing.T, e *env, top diskless.Topic, p int32, start, hwm int64) {
	t.Helper()
	ctx := context.Background()
	tp := diskless.TopicPartition{TopicID: top.ID, Partition: p}
	if r := e.c.ListOffsets(ctx, tp, diskless.ListOffsetsEarliest); r.Err != nil || r.Offset != start || r.LogStartOffset != start || r.HighWatermark != hwm {
		t.Fatalf("ListOffsets earliest: %+v, want log start %d, high watermark %d", r, start, hwm)
	}
	if start > 0 {
		if r := e.find(top, p, start-1, 1<<20); r.Err != kerr.OffsetOutOfRange || r.LogStartOffset != start {
			t.Fatalf("FindBatches below the log start: %s %+v", errName(r.Err), r)
		}
	}
	r := e.find(top, p, start, 1<<20)
	if r.Err != nil || r.LogStartOffset != start || r.HighWatermark != hwm {
		t.Fatalf("FindBatches at the log start: %s %+v", errName(r.Err), r)
	}
	if start == hwm {
		if len(r.Runs) != 0 {
			t.Fatalf("FindBatches on an emptied partition: %+v", r.Runs)
		}
	} else if len(r.Runs) == 0 || r.Runs[0].BaseOffset > start || r.Runs[0].LastOffset < start {
		t.Fatalf("FindBatches at %d: %+v", start, r.Runs)
	}
	if lr := e.c.ListOffsets(ctx, tp, 0); lr.Candidate != nil && lr.Candidate.LastOffset < start {
		t.Fatalf("timestamp lookup answers below the log start: %+v", lr.Candidate)
	}
}

// restartIdentical restarts the coordinator and checks that clients see
// the same answers and the state encodes to the same bytes (invariant 6).
func restartIdentical(t *testing.T, e *env) {
	t.Helper()
	before, beforeState := answers(t, e.c), stateBytes(e.c)
	e.reopen()
	if after := answers(t, e.c); after != before {
		t.Fatalf("answers differ after restart:\n%s\n%s", before, after)
	}
	if !reflect.DeepEqual(stateBytes(e.c), beforeState) {
		t.Fatal("state differs after restart")
	}
}

func TestRetentionByTime(t *testing.T) {
	const noTs = -1 << 62 // marks a batch sent without timestamp (−1)
	cases := []struct {
		name      string
		retention string
		lat       bool    // a LogAppendTime topic
		maxTs     []int64 // ms relative to the commit time, one batch each
		age       time.Duration
		wantStart int64 // batches are one record each: the first kept
	}{
		{"create time: old batches go", "1000", false, []int64{-5000, -3000, 0, 0}, 500 * time.Millisecond, 2},
		{"create time: only a prefix goes", "1000", false, []int64{-5000, 10_000, -5000}, 500 * time.Millisecond, 1},
		{"create time: max timestamp at the cutoff stays", "1000", false, []int64{-1001, -1000, -5000}, 0, 1},
		{"create time: nothing old enough", "1000", false, []int64{-800, 0}, 100 * time.Millisecond, 0},
		{"create time: all expired empties the partition", "1000", false, []int64{-5000, -4000}, 0, 2},
		{"create time: no timestamp judged by append time, young", "1000", false, []int64{noTs, noTs}, 500 * time.Millisecond, 0},
		{"create time: no timestamp judged by append time, old", "1000", false, []int64{noTs, noTs}, 1500 * time.Millisecond, 2},
		{"log append time: producer timestamps ignored", "1000", true, []int64{-5000, -5000}, 500 * time.Millisecond, 0},
		{"log append time: expired by append time", "1000", true, []int64{10_000, 10_000}, 1500 * time.Millisecond, 2},
		{"retention.ms -1 keeps forever", "-1", false, []int64{-1 << 40}, 1000 * time.Hour, 0},
		{"retention.ms 0", "0", false, []int64{-1, 0, 1}, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 2)
			configs := map[string]string{"retention.ms": tc.retention}
			if tc.lat {
				configs["message.timestamp.type"] = "LogAppendTime"
			}
			top := e.createTopic("t", 1, configs)
			other := e.createTopic("keep", 1, map[string]string{"retention.ms": "-1"})
			commitTime := e.clock.Ms()
			for _, rel := range tc.maxTs {
				b := plain(top, 0, 1)
				b.BatchMaxTimestamp = commitTime + rel
				if rel == noTs {
					b.BatchMaxTimestamp = -1
				}
				if tc.lat {
					b.TimestampType = batch.TimestampLogAppendTime
				}
				e.commit(nextKey(), b)
			}
			e.commit(nextKey(), withMaxTs(plain(other, 0, 1), 0))
			e.clock.Advance(tc.age)
			stats := e.c.Stats()
			if err := e.c.runRetention(context.Background()); err != nil {
				t.Fatal(err)
			}
			hwm := int64(len(tc.maxTs))
			checkLogStart(t, e, top, 0, tc.wantStart, hwm)
			checkLogStart(t, e, other, 0, 0, 1)
			wantMoves := int64(0)
			if tc.wantStart > 0 {
				wantMoves = 1
			}
			if got := stats.RetentionMoves.Load(); got != wantMoves {
				t.Fatalf("RetentionMoves %d, want %d", got, wantMoves)
			}
			if got := stats.FilesReleased.Load(); got != tc.wantStart {
				t.Fatalf("FilesReleased %d, want %d (one file per batch)", got, tc.wantStart)
			}
			// A second pass at the same time changes nothing.
			if err := e.c.runRetention(context.Background()); err != nil || stats.RetentionMoves.Load() != wantMoves {
				t.Fatalf("second pass: %v, %d moves", err, stats.RetentionMoves.Load())
			}
			restartIdentical(t, e)
			checkLogStart(t, e, top, 0, tc.wantStart, hwm)
			// Commits continue from the high watermark.
			if r := e.commit(nextKey(), withMaxTs(plain(top, 0, 1), e.clock.Ms()))[0]; r.Err != nil || r.BaseOffset != hwm || r.LogStartOffset != tc.wantStart {
				t.Fatalf("commit after retention: %+v", r)
			}
		})
	}
}

func TestRetentionBySize(t *testing.T) {
	cases := []struct {
		name      string
		bytes     int64
		deleteTo  int64 // DeleteRecords first (−2: no)
		wantStart int64 // batches of 100 bytes and 2 records: [0,1] [2,3] …
	}{
		{"unlimited", -1, -2, 0},
		{"under the limit", 500, -2, 0},
		{"keeps at least retention.bytes", 250, -2, 4},
		{"exactly retention.bytes left", 300, -2, 4},
		{"one byte more keeps one batch more", 301, -2, 2},
		{"zero empties", 0, -2, 10},
		{"a partly deleted batch counts whole", 250, 3, 4},
		{"after DeleteRecords under the limit", 350, 3, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1)
			top := e.createTopic("t", 1, map[string]string{"retention.bytes": strconv.FormatInt(tc.bytes, 10), "retention.ms": "-1"})
			for range 5 {
				e.commit(nextKey(), withSize(plain(top, 0, 2), 100))
			}
			tp := diskless.TopicPartition{TopicID: top.ID, Partition: 0}
			if tc.deleteTo >= 0 {
				if _, err := e.c.DeleteRecords(context.Background(), tp, tc.deleteTo); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.c.runRetention(context.Background()); err != nil {
				t.Fatal(err)
			}
			start := tc.wantStart
			if tc.deleteTo > start {
				start = tc.deleteTo
			}
			checkLogStart(t, e, top, 0, start, 10)
			restartIdentical(t, e)
			checkLogStart(t, e, top, 0, start, 10)
		})
	}
}

// TestRetentionForgetsRemovedProducers: idempotent producer state whose
// batches are all gone is dropped (SPEC §3), the same after a restart.
func TestRetentionForgetsRemovedProducers(t *testing.T) {
	e := newEnv(t, 1)
	top := e.createTopic("t", 1, map[string]string{"retention.ms": "1000"})
	now := e.clock.Ms()
	e.commit(nextKey(), withMaxTs(idem(top, 0, 7, 0, 0, 2), now-5000))
	e.commit(nextKey(), withMaxTs(idem(top, 0, 8, 0, 0, 2), now))
	if err := e.c.runRetention(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkLogStart(t, e, top, 0, 2, 4)
	restartIdentical(t, e)
	// Producer 7 is forgotten: any sequence starts it afresh. Producer 8
	// is kept: a gap is refused.
	if r := e.commit(nextKey(), idem(top, 0, 7, 0, 40, 1))[0]; r.Err != nil {
		t.Fatalf("removed producer: %s", resName(r))
	}
	if r := e.commit(nextKey(), idem(top, 0, 8, 0, 40, 1))[0]; r.Err != kerr.OutOfOrderSequenceNumber {
		t.Fatalf("kept producer: %s", resName(r))
	}
}

// TestDeleteRecords runs SPEC §5's DeleteRecords semantics as steps on one
// partition holding batches [0,2] [3,4] [5,9] (high watermark 10), the
// first two one run.
func TestDeleteRecords(t *testing.T) {
	e := newEnv(t, 1)
	top := e.createTopic("t", 1, nil)
	e.commit(nextKey(), plain(top, 0, 3), plain(top, 0, 2))
	e.commit(nextKey(), plain(top, 0, 5))
	tp := diskless.TopicPartition{TopicID: top.ID, Partition: 0}
	steps := []struct {
		name    string
		tp      diskless.TopicPartition
		offset  int64
		want    int64 // low watermark
		wantErr error
	}{
		{"other negatives are out of range", tp, -2, -1, kerr.OffsetOutOfRange},
		{"above the high watermark is out of range", tp, 11, -1, kerr.OffsetOutOfRange},
		{"zero is a no-op", tp, 0, 0, nil},
		{"inside a batch", tp, 4, 4, nil},
		{"below the log start is a no-op", tp, 2, 4, nil},
		{"at the log start is a no-op", tp, 4, 4, nil},
		{"batch boundary", tp, 5, 5, nil},
		{"unknown partition", diskless.TopicPartition{TopicID: top.ID, Partition: 1}, 0, -1, kerr.UnknownTopicOrPartition},
		{"unknown topic", diskless.TopicPartition{TopicID: diskless.TopicID{9}, Partition: 0}, 0, -1, kerr.UnknownTopicOrPartition},
		{"-1 is the high watermark", tp, -1, 10, nil},
		{"at the high watermark again", tp, 10, 10, nil},
	}
	for _, st := range steps {
		low, err := e.c.DeleteRecords(context.Background(), st.tp, st.offset)
		if !errors.Is(err, st.wantErr) || low != st.want {
			t.Fatalf("%s: DeleteRecords(%d) = %d, %v; want %d, %v", st.name, st.offset, low, err, st.want, errName(st.wantErr))
		}
		if st.name == "inside a batch" {
			// The run holding the new log start is still served whole
			// (fetch serves from the batch holding the offset).
			checkLogStart(t, e, top, 0, 4, 10)
			if r := e.find(top, 0, 4, 0); len(r.Runs) != 1 || r.Runs[0].BaseOffset != 0 || r.Runs[0].LastOffset != 4 {
				t.Fatalf("run holding the log start: %+v", r.Runs)
			}
			restartIdentical(t, e)
		}
	}
	checkLogStart(t, e, top, 0, 10, 10)
	restartIdentical(t, e)
	checkLogStart(t, e, top, 0, 10, 10)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	gate := holdShard(t, e.c.shards[0])
	errc := make(chan error, 1)
	go func() {
		_, err := e.c.DeleteRecords(ctx, tp, -1)
		errc <- err
	}()
	close(gate)
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled DeleteRecords: %v", err)
	}
	e.c.Close()
	if _, err := e.c.DeleteRecords(context.Background(), tp, -1); !errors.Is(err, diskless.ErrClosed) {
		t.Fatalf("DeleteRecords after Close: %v", err)
	}
	e.c = nil
}

// TestDeleteRecordsAppendFailure: a log start move that is not durable is
// never seen, and the state is rebuilt from the log.
func TestDeleteRecordsAppendFailure(t *testing.T) {
	for _, written := range []bool{false, true} {
		t.Run(fmt.Sprintf("written=%v", written), func(t *testing.T) {
			logs, mu := map[int32]*testLog{}, &sync.Mutex{}
			e := newEnv(t, 1, withTestLogs(logs, mu))
			top := e.createTopic("t", 1, nil)
			e.commit(nextKey(), plain(top, 0, 3))
			logs[0].setFail(func([][]byte) (bool, error) { return written, errors.New("injected disk failure") })
			if _, err := e.c.DeleteRecords(context.Background(), diskless.TopicPartition{TopicID: top.ID, Partition: 0}, 2); err == nil {
				t.Fatal("DeleteRecords with a failing log succeeded")
			}
			logs[0].setFail(nil)
			want := map[bool]int64{false: 0, true: 2}[written]
			checkLogStart(t, e, top, 0, want, 3)
			restartIdentical(t, e)
		})
	}
}

// TestRetentionLoop: Open starts the periodic check, driven by the
// injected clock; Close stops it (goleak).
func TestRetentionLoop(t *testing.T) {
	e := newEnv(t, 1, func(c *Config) { c.RetentionCheckInterval = 5 * time.Millisecond })
	top := e.createTopic("t", 1, map[string]string{"retention.ms": "1000"})
	e.commit(nextKey(), withMaxTs(plain(top, 0, 1), e.clock.Ms()))
	e.clock.Advance(2 * time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for e.c.ListOffsets(context.Background(), diskless.TopicPartition{TopicID: top.ID, Partition: 0}, diskless.ListOffsetsEarliest).Offset != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the retention loop did not run")
		}
		time.Sleep(time.Millisecond)
	}
}
