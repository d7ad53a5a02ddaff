package fetch

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/batchtest"
)

// TestListOffsetsCodecs: timestamp and max-timestamp lookups give the same
// answers for every codec and framing, with the log start inside the
// batch and the answer in a later batch. Values of 20 KiB make the
// records section span several xerial chunks and scanner buffers.
func TestListOffsetsCodecs(t *testing.T) {
	tss := []int64{1000, 1030, 1010, 1030, 1050, 1020, 1050, 1040}
	raw := recordsOf(20<<10, tss...)
	for _, codec := range []struct {
		name  string
		codec int8
		recs  []byte
	}{
		{"none", batch.CodecNone, raw},
		{"gzip", batch.CodecGzip, compress(t, batch.CodecGzip, raw)},
		{"snappy raw block", batch.CodecSnappy, compress(t, batch.CodecSnappy, raw)},
		{"snappy xerial", batch.CodecSnappy, batchtest.XerialFrame(raw, 32<<10)},
		{"snappy xerial, one chunk", batch.CodecSnappy, batchtest.XerialFrame(raw, len(raw))},
		{"lz4", batch.CodecLZ4, compress(t, batch.CodecLZ4, raw)},
		{"zstd", batch.CodecZstd, compress(t, batch.CodecZstd, raw)},
	} {
		t.Run(codec.name, func(t *testing.T) {
			// Partition p: the batch (offsets 0–7), then 8–9 uncompressed
			// at 900 and 1060, log start logStart[p].
			e := newEnv(t, Config{})
			e.coord.createTopic("c", 3)
			logStart := []int64{0, 5, 7}
			for p := range int32(3) {
				e.commit("c", p, commitOpts{}, wrapBatch(codec.codec, codec.recs, tss...), makeBatch(t, batch.CodecNone, 1, 900, 1060))
				e.coord.setLogStart("c", p, logStart[p])
			}
			for _, tc := range []struct {
				partition         int32
				ts                int64
				offset, timestamp int64
			}{
				{0, 0, 0, 1000},
				{0, 1025, 1, 1030},
				{0, 1045, 4, 1050},
				{0, 1051, 9, 1060},
				{1, 0, 5, 1020},
				{1, 1045, 6, 1050},
				{2, 1045, 9, 1060}, // 7 (1040) is the batch's only record at or above the log start
				{2, 1040, 7, 1040},
				{0, -3, 9, 1060},
			} {
				p := e.h.ListOffsets(t.Context(), listReq(8, "c", tc.partition, tc.ts)).Topics[0].Partitions[0]
				if p.ErrorCode != 0 || p.Offset != tc.offset || p.Timestamp != tc.timestamp {
					t.Errorf("partition %d ts %d: error %d offset %d timestamp %d, want %d %d",
						tc.partition, tc.ts, p.ErrorCode, p.Offset, p.Timestamp, tc.offset, tc.timestamp)
				}
			}
			// Max timestamp inside the compressed batch: a partition of it alone.
			e.coord.createTopic("m", 2)
			e.commit("m", 0, commitOpts{}, wrapBatch(codec.codec, codec.recs, tss...))
			e.commit("m", 1, commitOpts{}, wrapBatch(codec.codec, codec.recs, tss...))
			e.coord.setLogStart("m", 1, 5)
			for p, want := range []int64{4, 6} {
				got := e.h.ListOffsets(t.Context(), listReq(8, "m", int32(p), -3)).Topics[0].Partitions[0]
				if got.ErrorCode != 0 || got.Offset != want || got.Timestamp != 1050 {
					t.Errorf("max timestamp, log start %d: error %d offset %d timestamp %d, want %d 1050",
						[]int64{0, 5}[p], got.ErrorCode, got.Offset, got.Timestamp, want)
				}
			}
		})
	}
}

// bombValueSize is the decompressed size of the bomb's big value, built as
// a stream so the test never holds it.
const bombValueSize = 256 << 20

