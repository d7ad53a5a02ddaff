package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// fakeCoord is an in-process coordinator over an in-memory run index,
// with the FindBatches and ListOffsets semantics of SPEC §9: it answers as
// the real coordinator does (TestFakeCoordConformance), and lets tests do
// what the real one would refuse — corrupt a coordinate (mutate), place a
// log start anywhere, act between two calls of one request (onFind), not
// signal commits (deaf).
type fakeCoord struct {
	// onFind, if set, runs at the start of every FindBatches and
	// ListOffsetsFrom call (not ListOffsets: a lookup's first call): the
	// test's way to change the index between calls of one request.
	onFind func()
	// shards is the number of coordinator shards: partition p is on
	// shard p % shards (0: one shard).
	shards int32

	mu struct {
		sync.Mutex
		byName map[string]*fakeTopic
		byID   map[diskless.TopicID]*fakeTopic
		watch  chan struct{} // closed and replaced at each commit
		// deaf makes Watch return a channel that never closes, as if
		// commits were not signalled.
		deaf bool
	}
}

type fakeTopic struct {
	topic diskless.Topic
	parts []*fakePart
}

type fakePart struct {
	logStart, hwm int64
	runs          []diskless.RunCoordinate // offset order, dense
}

var _ Coordinator = (*fakeCoord)(nil)

func newFakeCoord() *fakeCoord {
	c := &fakeCoord{}
	c.mu.byName = map[string]*fakeTopic{}
	c.mu.byID = map[diskless.TopicID]*fakeTopic{}
	c.mu.watch = make(chan struct{})
	return c
}

func (c *fakeCoord) createTopic(name string, partitions int32) diskless.TopicID {
	c.mu.Lock()
	defer c.mu.Unlock()
	var id diskless.TopicID
	copy(id[:], fmt.Sprintf("%-16s", name))
	t := &fakeTopic{topic: diskless.Topic{ID: id, Name: name, Partitions: partitions}}
	for range partitions {
		t.parts = append(t.parts, &fakePart{})
	}
	c.mu.byName[name] = t
	c.mu.byID[id] = t
	return id
}

func (c *fakeCoord) part(tp diskless.TopicPartition) *fakePart {
	t, ok := c.mu.byID[tp.TopicID]
	if !ok || tp.Partition < 0 || tp.Partition >= int32(len(t.parts)) {
		return nil
	}
	return t.parts[tp.Partition]
}

// add appends already located batches to a partition and wakes watchers.
// A batch that continues the last run — the same object, commit and
// timestamp type, starting where the run ends, within MaxInt32 offsets of
// its start — extends it, as the real coordinator indexes runs.
func (c *fakeCoord) add(topic string, partition int32, bs ...diskless.RunCoordinate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.mu.byName[topic].parts[partition]
	for _, b := range bs {
		if n := len(p.runs); n > 0 {
			r := &p.runs[n-1]
			if r.ObjectKey == b.ObjectKey && r.LogAppendTime == b.LogAppendTime && r.TimestampType == b.TimestampType &&
				r.ByteOffset+int64(r.ByteSize) == b.ByteOffset && b.LastOffset-r.BaseOffset <= math.MaxInt32 {
				r.ByteSize += b.ByteSize
				r.LastOffset = b.LastOffset
				r.BatchMaxTimestamp = max(r.BatchMaxTimestamp, b.BatchMaxTimestamp)
				continue
			}
		}
		p.runs = append(p.runs, b)
	}
	p.hwm = bs[len(bs)-1].LastOffset + 1
	close(c.mu.watch)
	c.mu.watch = make(chan struct{})
}

// setLogStart moves a partition's log start offset, dropping runs that
// end below it.
func (c *fakeCoord) setLogStart(topic string, partition int32, off int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.mu.byName[topic].parts[partition]
	p.logStart = off
	p.runs = slices.DeleteFunc(p.runs, func(b diskless.RunCoordinate) bool { return b.LastOffset < off })
}

func (c *fakeCoord) Topic(name string) (diskless.Topic, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.mu.byName[name]
	if !ok {
		return diskless.Topic{}, false
	}
	return t.topic, true
}

