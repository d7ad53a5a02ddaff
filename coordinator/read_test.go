package coordinator

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// readFixture commits, to partition 0, runs of one batch each of 1, 4, 2
// and 3 records (offsets [0], [1,4], [5,6], [7,9]) of 100, 200, 300 and
// 400 bytes with max timestamps 50, 30, 70, 70 — the first two in one
// file, 50 bytes apart (as a refused batch between them leaves them), so
// two runs; partition 1 stays empty.
func readFixture(t *testing.T) (*env, diskless.Topic) {
	e := newEnv(t, 1)
	top := e.createTopic("t", 2, nil)
	second := withMaxTs(withSize(plain(top, 0, 4), 200), 30)
	second.ByteOffset = 150
	e.commit(nextKey(), withMaxTs(withSize(plain(top, 0, 1), 100), 50), second)
	e.commit(nextKey(), withMaxTs(withSize(plain(top, 0, 2), 300), 70))
	e.commit(nextKey(), withMaxTs(withSize(plain(top, 0, 3), 400), 70))
	return e, top
}

func TestFindBatches(t *testing.T) {
	e, top := readFixture(t)
	cases := []struct {
		name      string
		partition int32
		offset    int64
		maxBytes  int32
		want      []int64 // base offsets
		err       *kerr.Error
	}{
		{"from start, unlimited", 0, 0, 1 << 30, []int64{0, 1, 5, 7}, nil},
		{"offset inside a run returns that run", 0, 3, 1 << 30, []int64{1, 5, 7}, nil},
		{"last offset of a run", 0, 4, 1 << 30, []int64{1, 5, 7}, nil},
		{"runs until the budget is reached", 0, 0, 300, []int64{0, 1}, nil},
		{"one byte more takes the run that reaches it", 0, 0, 301, []int64{0, 1, 5}, nil},
		// [1,4] is 200 bytes: from 4, an estimated 50 of them are served.
		{"the first run counts from the offset", 0, 4, 100, []int64{1, 5}, nil},
		{"the first run counts whole from its base", 0, 1, 200, []int64{1}, nil},
		{"first run always, even over budget", 0, 7, 10, []int64{7}, nil},
		{"zero budget returns the first run", 0, 1, 0, []int64{1}, nil},
		{"negative budget returns the first run", 0, 1, -1, []int64{1}, nil},
		{"at high watermark: empty", 0, 10, 1000, nil, nil},
		{"above high watermark", 0, 11, 1000, nil, kerr.OffsetOutOfRange},
		{"negative offset", 0, -1, 1000, nil, kerr.OffsetOutOfRange},
		{"empty partition at 0", 1, 0, 1000, nil, nil},
		{"empty partition above", 1, 1, 1000, nil, kerr.OffsetOutOfRange},
		{"unknown partition", 2, 0, 1000, nil, kerr.UnknownTopicOrPartition},
	}
	var reqs []diskless.FindBatchesRequest
	for _, tc := range cases {
		reqs = append(reqs, diskless.FindBatchesRequest{TopicID: top.ID, Partition: tc.partition, Offset: tc.offset, MaxBytes: tc.maxBytes})
	}
	// One call for all: results come back in request order.
	results := e.c.FindBatches(context.Background(), reqs)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := results[i]
			if r.Err != tc.err {
				t.Fatalf("err %s, want %s", errName(r.Err), errName(tc.err))
			}
			var got []int64
			for _, b := range r.Runs {
				got = append(got, b.BaseOffset)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("batches %v, want %v", got, tc.want)
			}
			for j := range got {
				if got[j] != tc.want[j] {
					t.Fatalf("batches %v, want %v", got, tc.want)
				}
			}
			switch {
			case tc.err == kerr.UnknownTopicOrPartition:
			case tc.partition == 0 && (r.LogStartOffset != 0 || r.HighWatermark != 10):
				t.Fatalf("offsets %d/%d, want 0/10", r.LogStartOffset, r.HighWatermark)
			case tc.partition == 1 && (r.LogStartOffset != 0 || r.HighWatermark != 0):
				t.Fatalf("offsets %d/%d, want 0/0", r.LogStartOffset, r.HighWatermark)
			}
		})
	}
	// The coordinate carries what a fetch needs.
	b := results[0].Runs[1]
	if b.ByteOffset != 150 || b.ByteSize != 200 || b.LastOffset != 4 || b.FileSize != 350 ||
		b.BatchMaxTimestamp != 30 || b.TimestampType != batch.TimestampCreateTime || b.ObjectKey == "" ||
		b.ObjectKey != results[0].Runs[0].ObjectKey || b.ObjectKey == results[0].Runs[2].ObjectKey {
		t.Fatalf("coordinate %+v", b)
	}
}

