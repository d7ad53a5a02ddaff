package fetch

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// compressibleRecords returns n records of valueSize bytes each (one
// repeated byte per record, no key), timestamps ts+0 … ts+n−1, as one zstd
// stream with franz-go's producer settings (a 64 KiB window, one
// goroutine): the shape of issue 9's defect 4. It is written as a stream
// so that the test never holds the n × valueSize bytes.
func compressibleRecords(tb testing.TB, n, valueSize int) []byte {
	tb.Helper()
	var out bytes.Buffer
	w, err := zstd.NewWriter(&out, zstd.WithWindowSize(64<<10), zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true))
	if err != nil {
		tb.Fatal(err)
	}
	value := make([]byte, valueSize)
	for i := range n {
		// length, attributes, timestampDelta, offsetDelta, key −1, value
		// length, value, headers 0.
		head := binary.AppendVarint([]byte{0}, int64(i))
		head = binary.AppendVarint(head, int64(i))
		head = binary.AppendVarint(head, -1)
		head = binary.AppendVarint(head, int64(valueSize))
		clear(value)
		for j := range value {
			value[j] = byte('a' + i%26)
		}
		for _, b := range [][]byte{binary.AppendVarint(nil, int64(len(head)+valueSize+1)), head, value, {0}} {
			if _, err := w.Write(b); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return out.Bytes()
}

// TestListOffsetsCompressibleBatch: one zstd batch of ~54 KB holding 600
// records of 500 KiB (300 MB decompressed), timestamps base … base+599
// (issue 9, defect 4). Every timestamp lookup is answered right — the one
// at base+500 reads 250 MB of records, MAX_TIMESTAMP all 300 MB — and each
// allocates a few MiB, not the records it reads past.
func TestListOffsetsCompressibleBatch(t *testing.T) {
	const (
		n         = 600
		valueSize = 500 << 10
		base      = int64(1_700_000_000_000)
	)
	recs := compressibleRecords(t, n, valueSize)
	b := wrapBatch(batch.CodecZstd, recs, tsRange(base, n, 1)...)
	if len(b) > 64<<10 {
		t.Fatalf("batch of %d bytes, want a compressible one", len(b))
	}
	t.Logf("batch of %d bytes, %d MB decompressed", len(b), n*valueSize/1000000)
	// Time is not what this test bounds (MaxScanTime has its own): room
	// for the race detector on a loaded machine.
	e := newEnv(t, Config{MaxScanTime: 10 * time.Minute})
	e.coord.createTopic("z", 1)
	e.commit("z", 0, commitOpts{}, b)

	// The zstd decoder's buffers with a 64 KiB window, the 16 KiB scan
	// buffer, the batch: well under 8 MiB whatever the records hold.
	const perLookup = 8 << 20
	for _, tc := range []struct {
		ts                int64
		offset, timestamp int64
	}{
		{base, 0, base},
		{base + 500, 500, base + 500},
		{base + 599, 599, base + 599},
		{-3, 599, base + 599}, // MAX_TIMESTAMP
		{base + 600, -1, -1},
	} {
		var errc int16
		var off, ts int64
		start := time.Now()
		mem := allocated(func() {
			p := e.h.ListOffsets(t.Context(), listReq(8, "z", 0, tc.ts)).Topics[0].Partitions[0]
			errc, off, ts = p.ErrorCode, p.Offset, p.Timestamp
		})
		if errc != 0 || off != tc.offset || ts != tc.timestamp {
			t.Errorf("timestamp %d: error %d offset %d timestamp %d, want %d %d", tc.ts, errc, off, ts, tc.offset, tc.timestamp)
		}
		if mem > perLookup {
			t.Errorf("timestamp %d: allocated %.1f MiB, want ≤ %d MiB", tc.ts, float64(mem)/(1<<20), perLookup>>20)
		}
		t.Logf("timestamp %d: allocated %.2f MiB in %v", tc.ts, float64(mem)/(1<<20), time.Since(start))
	}
}

// TestListOffsetsScanTime: MaxScanTime bounds the time a lookup decompresses,
// over every batch it reads: a lookup that runs out answers its partition
// REQUEST_TIMED_OUT with a warning naming the batch, while lookups needing
// no decompression (an uncompressed partition) are answered.
func TestListOffsetsScanTime(t *testing.T) {
	logs := &logBuffer{}
	e := newEnv(t, Config{MaxScanTime: time.Nanosecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	e.coord.createTopic("t", 2)
	e.commit("t", 0, commitOpts{}, makeBatch(t, batch.CodecZstd, 1000, 1000, 1010, 1020))
	e.commit("t", 1, commitOpts{}, makeBatch(t, batch.CodecNone, 1000, 1000, 1010, 1020))
	p := e.h.ListOffsets(t.Context(), listReq(8, "t", 0, 1015)).Topics[0].Partitions[0]
	if p.ErrorCode != kerr.RequestTimedOut.Code {
		t.Errorf("compressed partition: error %d offset %d, want REQUEST_TIMED_OUT", p.ErrorCode, p.Offset)
	}
	if l := logs.String(); !strings.Contains(l, "out of time") || !strings.Contains(l, "topic=t") || !strings.Contains(l, "partition=0") {
		t.Errorf("no warning naming the batch; logs:\n%s", l)
	}
	if p := e.h.ListOffsets(t.Context(), listReq(8, "t", 1, 1015)).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != 2 {
		t.Errorf("uncompressed partition: error %d offset %d, want 2", p.ErrorCode, p.Offset)
	}

	// The default leaves the same lookup ample time.
	e = newEnv(t, Config{})
	e.coord.createTopic("t", 1)
	e.commit("t", 0, commitOpts{}, makeBatch(t, batch.CodecZstd, 1000, 1000, 1010, 1020))
	if p := e.h.ListOffsets(t.Context(), listReq(8, "t", 0, 1015)).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != 2 {
		t.Errorf("default MaxScanTime: error %d offset %d, want 2", p.ErrorCode, p.Offset)
	}
}
