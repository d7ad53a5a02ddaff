package fetch

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// threeBatches commits three 5-record batches (offsets 0–4, 5–9, 10–14) to
// topic/partition, one file each.
func (e *env) threeBatches(topic string, partition int32) {
	for i := range 3 {
		e.commit(topic, partition, commitOpts{}, makeBatch(e.tb, batch.CodecNone, 10, tsRange(int64(1000*i), 5, 1)...))
	}
}

func TestFetchOffsets(t *testing.T) {
	e := newEnv(t, Config{})
	e.coord.createTopic("t", 2)
	e.threeBatches("t", 0)
	e.threeBatches("t", 1)
	e.coord.setLogStart("t", 1, 7) // inside the batch 5–9

	for _, tc := range []struct {
		name      string
		partition int32
		offset    int64
		errc      *kerr.Error
		bases     []int64
		logStart  int64
	}{
		{name: "start of log", offset: 0, bases: []int64{0, 5, 10}},
		{name: "middle of a batch returns the containing batch", offset: 7, bases: []int64{5, 10}},
		{name: "last offset of a batch", offset: 9, bases: []int64{5, 10}},
		{name: "at high watermark is empty", offset: 15, bases: []int64{}},
		{name: "above high watermark", offset: 16, errc: kerr.OffsetOutOfRange},
		{name: "log start inside a batch", partition: 1, offset: 7, bases: []int64{5, 10}, logStart: 7},
		{name: "below log start", partition: 1, offset: 6, errc: kerr.OffsetOutOfRange, logStart: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := e.h.Fetch(t.Context(), e.fetchReq(16, 0, fp{topic: "t", partition: tc.partition, offset: tc.offset}))
			p := flat(resp)[0]
			if p.ErrorCode != errCode(tc.errc) {
				t.Fatalf("error %d, want %v", p.ErrorCode, tc.errc)
			}
			if p.HighWatermark != 15 || p.LastStableOffset != 15 || p.LogStartOffset != tc.logStart {
				t.Errorf("offsets hwm %d lso %d log start %d, want 15 15 %d",
					p.HighWatermark, p.LastStableOffset, p.LogStartOffset, tc.logStart)
			}
			if tc.errc != nil {
				if len(p.RecordBatches) != 0 {
					t.Errorf("%d bytes of records with an error", len(p.RecordBatches))
				}
				return
			}
			if got := baseOffsets(t, p.RecordBatches); !slices.Equal(got, tc.bases) {
				t.Errorf("batches at %v, want %v", got, tc.bases)
			}
			if p.RecordBatches == nil {
				t.Error("records are null; Kafka sends empty records")
			}
		})
	}
}

func errCode(e *kerr.Error) int16 {
	if e == nil {
		return 0
	}
	return e.Code
}

