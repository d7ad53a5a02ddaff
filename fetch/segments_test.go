package fetch

import (
	"bytes"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/segment"
)

// consolidate replaces the first k runs of a partition of the fake
// coordinator by a segment object holding their batches, as the real
// coordinator's consolidation does (record 114): it reads the runs' bytes
// from the fake store, writes the object with segment.Writer (an index
// entry every interval bytes) under key, and swaps the runs for the
// segment's coordinate. It returns the object.
func (e *env) consolidate(topic string, partition int32, k int, key string, interval uint32) []byte {
	e.tb.Helper()
	e.coord.mu.Lock()
	p := e.coord.mu.byName[topic].parts[partition]
	runs := slices.Clone(p.runs[:k])
	e.coord.mu.Unlock()
	var data bytes.Buffer
	var tid [16]byte
	copy(tid[:], topic)
	w := segment.NewWriter(&data, tid, partition, runs[0].BaseOffset, interval)
	for _, r := range runs {
		e.store.mu.Lock()
		b := slices.Clone(e.store.mu.objects[r.ObjectKey][r.ByteOffset : r.ByteOffset+int64(r.ByteSize)])
		e.store.mu.Unlock()
		if err := w.Add(b, r.BaseOffset, r.LogAppendTime, r.TimestampType); err != nil {
			e.tb.Fatal(err)
		}
	}
	tail, tr := w.Finish()
	obj := append(data.Bytes(), tail...)
	e.store.put(key, obj)
	seg := diskless.RunCoordinate{
		ObjectKey: key, ObjectFormat: diskless.ObjectFormatSegment, FileSize: int64(len(obj)), ByteSize: int32(tr.DataSize),
		BaseOffset: runs[0].BaseOffset, LastOffset: runs[k-1].LastOffset, TimestampType: runs[0].TimestampType,
		LogAppendTime: w.AppendTime(), BatchMaxTimestamp: w.MaxTimestamp(),
	}
	e.coord.mu.Lock()
	p.runs = slices.Concat([]diskless.RunCoordinate{seg}, p.runs[k:])
	e.coord.mu.Unlock()
	return obj
}

// segmentEnv commits to partitions 0 and 1 of "s" the same twelve files
// of two batches each (3 and 1 records, timestamps rising by 10 per
// record; append time 1000·file on LogAppendTime), then consolidates
// partition 0's first ten files into one segment object with an index
// entry every 700 bytes. Partition 1 stays in WAL form: the reference.
func segmentEnv(t *testing.T, lat bool) *env {
	t.Helper()
	e := newEnv(t, Config{})
	e.coord.createTopic("s", 2)
	ts := int64(0)
	for f := range 12 {
		a := makeBatch(t, batch.CodecNone, 50, ts, ts+10, ts+20)
		b := makeBatch(t, batch.CodecGzip, 50, ts+30)
		ts += 40
		o := commitOpts{}
		if lat {
			o.logAppendTime = int64(1000 * (f + 1))
		}
		for p := range int32(2) {
			e.commit("s", p, o, a, b)
		}
	}
	e.consolidate("s", 0, 10, "seg/0001", 700)
	return e
}

// TestFetchFromSegment: a consumer reading across the segment → WAL
// boundary, from every offset and with budgets that cut entries, gets the
// batches of the partition that was never consolidated, byte for byte
// (LogAppendTime: each batch stamped with its own append time), with
// dense offsets; a read stops at the segment's end.
func TestFetchFromSegment(t *testing.T) {
	for _, lat := range []bool{false, true} {
		e := segmentEnv(t, lat)
		for _, maxBytes := range []int32{1, 500, 1400, 1 << 20} {
			for from := int64(0); from < 48; from++ {
				seg := flat(e.h.Fetch(t.Context(), e.fetchReq(16, 0, fp{topic: "s", partition: 0, offset: from, maxBytes: maxBytes})))[0]
				wal := flat(e.h.Fetch(t.Context(), e.fetchReq(16, 0, fp{topic: "s", partition: 1, offset: from, maxBytes: maxBytes})))[0]
				if seg.ErrorCode != 0 || wal.ErrorCode != 0 {
					t.Fatalf("lat %v, from %d, max %d: errors %d %d", lat, from, maxBytes, seg.ErrorCode, wal.ErrorCode)
				}
				// The same batches, whatever the budget estimates did;
				// a prefix of each other at least, the first batch the
				// same.
				sb, wb := decodeBatches(t, seg.RecordBatches), decodeBatches(t, wal.RecordBatches)
				if len(sb) == 0 || len(wb) == 0 || sb[0].FirstOffset != wb[0].FirstOffset {
					t.Fatalf("lat %v, from %d, max %d: %d and %d batches", lat, from, maxBytes, len(sb), len(wb))
				}
				n := min(len(seg.RecordBatches), len(wal.RecordBatches))
				if !bytes.Equal(seg.RecordBatches[:n], wal.RecordBatches[:n]) {
					t.Fatalf("lat %v, from %d, max %d: the segment's bytes differ from the WAL's", lat, from, maxBytes)
				}
				offs, _ := consume(t, seg, from)
				for i, o := range offs {
					if o != from+int64(i) {
						t.Fatalf("lat %v, from %d, max %d: offsets %v", lat, from, maxBytes, offs)
					}
				}
				// Unbounded, a read from the segment stops at its end
				// (offset 39), as Kafka's does at a log segment's; from
				// the WAL runs it takes all.
				if maxBytes == 1<<20 {
					if last := offs[len(offs)-1]; (from < 40 && last != 39) || (from >= 40 && len(seg.RecordBatches) != len(wal.RecordBatches)) {
						t.Fatalf("lat %v, from %d: offsets to %d, %d bytes from the segment, %d from the WAL", lat, from, last,
							len(seg.RecordBatches), len(wal.RecordBatches))
					}
				}
			}
		}
		// A consumer at the start reads the whole partition in order.
		pos := int64(0)
		for fetches := 0; pos < 48; fetches++ {
			if fetches > 100 {
				t.Fatal("no progress")
			}
			p := flat(e.h.Fetch(t.Context(), e.fetchReq(16, 0, fp{topic: "s", offset: pos, maxBytes: 600})))[0]
			offs, _ := consume(t, p, pos)
			if len(offs) == 0 || offs[0] != pos {
				t.Fatalf("lat %v: from %d: %v", lat, pos, offs)
			}
			pos = offs[len(offs)-1] + 1
		}
	}
}

