package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/batchtest"
)

var topic = [16]byte{1, 2, 3}

// run returns a run of n batches of one record each with timestamps ts,
// ts+1, …, and values of size bytes.
func run(n int, ts int64, size int) []byte {
	var out []byte
	for i := range n {
		out = append(out, batchtest.Make(batchtest.Plain(ts+int64(i)), batchtest.Record{Value: bytes.Repeat([]byte{'v'}, size)})...)
	}
	return out
}

// build writes runs into a segment at base 100 with the given interval
// and returns the object.
func build(t testing.TB, interval uint32, runs ...func(w *Writer) error) ([]byte, Trailer) {
	t.Helper()
	var data bytes.Buffer
	w := NewWriter(&data, topic, 7, 100, interval)
	for _, r := range runs {
		if err := r(w); err != nil {
			t.Fatal(err)
		}
	}
	tail, tr := w.Finish()
	return append(data.Bytes(), tail...), tr
}

// add adds run p, committed at appendTime with tsType, at the writer's
// next offset.
func add(p []byte, appendTime, _ int64, tsType int8) func(w *Writer) error {
	return func(w *Writer) error { return w.Add(p, w.NextOffset(), appendTime, tsType) }
}

// TestWriterCutsEntries: entries every interval bytes, and where the
// timestamp type or, on LogAppendTime, the append time changes; they tile
// the data, and the object decodes to what was written.
func TestWriterCutsEntries(t *testing.T) {
	one := len(run(1, 0, 100))
	obj, tr := build(t, uint32(2*one),
		add(run(5, 10, 100), 1000, 0, batch.TimestampCreateTime), // entries of 2, 2, then 1 …
		add(run(2, 20, 100), 2000, 0, batch.TimestampCreateTime), // … taking one more, then 1 (another append time: CreateTime does not cut)
		add(run(1, 30, 100), 3000, 0, batch.TimestampLogAppendTime),
		add(run(1, 31, 100), 3000, 0, batch.TimestampLogAppendTime), // the same append time: the same entry
		add(run(1, 32, 100), 4000, 0, batch.TimestampLogAppendTime), // another append time: a new entry
		add(run(1, 40, 100), 5000, 0, batch.TimestampCreateTime),
	)
	if tr.IndexEntries != 7 || tr.BaseOffset != 100 || tr.DataSize != int64(11*one) || int64(len(obj)) != tr.ObjectSize() {
		t.Fatalf("trailer %+v for %d bytes", tr, len(obj))
	}
	got, es, err := DecodeIndex(obj[tr.DataSize:], tr.DataSize, int64(len(obj)))
	if err != nil || got != tr {
		t.Fatalf("DecodeIndex: %+v, %v", got, err)
	}
	type want struct {
		first, last int64
		batches     int
		maxTs       int64
		appendTime  int64
		tsType      int8
	}
	wants := []want{
		{100, 101, 2, 11, 1000, 0},
		{102, 103, 2, 13, 1000, 0},
		{104, 105, 2, 20, 2000, 0},
		{106, 106, 1, 21, 2000, 0},
		{107, 108, 2, 31, 3000, 1},
		{109, 109, 1, 32, 4000, 1},
		{110, 110, 1, 40, 5000, 0},
	}
	for i, e := range es {
		w := wants[i]
		first := tr.BaseOffset + int64(e.OffsetDelta)
		if first != w.first || first+int64(e.LastOffsetDelta) != w.last || int(e.Size) != w.batches*one ||
			e.MaxTimestamp != w.maxTs || e.AppendTime != w.appendTime || e.TimestampType != w.tsType {
			t.Errorf("entry %d: %+v, want %+v", i, e, w)
		}
		// The entry's bytes are its batches, as written.
		n := 0
		if err := batch.Walk(obj[e.Position:e.Position+e.Size], func(batch.Header) error { n++; return nil }); err != nil || n != w.batches {
			t.Errorf("entry %d: %d batches (%v)", i, n, err)
		}
	}
	for o, want := range map[int64]int{100: 0, 101: 0, 102: 1, 106: 3, 110: 6, 111: 7, 99: 7} {
		if got := Find(es, tr.BaseOffset, o); got != want {
			t.Errorf("Find(%d) = %d, want %d", o, got, want)
		}
	}
}