func TestFetchBudgets(t *testing.T) {
	size := int32(len(makeBatch(t, batch.CodecNone, 100, 1, 2, 3)))
	setup := func(t *testing.T, cfg Config) *env {
		e := newEnv(t, cfg)
		e.coord.createTopic("b", 3)
		for p := range int32(3) {
			for range 2 {
				e.commit("b", p, commitOpts{}, makeBatch(t, batch.CodecNone, 100, 1, 2, 3))
			}
		}
		return e
	}
	for _, tc := range []struct {
		name     string
		cfg      Config
		maxBytes int32
		parts    []fp
		want     []int // batches per partition, in request order
	}{
		{
			name:     "first batch larger than max_bytes is delivered",
			maxBytes: 1,
			parts:    []fp{{topic: "b", partition: 0}, {topic: "b", partition: 1}},
			want:     []int{1, 0},
		},
		{
			name:  "first batch larger than partition_max_bytes is delivered",
			parts: []fp{{topic: "b", partition: 0, maxBytes: 1}, {topic: "b", partition: 1, maxBytes: 1}},
			want:  []int{1, 0},
		},
		{
			name:     "max_bytes shared in request order",
			maxBytes: 3 * size,
			parts: []fp{
				{topic: "b", partition: 0, maxBytes: 2 * size},
				{topic: "b", partition: 1, maxBytes: 2 * size},
				{topic: "b", partition: 2, maxBytes: 2 * size},
			},
			want: []int{2, 1, 0},
		},
		{
			name:     "request order, not partition order",
			maxBytes: 3 * size,
			parts:    []fp{{topic: "b", partition: 2}, {topic: "b", partition: 0}, {topic: "b", partition: 1}},
			want:     []int{2, 1, 0},
		},
		{
			name: "partition_max_bytes per partition",
			parts: []fp{
				{topic: "b", partition: 0, maxBytes: size + 1},
				{topic: "b", partition: 1, maxBytes: 2 * size},
				{topic: "b", partition: 2, maxBytes: size - 1},
			},
			want: []int{1, 2, 0},
		},
		{
			name: "an empty partition leaves the first-batch exemption to the next",
			parts: []fp{
				{topic: "b", partition: 0, offset: 6},
				{topic: "b", partition: 1, maxBytes: 1},
			},
			want: []int{0, 1},
		},
		{
			name:  "max_bytes capped by Config.MaxBytes",
			cfg:   Config{MaxBytes: size},
			parts: []fp{{topic: "b", partition: 0}, {topic: "b", partition: 1}},
			want:  []int{1, 0},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t, tc.cfg)
			resp := e.h.Fetch(t.Context(), e.fetchReq(16, tc.maxBytes, tc.parts...))
			var got []int
			for _, p := range flat(resp) {
				if p.ErrorCode != 0 || p.HighWatermark != 6 || p.LastStableOffset != 6 || p.LogStartOffset != 0 {
					t.Errorf("partition %d: error %d, offsets %d %d %d; want no error and real offsets",
						p.Partition, p.ErrorCode, p.HighWatermark, p.LastStableOffset, p.LogStartOffset)
				}
				got = append(got, len(decodeBatches(t, p.RecordBatches)))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("batches per partition %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFetchHeaderRewrite(t *testing.T) {
	const (
		epoch = 3
		lat   = 1_700_000_000_123
	)
	e := newEnv(t, Config{LeaderEpoch: epoch})
	e.coord.createTopic("create", 1)
	e.coord.createTopic("append", 1)
	e.commit("create", 0, commitOpts{}, makeBatch(t, batch.CodecNone, 10, 100, 101)) // pushes the next batch to base offset 2
	orig := makeBatch(t, batch.CodecLZ4, 10, 200, 250, 220)
	e.commit("create", 0, commitOpts{}, orig)
	e.commit("append", 0, commitOpts{logAppendTime: lat}, makeBatch(t, batch.CodecNone, 10, 100, 101))
	e.commit("append", 0, commitOpts{logAppendTime: lat}, orig)

	for _, tc := range []struct {
		topic   string
		attrs   int16
		maxTS   int64
		wantTSs []int64
	}{
		{topic: "create", attrs: batch.CodecLZ4, maxTS: 250, wantTSs: []int64{200, 250, 220}},
		{topic: "append", attrs: batch.CodecLZ4 | batch.AttrLogAppendTime, maxTS: lat, wantTSs: []int64{lat, lat, lat}},
	} {
		t.Run(tc.topic, func(t *testing.T) {
			resp := e.h.Fetch(t.Context(), e.fetchReq(16, 0, fp{topic: tc.topic, offset: 2}))
			p := flat(resp)[0]
			bs := decodeBatches(t, p.RecordBatches) // checks every CRC
			if len(bs) != 1 {
				t.Fatalf("%d batches, want 1", len(bs))
			}
			rb := bs[0]
			if rb.FirstOffset != 2 || rb.PartitionLeaderEpoch != epoch || rb.Attributes != tc.attrs ||
				rb.MaxTimestamp != tc.maxTS || rb.FirstTimestamp != 200 {
				t.Errorf("header: base %d epoch %d attrs %#x max ts %d first ts %d; want 2 %d %#x %d 200",
					rb.FirstOffset, rb.PartitionLeaderEpoch, rb.Attributes, rb.MaxTimestamp, rb.FirstTimestamp,
					epoch, tc.attrs, tc.maxTS)
			}
			// Invariant 3: everything else is the producer's bytes.
			got := p.RecordBatches
			if !bytes.Equal(got[batch.HeaderSize:], orig[batch.HeaderSize:]) || !bytes.Equal(got[8:12], orig[8:12]) ||
				!bytes.Equal(got[27:35], orig[27:35]) || !bytes.Equal(got[43:], orig[43:]) {
				t.Error("bytes other than the rewritten fields changed")
			}
			if tc.topic == "create" && !bytes.Equal(got[17:], orig[17:]) {
				t.Error("CreateTime batch: bytes under the CRC changed")
			}
			offs, tss := consume(t, p, 2)
			if !slices.Equal(offs, []int64{2, 3, 4}) || !slices.Equal(tss, tc.wantTSs) {
				t.Errorf("consumer sees offsets %v timestamps %v, want [2 3 4] %v", offs, tss, tc.wantTSs)
			}
		})
	}
}

func TestFetchZstd(t *testing.T) {
	e := newEnv(t, Config{})
	e.coord.createTopic("z", 1)
	e.commit("z", 0, commitOpts{}, makeBatch(t, batch.CodecGzip, 10, 1, 2))    // 0–1
	e.commit("z", 0, commitOpts{}, makeBatch(t, batch.CodecZstd, 10, 3, 4, 5)) // 2–4
	for _, tc := range []struct {
		name    string
		version int16
		offset  int64
		errc    *kerr.Error
		bases   []int64
	}{
		{name: "v9 gets the batches before the zstd one", version: 9, offset: 0, bases: []int64{0}},
		{name: "v9 at a zstd batch is refused", version: 9, offset: 3, errc: kerr.UnsupportedCompressionType},
		{name: "v10 gets zstd", version: 10, offset: 0, bases: []int64{0, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := flat(e.h.Fetch(t.Context(), e.fetchReq(tc.version, 0, fp{topic: "z", offset: tc.offset})))[0]
			if p.ErrorCode != errCode(tc.errc) {
				t.Fatalf("error %d, want %v", p.ErrorCode, tc.errc)
			}
			if got := baseOffsets(t, p.RecordBatches); !slices.Equal(got, tc.bases) && tc.errc == nil {
				t.Errorf("batches at %v, want %v", got, tc.bases)
			}
		})
	}
}

// mutate edits a partition's index in place.
func (c *fakeCoord) mutate(topic string, partition int32, fn func([]diskless.RunCoordinate)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fn(c.mu.byName[topic].parts[partition].runs)
}

// mutate edits an object in place, replaces it, or (nil) deletes it.
func (s *fakeStore) mutate(key string, fn func([]byte) []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := fn(s.mu.objects[key]); b != nil {
		s.mu.objects[key] = b
	} else {
		delete(s.mu.objects, key)
	}
}

func TestFetchReadFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		lat  bool // the partition is LogAppendTime
		// break_ damages partition 1, whose two batches are in objects
		// wal/0003 and wal/0004.
		break_ func(e *env)
		errc   *kerr.Error
		bases  []int64 // what partition 1 still serves
	}{
		{
			name:   "object missing",
			break_: func(e *env) { e.store.mutate("wal/0003", func([]byte) []byte { return nil }) },
			errc:   kerr.KafkaStorageError,
		},
		{
			name:   "read error",
			break_: func(e *env) { e.store.failKey("wal/0003", errors.New("connection reset")) },
			errc:   kerr.KafkaStorageError,
		},
		{
			name:   "object shorter than the index says",
			break_: func(e *env) { e.store.mutate("wal/0003", func(b []byte) []byte { return b[:len(b)-1] }) },
			errc:   kerr.KafkaStorageError,
		},
		{
			name: "bad batch length",
			break_: func(e *env) {
				e.store.mutate("wal/0003", func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:], 1<<30); return b })
			},
			errc: kerr.CorruptMessage,
		},
		{
			name:   "bad magic",
			break_: func(e *env) { e.store.mutate("wal/0003", func(b []byte) []byte { b[16] = 1; return b }) },
			errc:   kerr.CorruptMessage,
		},
		{
			// The run's one batch passed its check: it is served, the
			// bytes after it never.
			name: "coordinate size past the run's last batch",
			break_: func(e *env) {
				e.store.mutate("wal/0003", func(b []byte) []byte { return append(b, 0, 0, 0, 0) })
				e.coord.mutate("t", 1, func(bs []diskless.RunCoordinate) { bs[0].ByteSize += 4 })
			},
			bases: []int64{0},
		},
		{
			name: "coordinate size short of the run's last batch",
			break_: func(e *env) {
				e.coord.mutate("t", 1, func(bs []diskless.RunCoordinate) { bs[0].ByteSize -= 4 })
			},
			errc: kerr.CorruptMessage,
		},
		{
			name: "coordinate offset span does not match the batch",
			break_: func(e *env) {
				e.coord.mutate("t", 1, func(bs []diskless.RunCoordinate) { bs[0].LastOffset-- })
			},
			errc: kerr.CorruptMessage,
		},
		{
			name: "coordinate too small for a header",
			break_: func(e *env) {
				e.coord.mutate("t", 1, func(bs []diskless.RunCoordinate) { bs[0].ByteSize = 12 })
			},
			errc: kerr.CorruptMessage,
		},
		{
			name: "LogAppendTime batch with a bad CRC is not re-signed",
			lat:  true,
			break_: func(e *env) {
				e.store.mutate("wal/0003", func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b })
			},
			errc: kerr.CorruptMessage,
		},
		{
			name: "second batch unreadable: the first is served",
			break_: func(e *env) {
				e.store.failKey("wal/0004", errors.New("boom"))
			},
			bases: []int64{0},
		},
		{
			name: "second batch corrupt: the first is served",
			break_: func(e *env) {
				e.store.mutate("wal/0004", func(b []byte) []byte { b[16] = 0; return b })
			},
			bases: []int64{0},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.coord.createTopic("t", 2)
			o := commitOpts{}
			if tc.lat {
				o.logAppendTime = 99
			}
			for p := range int32(2) {
				e.commit("t", p, o, makeBatch(t, batch.CodecNone, 10, 1, 2, 3))
				e.commit("t", p, o, makeBatch(t, batch.CodecNone, 10, 1, 2, 3))
			}
			tc.break_(e)
			resp := e.h.Fetch(t.Context(), e.fetchReq(16, 0, fp{topic: "t", partition: 0}, fp{topic: "t", partition: 1}))
			ps := flat(resp)
			if ps[0].ErrorCode != 0 || !slices.Equal(baseOffsets(t, ps[0].RecordBatches), []int64{0, 3}) {
				t.Errorf("healthy partition: error %d, batches %v", ps[0].ErrorCode, baseOffsets(t, ps[0].RecordBatches))
			}
			p := ps[1]
			if p.ErrorCode != errCode(tc.errc) {
				t.Fatalf("damaged partition: error %d, want %v", p.ErrorCode, tc.errc)
			}
			if tc.errc != nil {
				if len(p.RecordBatches) != 0 {
					t.Errorf("damaged partition: %d bytes of records with an error", len(p.RecordBatches))
				}
				return
			}
			if got := baseOffsets(t, p.RecordBatches); !slices.Equal(got, tc.bases) {
				t.Errorf("damaged partition serves %v, want %v", got, tc.bases)
			}
		})
	}
}