func (c *fakeCoord) TopicByID(id diskless.TopicID) (diskless.Topic, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.mu.byID[id]
	if !ok {
		return diskless.Topic{}, false
	}
	return t.topic, true
}

func (c *fakeCoord) Watch() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.deaf {
		return make(chan struct{})
	}
	return c.mu.watch
}

func (c *fakeCoord) FindBatches(_ context.Context, reqs []diskless.FindBatchesRequest) []diskless.FindBatchesResult {
	if c.onFind != nil {
		c.onFind()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]diskless.FindBatchesResult, len(reqs))
	for i, r := range reqs {
		p := c.part(diskless.TopicPartition{TopicID: r.TopicID, Partition: r.Partition})
		if p == nil {
			out[i] = diskless.FindBatchesResult{Err: kerr.UnknownTopicOrPartition, LogStartOffset: -1, HighWatermark: -1, LastStableOffset: -1}
			continue
		}
		res := &out[i]
		res.LogStartOffset, res.HighWatermark, res.LastStableOffset = p.logStart, p.hwm, p.hwm
		if r.Offset < p.logStart || r.Offset > p.hwm {
			res.Err = kerr.OffsetOutOfRange
			continue
		}
		first := sort.Search(len(p.runs), func(j int) bool { return p.runs[j].LastOffset >= r.Offset })
		end, after := min(first+1, len(p.runs)), int64(0)
		if first < len(p.runs) {
			f := &p.runs[first]
			after = diskless.ServedEstimate(f.BaseOffset, f.LastOffset, f.ByteSize, r.Offset)
		}
		for end < len(p.runs) && after < int64(r.MaxBytes) {
			after += int64(p.runs[end].ByteSize)
			end++
		}
		// A subslice of the index, as a real coordinator may hand out
		// immutable state: the caller must not write to it.
		res.Runs = p.runs[first:end:end]
		if end < len(p.runs) {
			res.Next = p.runs[end]
		}
	}
	return out
}

func (c *fakeCoord) ShardFor(_ diskless.TopicID, partition int32) int32 {
	return partition % max(c.shards, 1)
}

func (c *fakeCoord) ListOffsets(_ context.Context, tp diskless.TopicPartition, ts int64) diskless.ListOffsetsResult {
	return c.listOffsets(tp, ts, math.MinInt64)
}

func (c *fakeCoord) ListOffsetsFrom(_ context.Context, tp diskless.TopicPartition, ts, from int64) diskless.ListOffsetsResult {
	if c.onFind != nil {
		c.onFind()
	}
	return c.listOffsets(tp, ts, from)
}

// listOffsets answers ListOffsets over the runs holding an offset ≥
// from, by linear scan.
func (c *fakeCoord) listOffsets(tp diskless.TopicPartition, ts, from int64) diskless.ListOffsetsResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.part(tp)
	if p == nil {
		return diskless.ListOffsetsResult{Err: kerr.UnknownTopicOrPartition, LogStartOffset: -1, HighWatermark: -1, LastStableOffset: -1, Offset: -1, Timestamp: -1}
	}
	res := diskless.ListOffsetsResult{LogStartOffset: p.logStart, HighWatermark: p.hwm, LastStableOffset: p.hwm, Offset: -1, Timestamp: -1}
	switch {
	case ts == diskless.ListOffsetsEarliest:
		res.Offset = p.logStart
	case ts == diskless.ListOffsetsLatest:
		res.Offset = p.hwm
	case ts == diskless.ListOffsetsMaxTimestamp:
		for i := range p.runs {
			b := &p.runs[i]
			if b.LastOffset >= from && (res.Candidate == nil || b.MaxTimestamp() > res.Candidate.MaxTimestamp()) {
				res.Candidate = b
			}
		}
	case ts >= 0:
		for i := range p.runs {
			if b := &p.runs[i]; b.LastOffset >= from && b.MaxTimestamp() >= ts {
				res.Candidate = b
				break
			}
		}
	default:
		res.Err = kerr.UnsupportedVersion
	}
	if res.Candidate != nil {
		cand := *res.Candidate
		res.Candidate = &cand
	}
	return res
}

