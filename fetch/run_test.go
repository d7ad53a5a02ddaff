package fetch

import (
	"bytes"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// runEnv commits to partition 0 of "r" one file whose four batches — of
// 3, 1, 2 and 4 records (offsets [0,2] [3] [4,5] [6,9]), timestamps 10 …
// 100 — the coordinator indexes as one run, and a second file of one
// batch [10,11]; partition 1 gets the same pair of files. With lat the
// topic is LogAppendTime (append time 7777). It returns the batches' bytes
// as stored.
func runEnv(t *testing.T, lat bool) (*env, [][]byte) {
	t.Helper()
	e := newEnv(t, Config{})
	e.coord.createTopic("r", 2)
	bs := [][]byte{
		makeBatch(t, batch.CodecNone, 100, 10, 20, 30),
		makeBatch(t, batch.CodecGzip, 100, 40),
		makeBatch(t, batch.CodecNone, 100, 50, 60),
		makeBatch(t, batch.CodecZstd, 100, 70, 80, 90, 100),
		makeBatch(t, batch.CodecNone, 100, 110, 120),
	}
	o := commitOpts{}
	if lat {
		o.logAppendTime = 7777
	}
	for p := range int32(2) {
		e.commit("r", p, o, bs[:4]...)
		e.commit("r", p, o, bs[4])
	}
	r := e.coord.FindBatches(t.Context(), []diskless.FindBatchesRequest{{TopicID: e.h.coordTopicID(t, "r"), MaxBytes: 1 << 30}})[0]
	if len(r.Runs) != 2 || r.Runs[0].LastOffset != 9 || r.Runs[0].BatchMaxTimestamp != 100 {
		t.Fatalf("setup: runs %+v", r.Runs)
	}
	return e, bs
}

// TestFetchInsideARun: a fetch from any offset of a run is served from the
// batch holding it (SPEC §4), with the header of each batch rewritten —
// its base offset, and on LogAppendTime its append time — and the bytes
// otherwise the producer's.
func TestFetchInsideARun(t *testing.T) {
	for _, lat := range []bool{false, true} {
		e, bs := runEnv(t, lat)
		for _, tc := range []struct {
			offset int64
			want   []int64 // base offsets served
		}{
			{0, []int64{0, 3, 4, 6, 10}},
			{1, []int64{0, 3, 4, 6, 10}},
			{3, []int64{3, 4, 6, 10}},
			{5, []int64{4, 6, 10}},
			{9, []int64{6, 10}},
			{10, []int64{10}},
		} {
			resp := e.h.Fetch(t.Context(), e.fetchReq(16, 0, fp{topic: "r", offset: tc.offset}))
			p := flat(resp)[0]
			if p.ErrorCode != 0 {
				t.Fatalf("lat %v, from %d: error %d", lat, tc.offset, p.ErrorCode)
			}
			got := decodeBatches(t, p.RecordBatches)
			var bases []int64
			for i, rb := range got {
				bases = append(bases, rb.FirstOffset)
				src := bs[slices.Index([]int64{0, 3, 4, 6, 10}, rb.FirstOffset)]
				if lat != (rb.Attributes&batch.AttrLogAppendTime != 0) || (lat && rb.MaxTimestamp != 7777) {
					t.Fatalf("lat %v, from %d: batch %d attributes %x max timestamp %d", lat, tc.offset, i, rb.Attributes, rb.MaxTimestamp)
				}
				if !bytes.Equal(rb.Records, src[batch.HeaderSize:]) {
					t.Fatalf("lat %v, from %d: batch at %d: records differ from the producer's", lat, tc.offset, rb.FirstOffset)
				}
			}
			if !slices.Equal(bases, tc.want) {
				t.Fatalf("lat %v, from %d: batches %v, want %v", lat, tc.offset, bases, tc.want)
			}
			offs, _ := consume(t, p, tc.offset)
			if len(offs) != int(12-tc.offset) || offs[0] != tc.offset {
				t.Fatalf("lat %v, from %d: consumed offsets %v", lat, tc.offset, offs)
			}
		}
	}
}

// TestFetchRunBudgets: KIP-74's limits apply to the batches served, not to
// the runs the coordinator answers: each partition gets at least the
// batch holding its offset when it is the first of the response, its
// batches within partition_max_bytes otherwise — also when the run holding
// the offset alone is larger — and a partition whose first batch does not
// fit waits for a later fetch.
func TestFetchRunBudgets(t *testing.T) {
	e, bs := runEnv(t, false)
	size := func(i ...int) int32 {
		n := 0
		for _, k := range i {
			n += len(bs[k])
		}
		return int32(n)
	}
	for _, tc := range []struct {
		name     string
		maxBytes int32 // of the request; 0: 50 MiB
		parts    []fp
		want     [][]int64
	}{
		{"one batch's worth per partition", 0,
			[]fp{{topic: "r", partition: 0, maxBytes: size(0)}, {topic: "r", partition: 1, maxBytes: size(0)}},
			[][]int64{{0}, {0}}},
		{"from inside the run", 0,
			[]fp{{topic: "r", offset: 4, maxBytes: size(2, 3)}, {topic: "r", partition: 1, offset: 3, maxBytes: size(1)}},
			[][]int64{{4, 6}, {3}}},
		{"into the next run", 0,
			[]fp{{topic: "r", offset: 6, maxBytes: size(0, 1, 2, 3, 4)}, {topic: "r", partition: 1, offset: 6, maxBytes: size(3)}},
			[][]int64{{6, 10}, {6}}},
		// From offset 6 the first run's last 4 of 10 offsets are taken
		// for 40% of its bytes, more than the batch at 6 holds: the next
		// run is not read, and this fetch serves less than the limit
		// allows (diskless.ServedEstimate), the next one the rest.
		{"the estimate of the first run's part", 0,
			[]fp{{topic: "r", offset: 6, maxBytes: size(3, 4)}},
			[][]int64{{6}}},
		{"the first batch of the response over every limit", 1,
			[]fp{{topic: "r", offset: 1, maxBytes: 1}, {topic: "r", partition: 1, maxBytes: 1 << 20}},
			[][]int64{{0}, {}}},
		{"request budget shared in order", size(0, 1, 2) + size(0) - 1,
			[]fp{{topic: "r", maxBytes: size(0, 1, 2)}, {topic: "r", partition: 1, maxBytes: 1 << 20}},
			[][]int64{{0, 3, 4}, {}}},
		{"a partition below a batch's size gets none", 0,
			[]fp{{topic: "r", maxBytes: size(0)}, {topic: "r", partition: 1, maxBytes: size(0) - 1}},
			[][]int64{{0}, {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := flat(e.h.Fetch(t.Context(), e.fetchReq(16, tc.maxBytes, tc.parts...)))
			for i, p := range ps {
				if p.ErrorCode != 0 {
					t.Fatalf("partition %d: error %d", i, p.ErrorCode)
				}
				if got := baseOffsets(t, p.RecordBatches); !slices.Equal(got, tc.want[i]) {
					t.Fatalf("partition %d: batches %v, want %v", i, got, tc.want[i])
				}
			}
		})
	}
}

// TestFetchLogStartInsideARun: a log start moved inside a run — as
// DeleteRecords or retention place it — is served as Kafka serves a log
// start inside a batch: a fetch from it returns the batch holding it,
// whole, and the run's batches before it never; a fetch below it is out
// of range.
func TestFetchLogStartInsideARun(t *testing.T) {
	e, _ := runEnv(t, false)
	e.coord.setLogStart("r", 0, 5)
	ps := flat(e.h.Fetch(t.Context(), e.fetchReq(16, 0, fp{topic: "r", offset: 5}, fp{topic: "r", offset: 3})))
	if p := ps[0]; p.ErrorCode != 0 || p.LogStartOffset != 5 || !slices.Equal(baseOffsets(t, p.RecordBatches), []int64{4, 6, 10}) {
		t.Fatalf("from the log start: error %d, log start %d, batches %v", p.ErrorCode, p.LogStartOffset, baseOffsets(t, p.RecordBatches))
	}
	if p := ps[1]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LogStartOffset != 5 {
		t.Fatalf("below the log start: error %d, log start %d", p.ErrorCode, p.LogStartOffset)
	}
}

// TestFetchCorruptBatchInsideARun: a batch of a run whose bytes fail their
// check on both reads cuts the partition there: the batches before it are
// served; a fetch from it gets CORRUPT_MESSAGE. The other partition, whose
// run has the same bytes in another object, is served whole.
func TestFetchCorruptBatchInsideARun(t *testing.T) {
	e, bs := runEnv(t, false)
	third := len(bs[0]) + len(bs[1])
	e.store.mutate("wal/0001", func(b []byte) []byte { b[third+len(bs[2])-1] ^= 0xff; return b })
	ps := flat(e.h.Fetch(t.Context(), e.fetchReq(16, 0, fp{topic: "r"}, fp{topic: "r", partition: 1})))
	if p := ps[0]; p.ErrorCode != 0 || !slices.Equal(baseOffsets(t, p.RecordBatches), []int64{0, 3}) {
		t.Fatalf("partition 0: error %d, batches %v; want [0 3]", p.ErrorCode, baseOffsets(t, p.RecordBatches))
	}
	if p := ps[1]; p.ErrorCode != 0 || !slices.Equal(baseOffsets(t, p.RecordBatches), []int64{0, 3, 4, 6, 10}) {
		t.Fatalf("partition 1: error %d, batches %v", p.ErrorCode, baseOffsets(t, p.RecordBatches))
	}
	if p := flat(e.h.Fetch(t.Context(), e.fetchReq(16, 0, fp{topic: "r", offset: 4})))[0]; p.ErrorCode != kerr.CorruptMessage.Code {
		t.Fatalf("from the corrupt batch: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
}

// TestListOffsetsInsideARun: a timestamp lookup picks the run by its max
// timestamp, then the batch in it, then the record (SPEC §5), also when
// the log start lies inside the run, past the records that would have
// answered.
func TestListOffsetsInsideARun(t *testing.T) {
	e, _ := runEnv(t, false)
	for _, tc := range []struct {
		name              string
		logStart          int64
		ts                int64
		offset, timestamp int64
	}{
		{"first record", 0, 0, 0, 10},
		{"a record of the third batch", 0, 55, 5, 60},
		{"an exact timestamp", 0, 70, 6, 70},
		{"the last record of the run", 0, 100, 9, 100},
		{"in the next run", 0, 101, 10, 110},
		{"none", 0, 121, -1, -1},
		{"max timestamp", 0, diskless.ListOffsetsMaxTimestamp, 11, 120},
		{"log start inside the run: the next batch", 5, 20, 5, 60},
		{"log start inside the run: the same batch", 5, 55, 5, 60},
		{"log start inside a batch", 8, 20, 8, 90},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.coord.setLogStart("r", 0, tc.logStart)
			p := e.h.ListOffsets(t.Context(), listReq(8, "r", 0, tc.ts)).Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.Offset != tc.offset || p.Timestamp != tc.timestamp {
				t.Fatalf("ListOffsets(%d) = error %d, %d at %d; want %d at %d", tc.ts, p.ErrorCode, p.Offset, p.Timestamp, tc.offset, tc.timestamp)
			}
		})
	}
}

// TestListOffsetsMaxTimestampInsideARun: the max-timestamp lookup finds the
// earliest record holding the largest timestamp in a run's batches, and
// when the log start has passed that record, the largest left.
func TestListOffsetsMaxTimestampInsideARun(t *testing.T) {
	e := newEnv(t, Config{})
	e.coord.createTopic("m", 1)
	// One run: [0,2] at 10 500 20, [3,4] at 500 30, [5] at 40.
	e.commit("m", 0, commitOpts{},
		makeBatch(t, batch.CodecNone, 10, 10, 500, 20),
		makeBatch(t, batch.CodecLZ4, 10, 500, 30),
		makeBatch(t, batch.CodecNone, 10, 40))
	for _, tc := range []struct {
		logStart          int64
		offset, timestamp int64
	}{
		{0, 1, 500},
		{2, 3, 500},
		{4, 5, 40},
		{5, 5, 40},
	} {
		e.coord.setLogStart("m", 0, tc.logStart)
		p := e.h.ListOffsets(t.Context(), listReq(8, "m", 0, diskless.ListOffsetsMaxTimestamp)).Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.Offset != tc.offset || p.Timestamp != tc.timestamp {
			t.Fatalf("log start %d: error %d, %d at %d; want %d at %d", tc.logStart, p.ErrorCode, p.Offset, p.Timestamp, tc.offset, tc.timestamp)
		}
	}
}

// TestVerifyRunsPrefix: a run read only in part (the last of a
// partition's, past its limit) passes on its whole batches; a batch cut
// by the read's end is neither checked nor served.
func TestVerifyRunsPrefix(t *testing.T) {
	b1 := makeBatch(t, batch.CodecNone, 5, 10, 20)
	b2 := makeBatch(t, batch.CodecNone, 5, 30)
	p := slices.Concat(b1, b2)
	r := diskless.RunCoordinate{ByteSize: int32(len(p)), BaseOffset: 7, LastOffset: 9, BatchMaxTimestamp: 30}
	for _, cut := range []int{len(b1) + 10, len(b1), 70} {
		if k, _, err := verifyRuns(p[:cut], []diskless.RunCoordinate{r}); err != nil || k != 1 {
			t.Fatalf("prefix of %d bytes: run %d, %v", cut, k, err)
		}
		got, err := walkRun(nil, p[:cut], &r, true)
		want := 0
		if cut >= len(b1) {
			want = 1
		}
		if err != nil || len(got) != want {
			t.Fatalf("prefix of %d bytes: walked %d batches (%v), want %d", cut, len(got), err, want)
		}
	}
	bad := slices.Clone(p[:len(b1)+10])
	bad[len(b1)-1] ^= 1
	if k, n, err := verifyRuns(bad, []diskless.RunCoordinate{r}); err == nil || k != 0 || n != 0 {
		t.Fatalf("a bad first batch in a prefix: run %d, %d batches, %v", k, n, err)
	}
}