// zstdBomb returns the records section, zstd-compressed with window
// (history the decoder must allocate), of three records at 1000, 2000 and
// 3000 ms; the second has a value of size zero bytes.
func zstdBomb(tb testing.TB, window int, size int64) []byte {
	tb.Helper()
	var out bytes.Buffer
	w, err := zstd.NewWriter(&out, zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(window))
	if err != nil {
		tb.Fatal(err)
	}
	write := func(b []byte) {
		if _, err := w.Write(b); err != nil {
			tb.Fatal(err)
		}
	}
	write(record(0, 0, nil, []byte("small")))
	// The big record, by hand: length, attributes, timestampDelta,
	// offsetDelta, key −1, value length, value, headers 0.
	head := binary.AppendVarint([]byte{0}, 1000)
	head = binary.AppendVarint(head, 1)
	head = binary.AppendVarint(head, -1)
	head = binary.AppendVarint(head, size)
	write(binary.AppendVarint(nil, int64(len(head))+size+1))
	write(head)
	zeros := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(zeros)) {
		write(zeros[:min(left, int64(len(zeros)))])
	}
	write([]byte{0})
	write(record(2000, 2, nil, []byte("small")))
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return out.Bytes()
}

// logBuffer collects a handler's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// allocated returns the bytes the heap allocated while fn ran.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestListOffsetsDecompressionBomb: a zstd batch of a few KiB holding a
// 256 MiB record, with the largest window a lookup accepts, under the
// default Config. Every answer is given, before, at and past the big
// record (which is skipped, never held), and the heap grows by the zstd
// window, not by the record, also for concurrent lookups.
func TestListOffsetsDecompressionBomb(t *testing.T) {
	logs := &logBuffer{}
	// Room for the race detector on a loaded machine: time is
	// TestListOffsetsScanTime's.
	e := newEnv(t, Config{MaxScanTime: 10 * time.Minute, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	e.coord.createTopic("bomb", 1)
	recs := zstdBomb(t, zstdMaxWindow, bombValueSize)
	b := wrapBatch(batch.CodecZstd, recs, 1000, 2000, 3000)
	if len(b) > 64<<10 {
		t.Fatalf("bomb batch of %d bytes: not a bomb", len(b))
	}
	e.commit("bomb", 0, commitOpts{}, b)

	const perLookup = zstdMaxWindow + 4<<20 // the window, decoder blocks, the batch, slack
	for _, tc := range []struct {
		name              string
		ts                int64
		offset, timestamp int64
	}{
		{name: "before the bomb", ts: 500, offset: 0, timestamp: 1000},
		{name: "the bomb is the answer", ts: 1500, offset: 1, timestamp: 2000},
		{name: "past the bomb", ts: 2500, offset: 2, timestamp: 3000},
		{name: "max timestamp past the bomb", ts: -3, offset: 2, timestamp: 3000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got int16
			var off, ts int64
			n := allocated(func() {
				p := e.h.ListOffsets(t.Context(), listReq(8, "bomb", 0, tc.ts)).Topics[0].Partitions[0]
				got, off, ts = p.ErrorCode, p.Offset, p.Timestamp
			})
			if got != 0 || off != tc.offset || ts != tc.timestamp {
				t.Errorf("error %d offset %d timestamp %d, want %d %d", got, off, ts, tc.offset, tc.timestamp)
			}
			if n > perLookup {
				t.Errorf("allocated %d MiB for a lookup (record %d MiB)", n>>20, bombValueSize>>20)
			}
			t.Logf("allocated %.1f MiB", float64(n)/(1<<20))
		})
	}
	if l := logs.String(); l != "" {
		t.Errorf("warnings for a batch that was answered:\n%s", l)
	}

	// The review's scenario: concurrent lookups, each past the bomb.
	const lookups = DefaultDecompressConcurrency
	n := allocated(func() {
		var wg sync.WaitGroup
		for range lookups {
			wg.Go(func() {
				p := e.h.ListOffsets(context.Background(), listReq(8, "bomb", 0, 2500)).Topics[0].Partitions[0]
				if p.ErrorCode != 0 || p.Offset != 2 {
					t.Errorf("concurrent lookup: error %d offset %d", p.ErrorCode, p.Offset)
				}
			})
		}
		wg.Wait()
	})
	if n > lookups*perLookup {
		t.Errorf("allocated %d MiB for %d concurrent lookups", n>>20, lookups)
	}
	t.Logf("batch of %d bytes; %d concurrent lookups allocated %.1f MiB", len(b), lookups, float64(n)/(1<<20))
}

// zstdFrame compresses data with a streaming encoder of the given window.
func zstdFrame(tb testing.TB, window int, data []byte) []byte {
	tb.Helper()
	var out bytes.Buffer
	w, err := zstd.NewWriter(&out, zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(window))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return out.Bytes()
}

// TestListOffsetsZstdWindowTooLarge: a frame declaring a window over
// zstdMaxWindow is refused before the decoder allocates it, first in the
// batch or not.
func TestListOffsetsZstdWindowTooLarge(t *testing.T) {
	big := 4 * zstdMaxWindow
	// Three records; the second is over a block (128 KiB), so a streaming
	// encoder declares its window rather than a single segment.
	r0 := record(0, 0, nil, nil)
	r12 := slices.Concat(record(1000, 1, nil, make([]byte, 1<<20)), record(2000, 2, nil, nil))
	for _, tc := range []struct {
		name   string
		frames [][]byte // the last has the big window
		ts     int64
		log    string
	}{
		{name: "first frame", frames: [][]byte{zstdFrame(t, big, slices.Concat(r0, r12))}, ts: 0, log: "zstd window of"},
		{name: "later frame", frames: [][]byte{zstdFrame(t, 64<<10, r0), zstdFrame(t, big, r12)}, ts: 1500, log: "zstd frame"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h zstd.Header
			if err := h.Decode(tc.frames[len(tc.frames)-1]); err != nil || h.SingleSegment || h.WindowSize <= zstdMaxWindow {
				t.Fatalf("test frame %+v (%v): want a window over %d", h, err, zstdMaxWindow)
			}
			recs := slices.Concat(tc.frames...)
			logs := &logBuffer{}
			e := newEnv(t, Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
			e.coord.createTopic("w", 1)
			e.commit("w", 0, commitOpts{}, wrapBatch(batch.CodecZstd, recs, 1000, 2000, 3000))
			var errc int16
			if n := allocated(func() {
				errc = e.h.ListOffsets(t.Context(), listReq(8, "w", 0, tc.ts)).Topics[0].Partitions[0].ErrorCode
			}); n > 4<<20 {
				t.Errorf("allocated %d MiB", n>>20)
			}
			if errc != kerr.CorruptMessage.Code || !strings.Contains(logs.String(), tc.log) {
				t.Errorf("error %d, want CORRUPT_MESSAGE for the window; logs:\n%s", errc, logs)
			}
		})
	}
}

// TestListOffsetsDecompressSlots: compressed lookups wait for one of
// DecompressConcurrency slots, or for their context; uncompressed ones do
// not need one.
func TestListOffsetsDecompressSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Config{DecompressConcurrency: 1})
		e.coord.createTopic("s", 2)
		e.commit("s", 0, commitOpts{}, makeBatch(t, batch.CodecLZ4, 10, 1000, 2000))
		e.commit("s", 1, commitOpts{}, makeBatch(t, batch.CodecNone, 10, 1000, 2000))
		lookup := func(ctx context.Context, partition int32) (int16, int64) {
			p := e.h.ListOffsets(ctx, listReq(8, "s", partition, 1500)).Topics[0].Partitions[0]
			return p.ErrorCode, p.Offset
		}

		release, err := e.h.acquireDecompress(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan int64, 1)
		go func() {
			_, off := lookup(t.Context(), 0)
			done <- off
		}()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("a compressed lookup ran without a slot")
		default:
		}
		if errc, off := lookup(t.Context(), 1); errc != 0 || off != 1 {
			t.Errorf("uncompressed lookup while the slot is taken: error %d offset %d", errc, off)
		}
		release()
		if off := <-done; off != 1 {
			t.Errorf("compressed lookup after the slot was freed: offset %d", off)
		}

		release, _ = e.h.acquireDecompress(t.Context())
		defer release()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if errc, _ := lookup(ctx, 0); errc != kerr.KafkaStorageError.Code {
			t.Errorf("lookup whose context ends while waiting: error %d, want KAFKA_STORAGE_ERROR", errc)
		}
	})
}