// fakeStore is an in-memory ObjectReader that counts reads and fails the
// keys it is told to.
type fakeStore struct {
	mu struct {
		sync.Mutex
		objects map[string][]byte
		fail    map[string]error
		reads   int // ranges read
		calls   int // ReadRanges calls
	}
}

var _ ObjectReader = (*fakeStore)(nil)

// errNoObject stands for objstore.ErrNotExist.
var errNoObject = errors.New("fake store: object does not exist")

func newFakeStore() *fakeStore {
	s := &fakeStore{}
	s.mu.objects = map[string][]byte{}
	s.mu.fail = map[string]error{}
	return s
}

func (s *fakeStore) put(key string, b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.objects[key] = b
}

func (s *fakeStore) failKey(key string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.fail[key] = err
}

// reads returns how many ranges were read.
func (s *fakeStore) reads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.reads
}

// calls returns how many ReadRanges calls were made.
func (s *fakeStore) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.calls
}

// ReadRanges implements ObjectReader, range by range, each counted, as
// the cache's contract says: every range is checked, and one that fails
// is read (copied) again once and checked again.
func (s *fakeStore) ReadRanges(ctx context.Context, obj cache.Object, rs []cache.Range, check cache.Checker) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.calls++
	key := obj.Key
	var corrupt error
	for i := range rs {
		r := &rs[i]
		r.Err = nil
		if len(r.P) == 0 {
			continue
		}
		for attempt := range 2 {
			s.mu.reads++
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := s.mu.fail[key]; err != nil {
				return err
			}
			o, ok := s.mu.objects[key]
			if !ok {
				return fmt.Errorf("%s: %w", key, errNoObject)
			}
			if r.Off < 0 || r.Off+int64(len(r.P)) > int64(len(o)) {
				return fmt.Errorf("fake store: [%d, %d) outside the %d bytes of %s: %w", r.Off, r.Off+int64(len(r.P)), len(o), key, io.ErrUnexpectedEOF)
			}
			copy(r.P, o[r.Off:])
			if check == nil {
				break
			}
			err := check.Check(i, r.P)
			if err == nil {
				break
			}
			if attempt == 1 {
				r.Err = fmt.Errorf("%w: %w", cache.ErrCorrupt, err)
				if corrupt == nil {
					corrupt = r.Err
				}
			}
		}
	}
	return corrupt
}

// ReadAhead implements ObjectReader: the fake store has nothing to read
// ahead into.
func (s *fakeStore) ReadAhead(cache.Object) {}

// env is one handler over a fake coordinator and store.
type env struct {
	tb    testing.TB
	coord *fakeCoord
	store *fakeStore
	h     *Handler
	files int
}

func newEnv(tb testing.TB, cfg Config) *env {
	tb.Helper()
	e := &env{tb: tb, coord: newFakeCoord(), store: newFakeStore()}
	e.h = e.newHandler(cfg, e.store)
	return e
}

func (e *env) newHandler(cfg Config, r ObjectReader) *Handler {
	e.tb.Helper()
	if cfg.Logger == nil {
		cfg.Logger = discardLogger
	}
	h, err := New(cfg, e.coord, r)
	if err != nil {
		e.tb.Fatal(err)
	}
	return h
}

// fileBatch is one batch of a file to commit.
type fileBatch struct {
	topic     string
	partition int32
	bytes     []byte
}

// commitOpts are how a file's batches are committed.
type commitOpts struct {
	logAppendTime int64 // ≠ 0: the topic is LogAppendTime, with this time
}