// TestWriterRefuses: a run that does not continue the segment, a bad batch
// or timestamp type is refused whole, nothing of it written.
func TestWriterRefuses(t *testing.T) {
	var data bytes.Buffer
	w := NewWriter(&data, topic, 0, 5, 0)
	good := run(2, 0, 10)
	bad := slices.Clone(good)
	bad[len(good)/2+16] = 1 // the second batch's magic
	for _, tc := range []struct {
		name string
		p    []byte
		base int64
		ts   int8
	}{
		{"not at the next offset", good, 6, 0},
		{"a bad second batch", bad, 5, 0},
		{"a cut batch", good[:len(good)-1], 5, 0},
		{"a timestamp type", good, 5, 3},
		{"nothing", nil, 5, 0},
	} {
		if err := w.Add(tc.p, tc.base, 0, tc.ts); !errors.Is(err, ErrBatch) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if data.Len() != 0 || w.DataSize() != 0 || w.NextOffset() != 5 {
		t.Fatalf("refused runs wrote %d bytes", data.Len())
	}
}

// TestDecodeIndexCorruption is the corruption table of the index and
// trailer.
func TestDecodeIndexCorruption(t *testing.T) {
	obj, tr := build(t, 0, add(run(3, 0, 50), 1, 0, batch.TimestampCreateTime), add(run(2, 9, 50), 2, 0, batch.TimestampLogAppendTime))
	ds := tr.DataSize
	tail := obj[ds:]
	// resign recomputes the index and trailer CRCs of a damaged tail, so
	// that the check behind them is reached.
	resign := func(b []byte) []byte {
		idx := b[:len(b)-TrailerSize]
		tr := b[len(b)-TrailerSize:]
		binary.BigEndian.PutUint32(tr[44:], crc32.Checksum(idx, castagnoli))
		binary.BigEndian.PutUint32(tr[60:], crc32.Checksum(tr[:60], castagnoli))
		return b
	}
	for _, tc := range []struct {
		name string
		tail func([]byte) []byte
		ds   int64
		size int64
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }, ds, int64(len(obj))},
		{"nothing", func(b []byte) []byte { return nil }, ds, ds},
		{"trailer CRC", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, ds, int64(len(obj))},
		{"magic", func(b []byte) []byte { b[len(b)-12] = 'X'; return resign(b) }, ds, int64(len(obj))},
		{"version", func(b []byte) []byte { b[len(b)-13] = 9; return resign(b) }, ds, int64(len(obj))},
		{"index CRC", func(b []byte) []byte { b[3] ^= 1; return b }, ds, int64(len(obj))},
		{"an entry's position", func(b []byte) []byte { b[EntrySize+11]++; return resign(b) }, ds, int64(len(obj))},
		{"an entry's offsets", func(b []byte) []byte { b[EntrySize+3]++; return resign(b) }, ds, int64(len(obj))},
		{"an entry's size", func(b []byte) []byte { b[15]--; return resign(b) }, ds, int64(len(obj))},
		{"a timestamp type", func(b []byte) []byte { b[32] = 5; return resign(b) }, ds, int64(len(obj))},
		{"another object size", func(b []byte) []byte { return b }, ds, int64(len(obj)) + 1},
		{"another data size", func(b []byte) []byte { return b }, ds - 1, int64(len(obj))},
	} {
		b := tc.tail(slices.Clone(tail))
		if _, _, err := DecodeIndex(b, tc.ds, tc.size); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if _, _, err := DecodeIndex(slices.Clone(tail), ds, int64(len(obj))); err != nil {
		t.Fatalf("undamaged: %v", err)
	}
	if n := IndexEntries(int64(len(obj)), ds); n != tr.IndexEntries {
		t.Fatalf("IndexEntries = %d, want %d", n, tr.IndexEntries)
	}
}

// FuzzDecodeIndex: whatever the bytes, DecodeIndex does not panic, and an
// index it accepts tiles the data it was told of.
func FuzzDecodeIndex(f *testing.F) {
	obj, tr := build(f, 0, add(run(3, 0, 50), 1, 0, batch.TimestampCreateTime))
	f.Add(obj[tr.DataSize:], tr.DataSize)
	f.Add(obj[tr.DataSize+1:], tr.DataSize+1)
	f.Fuzz(func(t *testing.T, b []byte, ds int64) {
		_, es, err := DecodeIndex(b, ds, ds+int64(len(b)))
		if err != nil {
			return
		}
		end := uint32(0)
		for _, e := range es {
			if e.Position != end {
				t.Fatalf("entries do not tile: %+v", es)
			}
			end += e.Size
		}
		if int64(end) != ds {
			t.Fatalf("entries end at %d, data at %d", end, ds)
		}
	})
}

// TestCheck: a whole segment object passes Check, and Is tells it from a
// WAL object; a flipped byte anywhere fails it.
func TestCheck(t *testing.T) {
	obj, tr := build(t, 0, add(run(4, 0, 30), 1, 0, batch.TimestampCreateTime))
	if err := Check("s", obj); err != nil || !Is(obj) {
		t.Fatalf("Check: %v, Is %v", err, Is(obj))
	}
	if wal := run(3, 0, 30); Is(wal) {
		t.Fatal("a WAL object taken for a segment")
	}
	for _, at := range []int64{0, 30, tr.DataSize - 1, tr.DataSize + 5, int64(len(obj)) - 1} {
		bad := slices.Clone(obj)
		bad[at] ^= 1
		if err := Check("s", bad); err == nil {
			t.Errorf("byte %d flipped: passed", at)
		}
	}
}

// TestSizeWithBounds: SizeWith is never below the object's size after the
// run is added, whatever the runs' sizes, timestamp types and append
// times, so that a segment rolled by it never passes segment.bytes.
func TestSizeWithBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, interval := range []uint32{1, 100, 1000, 64 << 10} {
		var data bytes.Buffer
		w := NewWriter(&data, topic, 0, 0, interval)
		for i := range 300 {
			p := run(1+rng.IntN(6), int64(i), rng.IntN(500))
			tsType, appendTime := batch.TimestampCreateTime, int64(rng.IntN(3))
			if rng.IntN(3) == 0 {
				tsType = batch.TimestampLogAppendTime
			}
			bound := w.SizeWith(int64(len(p)))
			if err := w.Add(p, w.NextOffset(), appendTime, tsType); err != nil {
				t.Fatal(err)
			}
			tail, _ := w.Finish()
			if got := int64(data.Len() + len(tail)); got > bound {
				t.Fatalf("interval %d, run %d of %d bytes: object of %d bytes, SizeWith said at most %d", interval, i, len(p), got, bound)
			}
		}
	}
}