// TestListOffsetsLargeBatch: a batch that decompresses to 20 MiB is answered at its last record for every codec; the zstd
// frame (franz-go's: a 64 KiB window, content size declared) streams
// although its content is larger than zstdMaxWindow.
func TestListOffsetsLargeBatch(t *testing.T) {
	tss := tsRange(1000, 20, 10)
	raw := recordsOf(1<<20, tss...)
	for _, c := range []struct {
		name  string
		codec int8
		recs  []byte
	}{
		{"gzip", batch.CodecGzip, compress(t, batch.CodecGzip, raw)},
		{"snappy raw block", batch.CodecSnappy, compress(t, batch.CodecSnappy, raw)},
		{"snappy xerial", batch.CodecSnappy, batchtest.XerialFrame(raw, 32<<10)},
		{"lz4", batch.CodecLZ4, compress(t, batch.CodecLZ4, raw)},
		{"zstd", batch.CodecZstd, compress(t, batch.CodecZstd, raw)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.codec == batch.CodecZstd {
				var h zstd.Header
				if err := h.Decode(c.recs); err != nil || !h.HasFCS || h.FrameContentSize != uint64(len(raw)) {
					t.Fatalf("frame header %+v, %v: want the content size", h, err)
				}
			}
			e := newEnv(t, Config{})
			e.coord.createTopic("big", 1)
			e.commit("big", 0, commitOpts{}, wrapBatch(c.codec, c.recs, tss...))
			p := e.h.ListOffsets(t.Context(), listReq(8, "big", 0, tss[19])).Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.Offset != 19 || p.Timestamp != tss[19] {
				t.Errorf("error %d offset %d timestamp %d, want 19 %d", p.ErrorCode, p.Offset, p.Timestamp, tss[19])
			}
		})
	}
}

