package e2e

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-sidecar/sidecar/segment"
)

// consolidationSets makes the sidecar consolidate WAL runs a second after
// their commit, sealing each partition's segment at the pass that fills
// it, and delete released objects at once: within seconds of a produce its
// WAL objects are gone and its batches live in segment objects.
var consolidationSets = []string{
	"diskless.consolidation.enable=true",
	"diskless.consolidation.min.age.ms=1000",
	"diskless.consolidation.interval.ms=200",
	"diskless.consolidation.segment.ms=1",
	"diskless.consolidation.max.bytes.per.sec=-1",
	"diskless.consolidation.index.interval.bytes=4096",
	"diskless.file.deletion.delay.ms=1",
}

// objectFiles returns the objects of the local store under dataDir.
func objectFiles(t *testing.T, dataDir string) []string {
	t.Helper()
	var out []string
	root := filepath.Join(dataDir, "objects")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".staging" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			out = append(out, path)
		}
		return nil
	})
	mustNoErr(t, "listing the objects", err)
	return out
}

// waitGone waits until none of files exists any more: their runs were
// consolidated and the objects deleted.
func waitGone(t *testing.T, ctx context.Context, dataDir string, files []string) {
	t.Helper()
	for {
		left := 0
		now := objectFiles(t, dataDir)
		for _, f := range files {
			if slices.Contains(now, f) {
				left++
			}
		}
		if left == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d WAL objects still there: not consolidated", left, len(files))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestConsolidationEndToEnd: records produced with every codec, and on a
// LogAppendTime topic, are consolidated into segment objects (their WAL
// objects deleted); more records go to WAL objects after them; consumers
// reading across the segment → WAL boundary get every record byte for
// byte, with dense offsets and, on LogAppendTime, the append times they
// had before consolidation; ListOffsets by timestamp answers as before;
// DeleteRecords inside a segment moves the log start there, and reads
// and lookups from it answer as Kafka does inside a batch.
func TestConsolidationEndToEnd(t *testing.T) {
	t.Parallel()
	sc := StartSidecar(t, "", consolidationSets...)
	ctx := testCtx(t, 5*time.Minute)
	const partitions, perPhase = 3, 3000
	type topicCase struct {
		name  string
		codec kgo.CompressionCodec
		lat   bool
	}
	var cases []topicCase
	for _, cc := range codecCases {
		cases = append(cases, topicCase{"cons-" + cc.name, cc.codec, false})
	}
	cases = append(cases, topicCase{"cons-lat", kgo.ZstdCompression(), true})
	adm := kadm.NewClient(sc.Client())
	base := time.Now().Add(-time.Hour).Truncate(time.Second)

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var configs map[string]*string
			if tc.lat {
				lat := "LogAppendTime"
				configs = map[string]*string{"message.timestamp.type": &lat}
			}
			resp, err := adm.CreateTopic(ctx, partitions, 1, configs, tc.name)
			mustNoErr(t, "CreateTopic", err)
			mustNoErr(t, "CreateTopic result", resp.Err)
			prod := sc.Client(kgo.ProducerBatchCompression(tc.codec), kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.ProducerLinger(5*time.Millisecond), kgo.DefaultProduceTopic(tc.name))
			want := make([][]*kgo.Record, partitions)
			produce := func(from, to int) {
				var wg sync.WaitGroup
				var mu sync.Mutex
				var first error
				for i := from; i < to; i++ {
					r := makeRecord(tc.name, i)
					r.Partition = int32(i % partitions)
					r.Timestamp = base.Add(time.Duration(i) * time.Second)
					want[r.Partition] = append(want[r.Partition], r)
					wg.Add(1)
					prod.Produce(ctx, r, func(_ *kgo.Record, err error) {
						defer wg.Done()
						if err != nil {
							mu.Lock()
							first = cmp.Or(first, err)
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				mustNoErr(t, "produce", first)
			}

			// Phase 1, consolidated: its WAL objects go.
			start := time.Now()
			before := objectFiles(t, sc.DataDir)
			produce(0, perPhase)
			t.Logf("phase 1 produced in %v", time.Since(start))
			// Phase 1's WAL objects: the objects new since, but for segment
			// objects (the previous topic's last records may be consolidated
			// meanwhile, and segments stay).
			var phase1 []string
			for _, f := range objectFiles(t, sc.DataDir) {
				if slices.Contains(before, f) {
					continue
				}
				if b, err := os.ReadFile(f); err == nil && segment.Is(b) {
					continue
				}
				phase1 = append(phase1, f)
			}
			if len(phase1) == 0 {
				t.Fatal("phase 1 wrote no WAL object")
			}
			// The answers before consolidation: records as consumed (with
			// their append times) and lookups by timestamp.
			gotBefore := consumeAll(t, ctx, sc, tc.name, partitions, perPhase)
			t.Logf("phase 1 consumed at %v", time.Since(start))
			probes := []int64{-3, base.UnixMilli(), base.Add(500 * time.Second).UnixMilli(), base.Add(1501500 * time.Millisecond).UnixMilli(),
				base.Add(time.Duration(perPhase-1) * time.Second).UnixMilli(), base.Add(time.Hour).UnixMilli()}
			cl := sc.Client()
			lookups := func() string {
				var b strings.Builder
				for p := range int32(partitions) {
					for _, ts := range probes {
						o, s := listOffsetOf(t, ctx, cl, tc.name, p, ts)
						fmt.Fprintf(&b, "%d@%d=%d/%d ", p, ts, o, s)
					}
				}
				return b.String()
			}
			lookupsBefore := lookups()
			waitGone(t, ctx, sc.DataDir, phase1)
			t.Logf("phase 1 consolidated at %v", time.Since(start))
			if after := lookups(); after != lookupsBefore {
				t.Fatalf("ListOffsets by timestamp after consolidation:\n%s\nbefore:\n%s", after, lookupsBefore)
			}

			// Phase 2 stays in WAL objects (consolidation is a second
			// behind): the consumers cross the boundary.
			produce(perPhase, 2*perPhase)
			t.Logf("phase 2 produced at %v", time.Since(start))
			got := consumeAll(t, ctx, sc, tc.name, partitions, 2*perPhase)
			t.Logf("all consumed at %v", time.Since(start))
			mustConsumeProduced(t, want, got)
			for p := range partitions {
				for i, b := range gotBefore[p] {
					if r := got[p][i]; !r.Timestamp.Equal(b.Timestamp) || r.Attrs.TimestampType() != b.Attrs.TimestampType() {
						t.Fatalf("partition %d offset %d: timestamp %v (type %d) after consolidation, %v (type %d) before",
							p, i, r.Timestamp, r.Attrs.TimestampType(), b.Timestamp, b.Attrs.TimestampType())
					}
				}
			}

			// DeleteRecords inside the segment of partition 0.
			mid := int64(perPhase / partitions / 2)
			dr, err := adm.DeleteRecords(ctx, kadm.Offsets{tc.name: {0: {Topic: tc.name, Partition: 0, At: mid}}})
			mustNoErr(t, "DeleteRecords", err)
			mustNoErr(t, "DeleteRecords result", dr[tc.name][0].Err)
			if lw := dr[tc.name][0].LowWatermark; lw != mid {
				t.Fatalf("low watermark %d, want %d", lw, mid)
			}
			if o, _ := listOffsetOf(t, ctx, cl, tc.name, 0, -2); o != mid {
				t.Fatalf("earliest after DeleteRecords: %d, want %d", o, mid)
			}
			// A consumer from the log start gets the records from it on.
			cons := sc.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tc.name: {0: kgo.NewOffset().At(mid)}}))
			fs := cons.PollFetches(ctx)
			mustNoErr(t, "fetch from the log start", fs.Err())
			first := fs.Records()[0]
			if first.Offset != mid || sameRecord(want[0][mid], first) != nil {
				t.Fatalf("first record from the log start: offset %d", first.Offset)
			}
			// A lookup below the log start answers from it.
			if o, _ := listOffsetOf(t, ctx, cl, tc.name, 0, base.UnixMilli()); o != mid {
				t.Fatalf("ListOffsets below the log start: %d, want %d", o, mid)
			}
		})
	}
	_, text := httpGet(t, "http://"+sc.HTTP+"/metrics")
	for _, m := range []string{"diskless_consolidation_segments_committed_total", "diskless_consolidation_reads_total",
		"diskless_consolidation_segments_uploaded_total", "diskless_consolidation_runs_total"} {
		if v := metricValue(t, text, m); v <= 0 {
			t.Errorf("%s = %v", m, v)
		}
	}
	if v := metricValue(t, text, "diskless_consolidation_failures_total"); v != 0 {
		t.Errorf("%v consolidation failures", v)
	}
	// `sidecar wal dump` reads every object, segment objects with their
	// index: offsets dense from the trailer's base offset. The sidecar is
	// stopped first: consolidation would delete WAL objects while they are
	// listed.
	sc.Stop()
	segments := 0
	for _, f := range objectFiles(t, sc.DataDir) {
		r, code, out := walDump(t, "--json", f)
		if code != 0 {
			t.Fatalf("wal dump %s: exit %d\n%s", f, code, out)
		}
		if r.Segment == nil {
			continue
		}
		segments++
		next := r.Segment.BaseOffset
		for _, e := range r.Segment.Entries {
			if e.FirstOffset != next || e.LastOffset < e.FirstOffset {
				t.Fatalf("wal dump %s: entry %d–%d after offset %d", f, e.FirstOffset, e.LastOffset, next-1)
			}
			next = e.LastOffset + 1
		}
		if int64(len(r.Batches)) < int64(len(r.Segment.Entries)) || r.Records != next-r.Segment.BaseOffset {
			t.Fatalf("wal dump %s: %d batches, %d records, %d entries to offset %d", f, len(r.Batches), r.Records, len(r.Segment.Entries), next)
		}
	}
	if segments == 0 {
		t.Error("no segment object among the objects")
	}
}