func TestListOffsets(t *testing.T) {
	e, top := readFixture(t)
	cases := []struct {
		name      string
		partition int32
		ts        int64
		offset    int64 // expected Offset
		candidate int64 // expected Candidate base offset, -1: none
		err       *kerr.Error
	}{
		{"earliest", 0, diskless.ListOffsetsEarliest, 0, -1, nil},
		{"latest", 0, diskless.ListOffsetsLatest, 10, -1, nil},
		{"max timestamp: earliest batch holding it", 0, diskless.ListOffsetsMaxTimestamp, -1, 5, nil},
		{"timestamp 0: first batch", 0, 0, -1, 0, nil},
		{"timestamp equal to first max", 0, 50, -1, 0, nil},
		{"first batch in offset order, not by time", 0, 31, -1, 0, nil},
		{"timestamp between", 0, 51, -1, 5, nil},
		{"timestamp equal to largest", 0, 70, -1, 5, nil},
		{"no match", 0, 71, -1, -1, nil},
		{"unsupported special value", 0, -4, -1, -1, kerr.UnsupportedVersion},
		{"empty: earliest", 1, diskless.ListOffsetsEarliest, 0, -1, nil},
		{"empty: latest", 1, diskless.ListOffsetsLatest, 0, -1, nil},
		{"empty: timestamp", 1, 0, -1, -1, nil},
		{"empty: max timestamp", 1, diskless.ListOffsetsMaxTimestamp, -1, -1, nil},
		{"unknown partition", 5, 0, -1, -1, kerr.UnknownTopicOrPartition},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.c.ListOffsets(context.Background(), diskless.TopicPartition{TopicID: top.ID, Partition: tc.partition}, tc.ts)
			if r.Err != tc.err {
				t.Fatalf("err %s, want %s", errName(r.Err), errName(tc.err))
			}
			if r.Offset != tc.offset || r.Timestamp != -1 {
				t.Fatalf("offset %d timestamp %d, want %d/-1", r.Offset, r.Timestamp, tc.offset)
			}
			switch {
			case tc.candidate < 0 && r.Candidate != nil:
				t.Fatalf("candidate %+v, want none", r.Candidate)
			case tc.candidate >= 0 && (r.Candidate == nil || r.Candidate.BaseOffset != tc.candidate):
				t.Fatalf("candidate %+v, want batch at %d", r.Candidate, tc.candidate)
			}
		})
	}
}