// falseMaxBatch is an uncompressed batch of records at tss whose header
// claims maxTS as its max timestamp (CRC updated): a header that lies, as
// the index copies it at commit.
func falseMaxBatch(tb testing.TB, maxTS int64, tss ...int64) []byte {
	tb.Helper()
	b := makeBatch(tb, batch.CodecNone, 10, tss...)
	binary.BigEndian.PutUint64(b[35:], uint64(maxTS)) // maxTimestamp (SPEC §1)
	batch.Header(b).UpdateCRC()
	if got := batch.Header(b).MaxTimestamp(); got != maxTS {
		tb.Fatalf("header max timestamp %d, want %d", got, maxTS)
	}
	return b
}

// TestListOffsetsFalseMaxTimestamp: a batch whose header (and so the
// index) claims a max timestamp above every record's, with the log start at
// or below its base offset, has a false header: a lookup it is the
// candidate of logs a warning naming the batch and answers from the
// records, as a broker that had rewritten the header would. With the log
// start inside the batch the missing records may have been deleted: the
// same answers, without a warning.
func TestListOffsetsFalseMaxTimestamp(t *testing.T) {
	// Every partition: 0–1 at 100 200; 2–4 at 1000 1010 1020 (partitions
	// 0, 1, 3: header max 9000); 5–6 at 4000 6000.
	logs := &logBuffer{}
	e := newEnv(t, Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	e.coord.createTopic("f", 4)
	for p, logStart := range []int64{0, 2, 0, 3} {
		mid := makeBatch(t, batch.CodecNone, 10, 1000, 1010, 1020)
		if p != 2 {
			mid = falseMaxBatch(t, 9000, 1000, 1010, 1020)
		}
		e.commit("f", int32(p), commitOpts{},
			makeBatch(t, batch.CodecNone, 10, 100, 200), mid, makeBatch(t, batch.CodecNone, 10, 4000, 6000))
		e.coord.setLogStart("f", int32(p), logStart)
	}
	type answer struct {
		errc              int16
		offset, timestamp int64
	}
	for _, tc := range []struct {
		name string
		ts   int64
		want []answer // by partition
	}{
		// Partitions: log start below the false batch, at its base, none
		// false, inside the false batch.
		{name: "timestamp", ts: 3000, want: []answer{{0, 5, 4000}, {0, 5, 4000}, {0, 5, 4000}, {0, 5, 4000}}},
		{name: "max timestamp", ts: -3, want: []answer{{0, 6, 6000}, {0, 6, 6000}, {0, 6, 6000}, {0, 6, 6000}}},
		// The false batch is not the candidate: 1020 is within its header.
		{name: "timestamp within the records", ts: 1015, want: []answer{{0, 4, 1020}, {0, 4, 1020}, {0, 4, 1020}, {0, 4, 1020}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := listReq(8, "f", 0, tc.ts)
			for p := int32(1); p < 4; p++ {
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Partition, rp.Timestamp = p, tc.ts
				req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
			}
			var got []answer
			for _, p := range e.h.ListOffsets(t.Context(), req).Topics[0].Partitions {
				got = append(got, answer{p.ErrorCode, p.Offset, p.Timestamp})
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("answers %v, want %v", got, tc.want)
			}
		})
	}
	l := logs.String()
	for _, p := range []string{"partition=0", "partition=1"} {
		if !strings.Contains(l, "corrupt batch") || !regexp.MustCompile(p+` offset=2 object=wal/000\d`).MatchString(l) {
			t.Errorf("no warning naming the false batch of %s; logs:\n%s", p, l)
		}
	}
	if strings.Contains(l, "partition=2") || strings.Contains(l, "partition=3") {
		t.Errorf("warnings for partitions without a false header; logs:\n%s", l)
	}
}

// TestListOffsetsLogStartInsideCandidate: with the log start inside the
// candidate batch, timestamp and max-timestamp lookups answer from the
// candidate's records left or from later batches, also when retention moves
// the log start during the lookup (at its first call past the candidate,
// ListOffsetsFrom). The answer never falls below the log start.
func TestListOffsetsLogStartInsideCandidate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		batches  [][]int64 // timestamps of each batch, offsets from 0
		logStart int64
		moveTo   int64 // the log start at the first FindBatches call; 0: unmoved
		ts       int64
		offset   int64
		stamp    int64
	}{
		{name: "timestamp: the candidate's record left", batches: [][]int64{{3000, 1000, 2000}, {2500, 2600}},
			logStart: 1, ts: 1500, offset: 2, stamp: 2000},
		{name: "timestamp: the next batch", batches: [][]int64{{3000, 1000, 2000}, {2500, 2600}},
			logStart: 1, ts: 2550, offset: 4, stamp: 2600},
		{name: "timestamp: none left", batches: [][]int64{{3000, 1000, 2000}, {2500, 2600}},
			logStart: 1, ts: 2700, offset: -1, stamp: -1},
		{name: "max timestamp: the candidate's record left", batches: [][]int64{{3000, 1000, 2000}, {1500, 1600}},
			logStart: 1, ts: -3, offset: 2, stamp: 2000},
		{name: "max timestamp: a later batch is larger", batches: [][]int64{{3000, 1000, 2000}, {2500, 2600}, {2550}},
			logStart: 1, ts: -3, offset: 4, stamp: 2600},
		{name: "max timestamp: a later batch ties the candidate's record left", batches: [][]int64{{3000, 1000, 2000}, {2000}},
			logStart: 1, ts: -3, offset: 2, stamp: 2000},
		{name: "max timestamp: later batches reach the candidate's max", batches: [][]int64{{3000, 1000, 2000}, {2500, 3000}, {3000}},
			logStart: 1, ts: -3, offset: 4, stamp: 3000},
		{name: "max timestamp: the log start moves past the candidate",
			batches:  [][]int64{{3000, 1000, 2000}, {1500, 1600}, {1700, 1100}},
			logStart: 1, moveTo: 3, ts: -3, offset: 5, stamp: 1700},
		{name: "max timestamp: the log start moves past the candidate's largest record, not past the next",
			batches:  [][]int64{{3000, 1000, 2000, 1900}, {1500, 1700}},
			logStart: 1, moveTo: 3, ts: -3, offset: 3, stamp: 1900},
		{name: "max timestamp: the log start moves into the later batch, past its largest record",
			batches:  [][]int64{{3000, 1000, 2000}, {2500, 1500}, {1800, 1700}},
			logStart: 1, moveTo: 4, ts: -3, offset: 5, stamp: 1800},
		{name: "timestamp: the log start moves into the next batch, past its record",
			batches:  [][]int64{{3000, 1000, 2000}, {2500, 1500}, {1800, 2600}},
			logStart: 1, moveTo: 4, ts: 2400, offset: 6, stamp: 2600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.coord.createTopic("s", 1)
			for _, tss := range tc.batches {
				e.commit("s", 0, commitOpts{}, makeBatch(t, batch.CodecNone, 10, tss...))
			}
			e.coord.setLogStart("s", 0, tc.logStart)
			if tc.moveTo != 0 {
				e.coord.onFind = func() {
					e.coord.onFind = nil
					e.coord.setLogStart("s", 0, tc.moveTo)
				}
			}
			p := e.h.ListOffsets(t.Context(), listReq(8, "s", 0, tc.ts)).Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.Offset != tc.offset || p.Timestamp != tc.stamp {
				t.Errorf("error %d offset %d timestamp %d, want 0 %d %d", p.ErrorCode, p.Offset, p.Timestamp, tc.offset, tc.stamp)
			}
		})
	}
}