func TestFetchCoalescesReads(t *testing.T) {
	b := func() []byte { return makeBatch(t, batch.CodecNone, 10, 1, 2) }
	for _, tc := range []struct {
		name    string
		setup   func(e *env)
		reads   int // ranges read
		objects int // ReadRanges calls
		bases   []int64
	}{
		{
			name:    "adjacent batches of one object: one read",
			setup:   func(e *env) { e.commit("t", 0, commitOpts{}, b(), b(), b()) },
			reads:   1,
			objects: 1,
			bases:   []int64{0, 2, 4},
		},
		{
			name: "interleaved with another partition: one read per run",
			setup: func(e *env) {
				e.commitFile(commitOpts{}, fileBatch{"t", 0, b()}, fileBatch{"t", 0, b()},
					fileBatch{"t", 1, b()}, fileBatch{"t", 0, b()})
			},
			reads:   2,
			objects: 1,
			bases:   []int64{0, 2, 4},
		},
		{
			name: "one read per object",
			setup: func(e *env) {
				e.commit("t", 0, commitOpts{}, b(), b())
				e.commit("t", 0, commitOpts{}, b())
			},
			reads:   2,
			objects: 2,
			bases:   []int64{0, 2, 4},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.coord.createTopic("t", 2)
			tc.setup(e)
			p := flat(e.h.Fetch(t.Context(), e.fetchReq(16, 0, fp{topic: "t"})))[0]
			if got := baseOffsets(t, p.RecordBatches); !slices.Equal(got, tc.bases) {
				t.Errorf("batches at %v, want %v", got, tc.bases)
			}
			if got := e.store.reads(); got != tc.reads {
				t.Errorf("%d ranges read, want %d", got, tc.reads)
			}
			if got := e.store.calls(); got != tc.objects {
				t.Errorf("%d ReadRanges calls, want %d", got, tc.objects)
			}
		})
	}
}