// TestListOffsetsFrom: ListOffsetsFrom answers as ListOffsets over the
// batches holding an offset ≥ from (readFixture: [0] at 50, [1,4] at 30,
// [5,6] at 70, [7,9] at 70), also after DeleteRecords and a restart.
func TestListOffsetsFrom(t *testing.T) {
	e, top := readFixture(t)
	type tc struct {
		name      string
		partition int32
		ts, from  int64
		offset    int64 // expected Offset
		candidate int64 // expected Candidate base offset, -1: none
		err       *kerr.Error
	}
	check := func(t *testing.T, cases []tc, logStart int64) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := e.c.ListOffsetsFrom(context.Background(), diskless.TopicPartition{TopicID: top.ID, Partition: tc.partition}, tc.ts, tc.from)
				if r.Err != tc.err {
					t.Fatalf("err %s, want %s", errName(r.Err), errName(tc.err))
				}
				if r.Offset != tc.offset || r.Timestamp != -1 {
					t.Fatalf("offset %d timestamp %d, want %d/-1", r.Offset, r.Timestamp, tc.offset)
				}
				if tc.partition == 0 && (r.LogStartOffset != logStart || r.HighWatermark != 10) {
					t.Fatalf("offsets %d/%d, want %d/10", r.LogStartOffset, r.HighWatermark, logStart)
				}
				switch {
				case tc.candidate < 0 && r.Candidate != nil:
					t.Fatalf("candidate %+v, want none", r.Candidate)
				case tc.candidate >= 0 && (r.Candidate == nil || r.Candidate.BaseOffset != tc.candidate):
					t.Fatalf("candidate %+v, want batch at %d", r.Candidate, tc.candidate)
				}
			})
		}
	}
	check(t, []tc{
		{"earliest: from does not apply", 0, diskless.ListOffsetsEarliest, 5, 0, -1, nil},
		{"latest: from does not apply", 0, diskless.ListOffsetsLatest, 5, 10, -1, nil},
		{"timestamp, from the log start: as ListOffsets", 0, 31, 0, -1, 0, nil},
		{"timestamp, from below the log start", 0, 31, -7, -1, 0, nil},
		{"timestamp, from the next batch", 0, 31, 1, -1, 5, nil},
		{"timestamp, the batch holding from counts", 0, 20, 3, -1, 1, nil},
		{"timestamp, the batch holding from does not reach it", 0, 40, 3, -1, 5, nil},
		{"timestamp, from a batch's last offset", 0, 70, 6, -1, 5, nil},
		{"timestamp, the first of a tie passed", 0, 70, 7, -1, 7, nil},
		{"timestamp, no batch from there reaches it", 0, 51, 10, -1, -1, nil},
		{"timestamp, no batch reaches it", 0, 71, 1, -1, -1, nil},
		{"max timestamp, from the log start: as ListOffsets", 0, diskless.ListOffsetsMaxTimestamp, 0, -1, 5, nil},
		{"max timestamp, past a smaller batch", 0, diskless.ListOffsetsMaxTimestamp, 1, -1, 5, nil},
		{"max timestamp, the earliest of a tie", 0, diskless.ListOffsetsMaxTimestamp, 6, -1, 5, nil},
		{"max timestamp, the first of a tie passed", 0, diskless.ListOffsetsMaxTimestamp, 7, -1, 7, nil},
		{"max timestamp, at the high watermark", 0, diskless.ListOffsetsMaxTimestamp, 10, -1, -1, nil},
		{"max timestamp, past the high watermark", 0, diskless.ListOffsetsMaxTimestamp, 99, -1, -1, nil},
		{"unsupported special value", 0, -4, 0, -1, -1, kerr.UnsupportedVersion},
		{"empty partition", 1, diskless.ListOffsetsMaxTimestamp, 0, -1, -1, nil},
		{"unknown partition", 5, 0, 0, -1, -1, kerr.UnknownTopicOrPartition},
	}, 0)

	tp := diskless.TopicPartition{TopicID: top.ID, Partition: 0}
	if _, err := e.c.DeleteRecords(context.Background(), tp, 6); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	t.Run("after DeleteRecords and a restart", func(t *testing.T) {
		check(t, []tc{
			{"timestamp, from below the log start", 0, 20, 0, -1, 5, nil},
			{"timestamp, from the log start", 0, 70, 6, -1, 5, nil},
			{"max timestamp, from below the log start", 0, diskless.ListOffsetsMaxTimestamp, 2, -1, 5, nil},
			{"max timestamp, the first of a tie passed", 0, diskless.ListOffsetsMaxTimestamp, 7, -1, 7, nil},
		}, 6)
	})
}

func TestListOffsetsLogAppendTime(t *testing.T) {
	e := newEnv(t, 1)
	top := e.createTopic("t", 1, nil)
	lat := func(n int32) diskless.CommitBatch {
		b := withMaxTs(plain(top, 0, n), 1) // producer's timestamps are ignored
		b.TimestampType = batch.TimestampLogAppendTime
		return b
	}
	t0 := e.commit(nextKey(), lat(2))[0].LogAppendTime
	e.clock.Advance(10_000_000)
	t1 := e.commit(nextKey(), lat(1))[0].LogAppendTime
	r := e.c.ListOffsets(context.Background(), diskless.TopicPartition{TopicID: top.ID, Partition: 0}, t0+1)
	if r.Candidate == nil || r.Candidate.BaseOffset != 2 || r.Candidate.MaxTimestamp() != t1 {
		t.Fatalf("candidate %+v, want the batch at 2 appended at %d", r.Candidate, t1)
	}
	r = e.c.ListOffsets(context.Background(), diskless.TopicPartition{TopicID: top.ID, Partition: 0}, diskless.ListOffsetsMaxTimestamp)
	if r.Candidate == nil || r.Candidate.BaseOffset != 2 {
		t.Fatalf("max timestamp candidate %+v", r.Candidate)
	}
}

func TestWatch(t *testing.T) {
	e := newEnv(t, 2)
	top := e.createTopic("t", 4, nil)
	for p := range int32(4) {
		w := e.c.Watch()
		select {
		case <-w:
			t.Fatal("watch closed before a commit")
		default:
		}
		e.commit(nextKey(), plain(top, p, 1))
		select {
		case <-w:
		default:
			t.Fatalf("watch not closed by a commit to partition %d", p)
		}
	}
	// A commit that makes nothing visible leaves the watch open.
	w := e.c.Watch()
	e.commit(nextKey(), plain(diskless.Topic{ID: diskless.TopicID{1}}, 0, 1))
	select {
	case <-w:
		t.Fatal("watch closed by a refused commit")
	default:
	}
}