// TestListOffsetsCommitDuringLookup: a lookup that looks past its
// candidate asks about the partition as it is then, so a batch committed
// since the lookup began can answer it: the answer is the one of the
// partition at that call.
func TestListOffsetsCommitDuringLookup(t *testing.T) {
	for _, tc := range []struct {
		name          string
		ts            int64
		offset, stamp int64
	}{
		{name: "timestamp", ts: 2500, offset: 4, stamp: 2600},
		{name: "max timestamp", ts: -3, offset: 4, stamp: 2600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.coord.createTopic("c", 1)
			e.commit("c", 0, commitOpts{}, makeBatch(t, batch.CodecNone, 10, 3000, 1000, 2000))
			e.coord.setLogStart("c", 0, 1)
			e.coord.onFind = func() {
				e.coord.onFind = nil
				e.commit("c", 0, commitOpts{}, makeBatch(t, batch.CodecNone, 10, 2400, 2600))
			}
			p := e.h.ListOffsets(t.Context(), listReq(8, "c", 0, tc.ts)).Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.Offset != tc.offset || p.Timestamp != tc.stamp {
				t.Errorf("error %d offset %d timestamp %d, want 0 %d %d", p.ErrorCode, p.Offset, p.Timestamp, tc.offset, tc.stamp)
			}
		})
	}
}