// commitFile writes one WAL object holding bs back to back (SPEC §7) and
// commits it: offsets assigned per partition from the high watermark.
func (e *env) commitFile(o commitOpts, bs ...fileBatch) []diskless.RunCoordinate {
	e.tb.Helper()
	e.files++
	key := fmt.Sprintf("wal/%04d", e.files)
	var obj []byte
	var coords []diskless.RunCoordinate
	for _, fb := range bs {
		h, n, err := batch.Parse(fb.bytes)
		if err != nil || n != len(fb.bytes) {
			e.tb.Fatalf("commitFile: not one batch: %v", err)
		}
		c := diskless.RunCoordinate{
			ObjectKey:         key,
			ObjectFormat:      diskless.ObjectFormatWriteAheadMultiSegment,
			ByteOffset:        int64(len(obj)),
			ByteSize:          int32(n),
			BatchMaxTimestamp: h.MaxTimestamp(),
			TimestampType:     batch.TimestampCreateTime,
		}
		if o.logAppendTime != 0 {
			c.TimestampType = batch.TimestampLogAppendTime
			c.LogAppendTime = o.logAppendTime
		}
		obj = append(obj, fb.bytes...)
		coords = append(coords, c)
	}
	e.store.put(key, obj)
	for i, fb := range bs {
		c := &coords[i]
		c.FileSize = int64(len(obj))
		e.coord.mu.Lock()
		p := e.coord.mu.byName[fb.topic].parts[fb.partition]
		e.coord.mu.Unlock()
		c.BaseOffset = p.hwm
		c.LastOffset = p.hwm + int64(batch.Header(fb.bytes).LastOffsetDelta())
		e.coord.add(fb.topic, fb.partition, *c)
	}
	return coords
}

// commit commits one file with batches for one partition.
func (e *env) commit(topic string, partition int32, o commitOpts, batches ...[]byte) []diskless.RunCoordinate {
	e.tb.Helper()
	fbs := make([]fileBatch, len(batches))
	for i, b := range batches {
		fbs[i] = fileBatch{topic, partition, b}
	}
	return e.commitFile(o, fbs...)
}

// makeBatch builds a real record batch as a producer sends it: base offset
// 0, one record per timestamp in tss (ms), values of valueSize bytes,
// compressed with codec (batch.Codec*), CRC-32C set.
func makeBatch(tb testing.TB, codec int8, valueSize int, tss ...int64) []byte {
	tb.Helper()
	return wrapBatch(codec, compress(tb, codec, recordsOf(valueSize, tss...)), tss...)
}

// recordsOf returns an uncompressed records section: one record per
// timestamp in tss (ms, the first is the base), with key "k<i>" and a value
// of valueSize bytes.
func recordsOf(valueSize int, tss ...int64) []byte {
	var raw []byte
	for i, ts := range tss {
		r := kmsg.Record{
			TimestampDelta64: ts - tss[0],
			OffsetDelta:      int32(i),
			Key:              fmt.Appendf(nil, "k%d", i),
			Value:            bytes.Repeat([]byte{byte('a' + i%26)}, valueSize),
		}
		body := r.AppendTo(nil)
		r.Length = int32(len(body) - 1) // Length 0 took one varint byte
		raw = r.AppendTo(raw)
	}
	return raw
}

// compress compresses a records section with codec as franz-go's
// producer does for a single batch (snappy: one raw block).
func compress(tb testing.TB, codec int8, raw []byte) []byte {
	tb.Helper()
	if codec == batch.CodecNone {
		return raw
	}
	comp, err := kgo.DefaultCompressor(map[int8]kgo.CompressionCodec{
		batch.CodecGzip:   kgo.GzipCompression(),
		batch.CodecSnappy: kgo.SnappyCompression(),
		batch.CodecLZ4:    kgo.Lz4Compression(),
		batch.CodecZstd:   kgo.ZstdCompression(),
	}[codec])
	if err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	out, got := comp.Compress(&buf, raw)
	if int8(got) != codec {
		tb.Fatalf("compressed with codec %d, want %d", got, codec)
	}
	return slices.Clone(out)
}

// wrapBatch frames records, a records section compressed with codec, as a
// v2 batch of len(tss) records with timestamps tss, CRC-32C set.
func wrapBatch(codec int8, records []byte, tss ...int64) []byte {
	maxTS := int64(-1)
	for _, ts := range tss {
		maxTS = max(maxTS, ts)
	}
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           int16(codec),
		LastOffsetDelta:      int32(len(tss) - 1),
		FirstTimestamp:       tss[0],
		MaxTimestamp:         maxTS,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(tss)),
		Records:              records,
	}
	b := rb.AppendTo(nil)
	rb.Length = int32(len(b) - 12)
	b = rb.AppendTo(b[:0])
	batch.Header(b).UpdateCRC()
	return b
}

// tsRange returns n timestamps from ts on, step ms apart.
func tsRange(ts int64, n int, step int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = ts + int64(i)*step
	}
	return out
}