// TestFetchObjectSharedByPartitions: the ranges of every partition of a
// request in one object are one ReadRanges call.
func TestFetchObjectSharedByPartitions(t *testing.T) {
	e := newEnv(t, Config{})
	e.coord.createTopic("t", 3)
	b := func() []byte { return makeBatch(t, batch.CodecNone, 10, 1, 2) }
	e.commitFile(commitOpts{}, fileBatch{"t", 0, b()}, fileBatch{"t", 1, b()}, fileBatch{"t", 2, b()})
	e.commitFile(commitOpts{}, fileBatch{"t", 2, b()}, fileBatch{"t", 0, b()})
	resp := e.h.Fetch(t.Context(), e.fetchReq(16, 0, fp{topic: "t", partition: 0}, fp{topic: "t", partition: 1}, fp{topic: "t", partition: 2}))
	for i, p := range flat(resp) {
		want := [][]int64{{0, 2}, {0}, {0, 2}}[i]
		if got := baseOffsets(t, p.RecordBatches); p.ErrorCode != 0 || !slices.Equal(got, want) {
			t.Errorf("partition %d: error %d, batches %v, want %v", p.Partition, p.ErrorCode, got, want)
		}
	}
	if got := e.store.calls(); got != 2 {
		t.Errorf("%d ReadRanges calls, want 2 (one per object)", got)
	}
}