// stuckCoord is a Coordinator whose ListOffsetsFrom answers with the
// partition's ListOffsets candidate, wherever from is: one that breaks
// ListOffsetsFrom's contract.
type stuckCoord struct{ Coordinator }

func (c stuckCoord) ListOffsetsFrom(ctx context.Context, tp diskless.TopicPartition, ts, _ int64) diskless.ListOffsetsResult {
	return c.Coordinator.ListOffsets(ctx, tp, ts)
}

// TestListOffsetsFromNotAfter: a candidate from ListOffsetsFrom that is
// not after the batch looked past would make the lookup loop; it answers
// UNKNOWN_SERVER_ERROR instead.
func TestListOffsetsFromNotAfter(t *testing.T) {
	e := newEnv(t, Config{})
	e.coord.createTopic("n", 1)
	// Two files: two runs, so that the lookup asks for the second.
	e.commit("n", 0, commitOpts{}, makeBatch(t, batch.CodecNone, 10, 3000, 1000, 2000))
	e.commit("n", 0, commitOpts{}, makeBatch(t, batch.CodecNone, 10, 2600))
	e.coord.setLogStart("n", 0, 1)
	h, err := New(Config{Logger: discardLogger}, stuckCoord{e.coord}, e.store)
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range []int64{2500, -3} {
		p := h.ListOffsets(t.Context(), listReq(8, "n", 0, ts)).Topics[0].Partitions[0]
		if p.ErrorCode != kerr.UnknownServerError.Code {
			t.Errorf("timestamp %d: error %d offset %d, want UNKNOWN_SERVER_ERROR", ts, p.ErrorCode, p.Offset)
		}
	}
}

// countingCoord is a Coordinator that counts FindBatches calls and the
// coordinates they return, and ListOffsets and ListOffsetsFrom calls.
type countingCoord struct {
	Coordinator
	finds, coords, lists, froms atomic.Int64
}

func (c *countingCoord) FindBatches(ctx context.Context, reqs []diskless.FindBatchesRequest) []diskless.FindBatchesResult {
	c.finds.Add(1)
	rs := c.Coordinator.FindBatches(ctx, reqs)
	for i := range rs {
		c.coords.Add(int64(len(rs[i].Runs)))
	}
	return rs
}

func (c *countingCoord) ListOffsets(ctx context.Context, tp diskless.TopicPartition, ts int64) diskless.ListOffsetsResult {
	c.lists.Add(1)
	return c.Coordinator.ListOffsets(ctx, tp, ts)
}

func (c *countingCoord) ListOffsetsFrom(ctx context.Context, tp diskless.TopicPartition, ts, from int64) diskless.ListOffsetsResult {
	c.froms.Add(1)
	return c.Coordinator.ListOffsetsFrom(ctx, tp, ts, from)
}