// TestFetchSegmentIndexCached: a segment's index is read once, then
// served from the handler's cache.
func TestFetchSegmentIndexCached(t *testing.T) {
	e := segmentEnv(t, false)
	before := e.store.reads()
	e.h.Fetch(t.Context(), e.fetchReq(16, 0, fp{topic: "s", offset: 0, maxBytes: 200}))
	first := e.store.reads() - before
	e.h.Fetch(t.Context(), e.fetchReq(16, 0, fp{topic: "s", offset: 8, maxBytes: 200}))
	if second := e.store.reads() - before - first; first != 2 || second != 1 {
		t.Fatalf("reads: %d then %d; want 2 (index, data) then 1 (data)", first, second)
	}
}

// TestFetchSegmentFaults: a segment whose index does not check out gets
// CORRUPT_MESSAGE, one whose object is missing KAFKA_STORAGE_ERROR, and a
// corrupt batch inside the segment cuts the partition there.
func TestFetchSegmentFaults(t *testing.T) {
	t.Run("index", func(t *testing.T) {
		e := segmentEnv(t, false)
		e.store.mutate("seg/0001", func(b []byte) []byte { b[len(b)-70] ^= 1; return b })
		if p := flat(e.h.Fetch(t.Context(), e.fetchReq(16, 0, fp{topic: "s"})))[0]; p.ErrorCode != kerr.CorruptMessage.Code {
			t.Fatalf("error %d", p.ErrorCode)
		}
	})
	t.Run("missing", func(t *testing.T) {
		e := segmentEnv(t, false)
		e.store.mutate("seg/0001", func([]byte) []byte { return nil })
		if p := flat(e.h.Fetch(t.Context(), e.fetchReq(16, 0, fp{topic: "s"})))[0]; p.ErrorCode != kerr.KafkaStorageError.Code {
			t.Fatalf("error %d", p.ErrorCode)
		}
	})
	t.Run("batch", func(t *testing.T) {
		e := segmentEnv(t, false)
		// The first batch of file 2 (offsets 8–10): its last byte.
		var end int
		for range 5 {
			_, n, _ := batch.Parse(e.store.mu.objects["seg/0001"][end:])
			end += n
		}
		e.store.mutate("seg/0001", func(b []byte) []byte { b[end-1] ^= 1; return b })
		p := flat(e.h.Fetch(t.Context(), e.fetchReq(16, 0, fp{topic: "s"})))[0]
		if got := baseOffsets(t, p.RecordBatches); p.ErrorCode != 0 || !slices.Equal(got, []int64{0, 3, 4, 7}) {
			t.Fatalf("error %d, batches %v; want [0 3 4 7]", p.ErrorCode, got)
		}
		if p := flat(e.h.Fetch(t.Context(), e.fetchReq(16, 0, fp{topic: "s", offset: 8})))[0]; p.ErrorCode != kerr.CorruptMessage.Code {
			t.Fatalf("from the corrupt batch: error %d", p.ErrorCode)
		}
	})
}

// TestListOffsetsInSegment: ListOffsets by timestamp and max timestamp
// answer from a segment as from the WAL runs it replaced, also with the
// log start inside it.
func TestListOffsetsInSegment(t *testing.T) {
	for _, lat := range []bool{false, true} {
		e := segmentEnv(t, lat)
		for _, logStart := range []int64{0, 5, 17, 39} {
			e.coord.setLogStart("s", 0, logStart)
			e.coord.setLogStart("s", 1, logStart)
			for _, ts := range []int64{0, 5, 10, 95, 100, 159, 395, 400, 470, 5000, 9500, 11000, 13000, diskless.ListOffsetsMaxTimestamp} {
				seg := e.h.ListOffsets(t.Context(), listReq(8, "s", 0, ts)).Topics[0].Partitions[0]
				wal := e.h.ListOffsets(t.Context(), listReq(8, "s", 1, ts)).Topics[0].Partitions[0]
				if seg.ErrorCode != 0 || seg.Offset != wal.Offset || seg.Timestamp != wal.Timestamp {
					t.Fatalf("lat %v, log start %d, ListOffsets(%d): segment %d at %d (error %d), WAL %d at %d",
						lat, logStart, ts, seg.Offset, seg.Timestamp, seg.ErrorCode, wal.Offset, wal.Timestamp)
				}
			}
		}
	}
}