func TestFetchConcurrentReads(t *testing.T) {
	e := newEnv(t, Config{ReadConcurrency: 4})
	e.coord.createTopic("t", 8)
	var parts []fp
	for p := range int32(8) {
		for range 3 {
			e.commit("t", p, commitOpts{}, makeBatch(t, batch.CodecNone, 50, 1, 2))
		}
		parts = append(parts, fp{topic: "t", partition: p})
	}
	e.store.failKey("wal/0005", errors.New("boom")) // partition 1's second batch
	for _, p := range flat(e.h.Fetch(t.Context(), e.fetchReq(16, 0, parts...))) {
		want := []int64{0, 2, 4}
		if p.Partition == 1 {
			want = want[:1]
		}
		if got := baseOffsets(t, p.RecordBatches); p.ErrorCode != 0 || !slices.Equal(got, want) {
			t.Errorf("partition %d: error %d, batches %v, want %v", p.Partition, p.ErrorCode, got, want)
		}
	}
	if got := e.store.reads(); got != 24 {
		t.Errorf("%d reads, want 24", got)
	}
}

func TestFetchTopics(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.coord.createTopic("t", 2)
	e.commit("t", 1, commitOpts{}, makeBatch(t, batch.CodecNone, 10, 1))
	unknownID := diskless.TopicID{1, 2, 3}

	for _, v := range []int16{12, 13} {
		req := e.fetchReq(v, 0,
			fp{topic: "nope"}, fp{topic: "t", partition: 1}, fp{topic: "t", partition: 2}, fp{topic: "t", partition: -1})
		req.Topics[0].TopicID = unknownID
		resp := e.h.Fetch(t.Context(), req)
		if resp.Version != v || len(resp.Topics) != 2 {
			t.Fatalf("v%d: response version %d with %d topics", v, resp.Version, len(resp.Topics))
		}
		unknown := kerr.UnknownTopicOrPartition
		if v >= 13 {
			unknown = kerr.UnknownTopicID
			if resp.Topics[0].TopicID != unknownID || resp.Topics[1].TopicID != id {
				t.Errorf("v%d: topic ids not echoed", v)
			}
		} else if resp.Topics[0].Topic != "nope" || resp.Topics[1].Topic != "t" {
			t.Errorf("v%d: topic names not echoed", v)
		}
		ps := flat(resp)
		for i, want := range []struct {
			partition int32
			errc      *kerr.Error
		}{{0, unknown}, {1, nil}, {2, kerr.UnknownTopicOrPartition}, {-1, kerr.UnknownTopicOrPartition}} {
			p := ps[i]
			if p.Partition != want.partition || p.ErrorCode != errCode(want.errc) {
				t.Errorf("v%d entry %d: partition %d error %d, want %d %v", v, i, p.Partition, p.ErrorCode, want.partition, want.errc)
			}
			if want.errc != nil && (p.HighWatermark != -1 || p.LogStartOffset != -1 || p.RecordBatches == nil) {
				t.Errorf("v%d entry %d: offsets %d %d, records nil %v; want −1 −1, empty", v, i,
					p.HighWatermark, p.LogStartOffset, p.RecordBatches == nil)
			}
		}
		if got := baseOffsets(t, ps[1].RecordBatches); !slices.Equal(got, []int64{0}) {
			t.Errorf("v%d: batches %v", v, got)
		}
	}
}

