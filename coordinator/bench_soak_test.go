package coordinator

import (
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
)

var soakDays = flag.Float64("soak-days", 0.02, "days of commits BenchmarkSoak simulates (bench/RESULTS.md: 7)")

// Parameters of BenchmarkSoak: issue 17's week — 3,200 batches/s of 32 KiB
// (100 MB/s) over 1,000 partitions, files sealed every 250 ms, 7-day
// retention — with the defaults of consolidation.
const (
	soakPartitions      = 1000
	soakBatchesPerSec   = 3200
	soakFileMs          = 250
	soakBatchBytes      = 32 << 10
	soakRetentionMs     = 7 * 24 * 3600 * 1000
	soakConsolidateMs   = 10_000                       // a pass every 10 s
	soakRetentionPassMs = 5 * 60 * 1000                // diskless.retention.check.interval.ms
	soakMinAgeMs        = 5 * 60 * 1000                // DefaultConsolidationMinAge
	soakSegmentMs       = 10 * 60 * 1000               // DefaultSegmentRollTime
	soakSegmentBytes    = DefaultSegmentBytes          // 128 MiB
	soakTailBytes       = DefaultSnapshotIntervalBytes // the log a restart replays after the snapshot, at most
	soakBatchesPerFile  = soakBatchesPerSec * soakFileMs / 1000
)

// BenchmarkSoak runs a shard's state through -soak-days of the issue's
// load with an injected clock: files of 800 batches (one per partition
// at most: the partitions round-robin) committed every 250 ms of log
// time; every 10 s, consolidation as runConsolidation decides it — each
// partition's WAL runs older than the minimum age (5 min) swapped for a
// segment object (record 114) once they reach segment.bytes or their
// first is segment.ms (10 min) past the minimum age; every 5 min,
// retention (7 days) and the file lifecycle (the released files closed,
// record 106; closed files forgotten an hour later). The records are
// applied to the state directly (the replay path: no log, no objects,
// no reads — what is measured is the state). Reported at the end: the
// shard's heap (after a collection), the index's runs and segments, the
// files in the file table, the snapshot's bytes, and the replay of a
// restart: loading the snapshot plus applying the last 256 MiB of
// records (DefaultSnapshotIntervalBytes: what the log holds after a
// snapshot, at most).
func BenchmarkSoak(b *testing.B) {
	for range b.N {
		runSoak(b, time.Duration(*soakDays*24*float64(time.Hour)))
	}
}

