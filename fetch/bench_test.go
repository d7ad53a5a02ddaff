package fetch

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
)

const (
	benchPartitions       = 8
	benchBatchesPerPart   = 50_000 // the index the coordinator searches
	benchBatchesPerObject = 64
	benchValueSize        = 16 << 10
)

// benchEnv builds a topic whose partitions each index benchBatchesPerPart
// batches of ~16 KiB. Objects are shared (every coordinate points into a
// few real WAL objects) so the index is large and memory stays small.
func benchEnv(b *testing.B, cfg Config, lat int64) (*env, int) {
	e := newEnv(b, cfg)
	e.coord.createTopic("bench", benchPartitions)
	one := makeBatch(b, batch.CodecNone, benchValueSize, tsRange(1, 4, 1)...)
	var obj []byte
	for range benchBatchesPerObject {
		obj = append(obj, one...)
	}
	for p := range int32(benchPartitions) {
		key := fmt.Sprintf("wal/bench-%d", p)
		e.store.put(key, obj)
		bs := make([]diskless.RunCoordinate, benchBatchesPerPart)
		for i := range bs {
			bs[i] = diskless.RunCoordinate{
				ObjectKey:         key,
				FileSize:          int64(len(obj)),
				ByteOffset:        int64(i%benchBatchesPerObject) * int64(len(one)),
				ByteSize:          int32(len(one)),
				BaseOffset:        int64(i) * 4,
				LastOffset:        int64(i)*4 + 3,
				BatchMaxTimestamp: 4,
			}
			if lat != 0 {
				bs[i].TimestampType = batch.TimestampLogAppendTime
				bs[i].LogAppendTime = lat
			}
		}
		e.coord.add("bench", p, bs...)
	}
	return e, len(one)
}

// BenchmarkFetch measures a whole Fetch of 8 MiB (8 partitions × 1 MiB,
// ~64 batches each, coalesced into one read per object run) over a large
// fake index: planning, reads from memory, header rewrite and response
// building. Bytes/s is response bytes.
func BenchmarkFetch(b *testing.B) {
	for _, bc := range []struct {
		name string
		lat  int64
		conc int
	}{
		{"CreateTime/sequential", 0, 1},
		{"CreateTime/concurrent", 0, DefaultReadConcurrency},
		{"LogAppendTime/sequential", 1_700_000_000_000, 1},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e, _ := benchEnv(b, Config{ReadConcurrency: bc.conc}, bc.lat)
			var parts []fp
			for p := range int32(benchPartitions) {
				parts = append(parts, fp{topic: "bench", partition: p, offset: benchBatchesPerPart * 2, maxBytes: 1 << 20})
			}
			req := e.fetchReq(16, 8<<20, parts...)
			ctx := context.Background()
			resp := e.h.Fetch(ctx, req)
			b.SetBytes(responseBytes(resp))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				e.h.Fetch(ctx, req)
			}
		})
	}
}

// BenchmarkPlanAndStamp measures the per-batch work without the reads:
// budgets, span planning, the walk of the runs' batches and the header
// rewrite of 1 MiB (~64 batches) of one partition already in memory. It
// should not allocate.
func BenchmarkPlanAndStamp(b *testing.B) {
	for _, bc := range []struct {
		name string
		lat  int64
	}{{"CreateTime", 0}, {"LogAppendTime", 1_700_000_000_000}} {
		b.Run(bc.name, func(b *testing.B) {
			e, _ := benchEnv(b, Config{}, bc.lat)
			const offset = benchBatchesPerPart * 2
			res := e.coord.FindBatches(context.Background(), []diskless.FindBatchesRequest{{
				TopicID: e.h.coordTopicID(b, "bench"), Offset: offset, MaxBytes: 1 << 20,
			}})[0]
			bg := newBudget(8 << 20)
			n, tail, size := bg.take(res.Runs, 1<<20, offset)
			sel := res.Runs[:n]
			buf := make([]byte, size)
			spans := appendSpans(make([]span, 0, countSpans(sel)), 0, sel, tail, buf)
			e.h.readSpans(context.Background(), spans)
			op := &fetchOp{h: e.h, req: &kmsg.FetchRequest{Version: 16}}
			p := &fetchPart{out: new(kmsg.FetchResponseTopicPartition), maxBytes: 1 << 20, offset: offset, end: math.MaxInt64,
				sel: sel, tail: tail, size: size, buf: buf, cut: len(sel)}
			bs := make([]runBatch, 0, 1024)
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				bg := newBudget(8 << 20)
				n, tail, _ := bg.take(res.Runs, 1<<20, offset)
				spans = appendSpans(spans[:0], 0, res.Runs[:n], tail, buf)
				sb := newBudget(8 << 20)
				bs = op.serve(context.Background(), p, &sb, bs[:0])
				if p.out.ErrorCode != 0 || len(p.out.RecordBatches) == 0 {
					b.Fatalf("served %d bytes, error %d", len(p.out.RecordBatches), p.out.ErrorCode)
				}
			}
		})
	}
}

func (h *Handler) coordTopicID(tb testing.TB, name string) diskless.TopicID {
	t, ok := h.coord.Topic(name)
	if !ok {
		tb.Fatalf("no topic %q", name)
	}
	return t.ID
}

func responseBytes(resp *kmsg.FetchResponse) int64 {
	var n int64
	for _, p := range flat(resp) {
		n += int64(len(p.RecordBatches))
	}
	return n
}

// BenchmarkListOffsetsScan measures a timestamp lookup whose answer is the
// last record of a batch of 64 × 16 KiB records, per codec: one read from
// memory, decompression and the record scan. Bytes/s is decompressed
// records scanned.
func BenchmarkListOffsetsScan(b *testing.B) {
	tss := tsRange(1000, 64, 1)
	raw := recordsOf(16<<10, tss...)
	for _, c := range []struct {
		name  string
		codec int8
	}{
		{"none", batch.CodecNone},
		{"gzip", batch.CodecGzip},
		{"snappy", batch.CodecSnappy},
		{"lz4", batch.CodecLZ4},
		{"zstd", batch.CodecZstd},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := newEnv(b, Config{})
			e.coord.createTopic("s", 1)
			e.commit("s", 0, commitOpts{}, wrapBatch(c.codec, compress(b, c.codec, raw), tss...))
			req := listReq(8, "s", 0, tss[len(tss)-1])
			ctx := context.Background()
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if p := e.h.ListOffsets(ctx, req).Topics[0].Partitions[0]; p.Offset != int64(len(tss)-1) {
					b.Fatalf("offset %d", p.Offset)
				}
			}
		})
	}
}