func TestFetchLeaderEpoch(t *testing.T) {
	e := newEnv(t, Config{LeaderEpoch: 5})
	e.coord.createTopic("t", 1)
	for _, tc := range []struct {
		name    string
		version int16
		current int32
		errc    *kerr.Error
	}{
		{"not given", 16, -1, nil},
		{"current", 16, 5, nil},
		{"newer than ours", 16, 6, kerr.UnknownLeaderEpoch},
		{"older than ours", 16, 4, kerr.FencedLeaderEpoch},
		{"not checked before v9", 8, 4, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := e.fetchReq(tc.version, 0, fp{topic: "t"})
			req.Topics[0].Partitions[0].CurrentLeaderEpoch = tc.current
			if p := flat(e.h.Fetch(t.Context(), req))[0]; p.ErrorCode != errCode(tc.errc) {
				t.Errorf("error %d, want %v", p.ErrorCode, tc.errc)
			}
		})
	}
}

func TestFetchSessions(t *testing.T) {
	e := newEnv(t, Config{})
	e.coord.createTopic("t", 1)
	e.commit("t", 0, commitOpts{}, makeBatch(t, batch.CodecNone, 10, 1))
	for _, tc := range []struct {
		name          string
		id, epoch     int32
		errc          *kerr.Error
		wantPartition bool
	}{
		{name: "sessionless (librdkafka, kgo after the first answer)", id: 0, epoch: -1, wantPartition: true},
		{name: "asks for a session (kgo, Java)", id: 0, epoch: 0, wantPartition: true},
		{name: "closes a session and fetches in full", id: 42, epoch: -1, wantPartition: true},
		{name: "restarts a session with a full fetch", id: 42, epoch: 0, wantPartition: true},
		{name: "incremental fetch on a session we never made", id: 42, epoch: 3, errc: kerr.FetchSessionIDNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := e.fetchReq(11, 0, fp{topic: "t"})
			req.SessionID, req.SessionEpoch = tc.id, tc.epoch
			resp := e.h.Fetch(t.Context(), req)
			if resp.ErrorCode != errCode(tc.errc) || resp.SessionID != 0 {
				t.Errorf("error %d session %d, want %v and 0", resp.ErrorCode, resp.SessionID, tc.errc)
			}
			if got := len(flat(resp)) == 1; got != tc.wantPartition {
				t.Errorf("partition answered: %v, want %v", got, tc.wantPartition)
			}
		})
	}
}

// TestFetchVersions round-trips a response through kmsg at every version
// served and decodes it as franz-go's consumer does.
func TestFetchVersions(t *testing.T) {
	e := newEnv(t, Config{})
	e.coord.createTopic("t", 1)
	e.commit("t", 0, commitOpts{}, makeBatch(t, batch.CodecSnappy, 10, 1, 2, 3))
	e.commit("t", 0, commitOpts{}, makeBatch(t, batch.CodecNone, 10, 4))
	for v := fetchVersions.MinVersion; v <= fetchVersions.MaxVersion; v++ {
		for _, iso := range []int8{0, 1} {
			req := e.fetchReq(v, 0, fp{topic: "t", offset: 1})
			req.IsolationLevel = iso
			resp := e.h.Fetch(context.Background(), req)
			if p := flat(resp)[0]; (p.AbortedTransactions != nil) != (iso == 1) {
				t.Errorf("v%d isolation %d: aborted transactions nil = %v", v, iso, p.AbortedTransactions == nil)
			}
			wire := resp.AppendTo(nil)
			back := kmsg.NewPtrFetchResponse()
			back.Version = v
			if err := back.ReadFrom(wire); err != nil {
				t.Fatalf("v%d: decode: %v", v, err)
			}
			if len(back.Topics) != 1 || len(back.Topics[0].Partitions) != 1 {
				t.Fatalf("v%d: decoded %d topics", v, len(back.Topics))
			}
			p := &back.Topics[0].Partitions[0]
			if p.HighWatermark != 4 || (v >= 5 && p.LogStartOffset != 0) || p.LastStableOffset != 4 {
				t.Errorf("v%d: offsets %d %d %d", v, p.HighWatermark, p.LastStableOffset, p.LogStartOffset)
			}
			if v >= 13 && back.Topics[0].TopicID != resp.Topics[0].TopicID {
				t.Errorf("v%d: topic id lost", v)
			}
			if offs, _ := consume(t, p, 1); !slices.Equal(offs, []int64{1, 2, 3}) {
				t.Errorf("v%d: consumer sees %v", v, offs)
			}
		}
	}
}