func runSoak(b *testing.B, span time.Duration) {
	runtime.GC()
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	st := newState(0, DefaultProducerIDExpirationMs, discardLogger())
	tid := diskless.TopicID{7}
	parts := make([]*partition, soakPartitions)
	for p := range int32(soakPartitions) {
		if err := st.apply(&records.PartitionCreated{TopicID: tid, TopicName: "soak", Partition: p}); err != nil {
			b.Fatal(err)
		}
		parts[p] = st.partitions[diskless.TopicPartition{TopicID: tid, Partition: p}]
	}
	apply := func(r records.Record) {
		if err := st.apply(r); err != nil {
			b.Fatal(err)
		}
	}
	// One record 102, reused: 800 partitions of one batch each.
	fps := make([]records.FilePartition, soakBatchesPerFile)
	cbs := make([]records.CommittedBatch, soakBatchesPerFile)
	rec := &records.FileCommitted{ObjectFormat: 1, FileSize: soakBatchesPerFile * soakBatchBytes, OwnerIDs: []int32{0},
		Topics: []records.FileTopic{{TopicID: tid, Partitions: fps}}}
	for i := range fps {
		fps[i].Batches = cbs[i : i+1 : i+1]
	}
	var keyBuf []byte
	key := func(prefix byte, n int64) string {
		keyBuf = strconv.AppendInt(append(keyBuf[:0], prefix, '/'), n, 16)
		return string(keyBuf)
	}

	start := int64(1_700_000_000_000)
	end := start + span.Milliseconds()
	files := int64(0)
	next := 0 // the next batch's partition
	var (
		tail      [][]byte // records since the tail's snapshot
		tailSnap  []byte
		tailStart = int64(-1)
		segs      int64
	)
	bodySize := int64(0) // a record 102's encoded size
	wall := time.Now()
	for now := start; now < end; now += soakFileMs {
		if (now-start)%(24*3600*1000) == 0 && now > start && testing.Verbose() {
			// Progress: the state's size at each simulated day.
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			runs, segEntries := 0, 0
			for _, p := range parts {
				runs += p.runs.len()
				segEntries += len(p.segs)
			}
			fmt.Fprintf(os.Stderr, "BenchmarkSoak: day %d after %v: heap %.1f MiB, %d runs, %d segments, %d files, snapshot %.1f MiB\n",
				(now-start)/(24*3600*1000), time.Since(wall).Round(time.Second), float64(int64(ms.HeapAlloc)-int64(ms0.HeapAlloc))/(1<<20),
				runs, segEntries, len(st.fileByKey), float64(len(st.freeze().appendTo(nil)))/(1<<20))
		}
		// The log tail a restart replays: from a snapshot taken where the
		// last DefaultSnapshotIntervalBytes of records begin.
		if tailStart < 0 && bodySize > 0 && (end-now)/soakFileMs*bodySize <= soakTailBytes {
			tailStart = now
			tailSnap = st.freeze().appendTo(nil)
		}
		// One file.
		files++
		rec.ObjectKey = key('w', files)
		for i := range cbs {
			p := parts[next]
			next = (next + 1) % soakPartitions
			fps[i].Partition = p.tp.Partition
			cbs[i] = records.CommittedBatch{Magic: 2, ByteOffset: int32(i) * soakBatchBytes, ByteSize: soakBatchBytes,
				AssignedBaseOffset: p.hwm, AssignedLastOffset: p.hwm + 9, LogAppendTimestamp: now,
				BatchMaxTimestamp: now, TimestampType: batch.TimestampCreateTime, ProducerID: -1, ProducerEpoch: -1,
				BaseSequence: -1, LastSequence: -1}
		}
		apply(rec)
		for i := range fps {
			p := parts[fps[i].Partition]
			p.visible, p.visHWM, p.visLogStart = true, p.hwm, p.logStart
		}
		recs := []records.Record{rec}
		// Consolidation.
		if now%soakConsolidateMs == 0 {
			for _, p := range parts {
				if r := soakSegment(st, p, now); r != nil {
					segs++
					apply(r)
					recs = append(recs, r)
				}
			}
		}
		// Retention and the file lifecycle.
		if now%soakRetentionPassMs == 0 {
			for _, p := range parts {
				if ls, ok := st.retentionStart(p, soakRetentionMs, -1, now); ok {
					r := &records.RecordsDeleted{TopicID: tid, Partition: p.tp.Partition, NewLogStartOffset: ls}
					apply(r)
					recs = append(recs, r)
					p.visLogStart = p.logStart
				}
			}
			for fi := range st.released {
				r := &records.FileDeleted{ObjectKey: st.files[fi].key, DeleterShard: 0}
				apply(r)
				recs = append(recs, r)
			}
		}
		if bodySize == 0 {
			bodySize = int64(len(records.Append(nil, rec)))
		}
		if tailStart >= 0 {
			for _, r := range recs {
				tail = append(tail, records.Append(nil, r))
			}
		}
	}
	// What the shard holds.
	runs := 0
	var segEntries int
	for _, p := range parts {
		runs += p.runs.len()
		segEntries += len(p.segs)
	}
	liveFiles := len(st.fileByKey)
	snap := st.freeze().appendTo(nil)
	tailBytes := 0
	for _, t := range tail {
		tailBytes += len(t)
	}

	// A restart: the snapshot, then the tail.
	t0 := time.Now()
	again := newState(0, DefaultProducerIDExpirationMs, discardLogger())
	if err := again.decodeSnapshot(tailSnap); err != nil {
		b.Fatal(err)
	}
	load := time.Since(t0)
	for _, body := range tail {
		r, err := records.Decode(body)
		if err != nil {
			b.Fatal(err)
		}
		if err := again.apply(r); err != nil {
			b.Fatal(err)
		}
	}
	replay := time.Since(t0)
	if string(again.freeze().appendTo(nil)) != string(snap) {
		b.Fatal("the restarted state differs")
	}
	// The shard's heap: the state alone.
	again, tail, tailSnap, snapBytes := nil, nil, nil, len(snap)
	snap = nil
	runtime.GC()
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	heap := int64(ms1.HeapAlloc) - int64(ms0.HeapAlloc)
	runtime.KeepAlive(st)
	runtime.KeepAlive(again)
	runtime.KeepAlive(tailSnap)
	batches := float64(files * soakBatchesPerFile)
	b.ReportMetric(batches, "batches")
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(runs), "runs")
	b.ReportMetric(float64(segEntries), "segments")
	b.ReportMetric(float64(liveFiles), "files")
	b.ReportMetric(float64(snapBytes)/(1<<20), "snapshot-MiB")
	b.ReportMetric(load.Seconds(), "snapshot-load-s")
	b.ReportMetric(replay.Seconds(), "replay-s")
	b.ReportMetric(float64(tailBytes)/(1<<20), "tail-MiB")
	b.ReportMetric(float64(segs), "segments-committed")
}

// soakSegment returns the record 114 consolidation writes for p at nowMs,
// or nil: its first WAL runs older than the minimum age, up to
// segment.bytes, once they fill it or the first of them is segment.ms past
// the minimum age.
func soakSegment(st *state, p *partition, nowMs int64) *records.SegmentCommitted {
	x := &p.runs
	cutoff := nowMs - soakMinAgeMs
	k, size := 0, int64(0)
	maxTs, appendTime := int64(math.MinInt64), int64(math.MinInt64)
	for k < x.len() {
		e := x.at(k)
		f := &st.files[e.file]
		if f.appendTime > cutoff || size+int64(e.byteSize) > soakSegmentBytes {
			break
		}
		size += int64(e.byteSize)
		maxTs, appendTime = max(maxTs, e.maxTimestamp), max(appendTime, f.appendTime)
		k++
	}
	if k == 0 {
		return nil
	}
	first := x.at(0)
	full := k < x.len() && st.files[x.at(k).file].appendTime <= cutoff
	if !full && st.files[first.file].appendTime > cutoff-soakSegmentMs {
		return nil
	}
	const entries = 1 + soakSegmentBytes/(64<<10)
	return &records.SegmentCommitted{
		ObjectKey:    "s/" + strconv.FormatInt(first.baseOffset, 16) + "-" + strconv.FormatInt(int64(p.tp.Partition), 16),
		ObjectFormat: 2, FileSize: size + 36*min(entries, size/soakBatchBytes+1) + 64, TopicID: p.tp.TopicID,
		Partition: p.tp.Partition, BaseOffset: first.baseOffset, LastOffset: x.at(k - 1).lastOffset(), DataSize: int32(size),
		IndexEntries: int32(min(entries, size/soakBatchBytes+1)), MaxTimestamp: maxTs, AppendTime: appendTime,
		TimestampType: first.tsType, ReplacedRuns: int32(k), CommitTimestamp: max(nowMs, st.lastAppendTime),
	}
}