// TestListOffsetsWalkCost pins the coordinator calls of lookups that look
// past a candidate holding the log start (offsets 0–2 at 9000 1000 2000,
// log start 1), on a partition of 100,000 more batches: 16 KiB index
// entries at 3000 whose bytes do not exist (a lookup that read one would
// fail), and one real batch, the answer (or, with falseMax, a batch whose
// header claims falseMax, passed over with a warning). Each batch looked
// past costs one ListOffsetsFrom call and no FindBatches page, wherever
// the next batch is: the lookups used to page through the coordinates
// (up to 34 FindBatches calls returning 100,001 coordinates, for a max
// timestamp no later batch reaches).
func TestListOffsetsWalkCost(t *testing.T) {
	const fillers = 100_000
	for _, tc := range []struct {
		name          string
		ts            int64
		at            int     // fillers before the real batch
		real          []int64 // the real batch's timestamps
		falseMax      int64   // ≠ 0: the real batch's header claims this
		offset, stamp int64
		froms         int64 // ListOffsetsFrom calls
	}{
		{name: "timestamp, answered by the next batch", ts: 2500, at: 0, real: []int64{3000},
			offset: 3, stamp: 3000, froms: 1},
		{name: "max timestamp, the next batch reaches the candidate's", ts: -3, at: 0, real: []int64{9000},
			offset: 3, stamp: 9000, froms: 1},
		{name: "max timestamp, reached 10,000 batches on", ts: -3, at: 10_000, real: []int64{9000},
			offset: 3 + 10_000, stamp: 9000, froms: 1},
		{name: "max timestamp, never reached: the largest after the candidate", ts: -3, at: fillers, real: []int64{5000},
			offset: 3 + fillers, stamp: 5000, froms: 1},
		// Past the candidate, then past the false header: no record
		// reaches 5000.
		{name: "timestamp, a false header 10,000 batches on", ts: 5000, at: 10_000, real: []int64{4000}, falseMax: 9000,
			offset: -1, stamp: -1, froms: 2},
		// The false header ties the candidate's max; past it, no batch
		// beats its largest record.
		{name: "max timestamp, a false header 10,000 batches on", ts: -3, at: 10_000, real: []int64{4000}, falseMax: 9000,
			offset: 3 + 10_000, stamp: 4000, froms: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.coord.createTopic("w", 1)
			e.commit("w", 0, commitOpts{}, makeBatch(t, batch.CodecNone, 10, 9000, 1000, 2000))
			fill := func(n int) {
				if n == 0 {
					return
				}
				bs := make([]diskless.RunCoordinate, n)
				e.coord.mu.Lock()
				base := e.coord.mu.byName["w"].parts[0].hwm
				e.coord.mu.Unlock()
				for i := range bs {
					bs[i] = diskless.RunCoordinate{ObjectKey: "absent", FileSize: 1 << 30, ByteSize: 16 << 10,
						BaseOffset: base + int64(i), LastOffset: base + int64(i),
						TimestampType: batch.TimestampCreateTime, BatchMaxTimestamp: 3000}
				}
				e.coord.add("w", 0, bs...)
			}
			fill(tc.at)
			real := makeBatch(t, batch.CodecNone, 10, tc.real...)
			if tc.falseMax != 0 {
				real = falseMaxBatch(t, tc.falseMax, tc.real...)
			}
			e.commit("w", 0, commitOpts{}, real)
			fill(fillers - tc.at)
			e.coord.setLogStart("w", 0, 1)

			cc := &countingCoord{Coordinator: e.coord}
			h, err := New(Config{Logger: discardLogger}, cc, e.store)
			if err != nil {
				t.Fatal(err)
			}
			p := h.ListOffsets(t.Context(), listReq(8, "w", 0, tc.ts)).Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.Offset != tc.offset || p.Timestamp != tc.stamp {
				t.Errorf("error %d offset %d timestamp %d, want 0 %d %d", p.ErrorCode, p.Offset, p.Timestamp, tc.offset, tc.stamp)
			}
			if f, c, l, fr := cc.finds.Load(), cc.coords.Load(), cc.lists.Load(), cc.froms.Load(); f != 0 || c != 0 || l != 1 || fr != tc.froms {
				t.Errorf("%d FindBatches calls returning %d coordinates, %d ListOffsets and %d ListOffsetsFrom calls; want 0, 0, 1 and %d",
					f, c, l, fr, tc.froms)
			}
		})
	}
}
