package fetch

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// FuzzRun feeds the run walk, its check and the header rewrite arbitrary
// bytes against a coordinate: none may panic; a run that passes its check
// walks into batches that tile it with dense offsets, and each comes out
// of stampBatch with its assigned base offset and (on LogAppendTime) a
// valid CRC.
func FuzzRun(f *testing.F) {
	a := makeBatch(f, batch.CodecNone, 5, 10, 20, 30)
	b := makeBatch(f, batch.CodecGzip, 5, 40)
	good := append(append([]byte{}, a...), b...)
	f.Add(good, int32(len(good)), int64(3), int64(40), false)
	f.Add(good, int32(len(good)), int64(3), int64(40), true)
	f.Add(good[:70], int32(len(good)), int64(3), int64(40), false)
	f.Add(append(good, 1, 2, 3), int32(len(good)+3), int64(3), int64(40), true)
	f.Fuzz(func(t *testing.T, p []byte, size int32, lastDelta, maxTs int64, lat bool) {
		p = bytes.Clone(p) // stampBatch rewrites in place
		r := diskless.RunCoordinate{ByteSize: size, BaseOffset: 1000, LastOffset: 1000 + lastDelta, BatchMaxTimestamp: maxTs}
		if lat {
			r.TimestampType, r.LogAppendTime = batch.TimestampLogAppendTime, 77
		}
		bs, werr := walkRun(nil, p, &r, false)
		n, verr := verifyRun(p, &r)
		if verr != nil {
			return
		}
		if werr != nil || n != len(bs) || n == 0 {
			t.Fatalf("verified %d batches, walked %d (%v)", n, len(bs), werr)
		}
		next, pos := r.BaseOffset, 0
		for _, rb := range bs {
			if rb.pos != pos || rb.base != next {
				t.Fatalf("batch at %d (offset %d), want %d (%d)", rb.pos, rb.base, pos, next)
			}
			if errc := stampBatch(p, &r, rb, 9, true); errc != nil {
				t.Fatalf("verified batch refused: %v", errc)
			}
			h := batch.Header(p[rb.pos : rb.pos+rb.size])
			if h.BaseOffset() != rb.base || h.PartitionLeaderEpoch() != 9 {
				t.Fatalf("stamped base %d epoch %d", h.BaseOffset(), h.PartitionLeaderEpoch())
			}
			if lat && (h.ComputeCRC() != h.CRC() || h.MaxTimestamp() != 77 || h.Attributes()&batch.AttrLogAppendTime == 0) {
				t.Fatal("LogAppendTime batch not re-signed")
			}
			pos, next = pos+rb.size, rb.last+1
		}
		if pos != len(p) || next != r.LastOffset+1 {
			t.Fatalf("batches end at byte %d offset %d, the run at %d, %d", pos, next, len(p), r.LastOffset+1)
		}
	})
}

// TestVerifyRun is the corruption table of a run's check: how many leading
// batches pass, for a run of three batches (offsets [0,2] [3] [4,5]) and
// each way its bytes or its coordinate can disagree.
func TestVerifyRun(t *testing.T) {
	b1 := makeBatch(t, batch.CodecNone, 5, 10, 20, 30)
	b2 := makeBatch(t, batch.CodecLZ4, 5, 40)
	b3 := makeBatch(t, batch.CodecNone, 5, 50, 35)
	good := slices.Concat(b1, b2, b3)
	coord := func() diskless.RunCoordinate {
		return diskless.RunCoordinate{ByteSize: int32(len(good)), BaseOffset: 100, LastOffset: 105, BatchMaxTimestamp: 50}
	}
	at := func(i int) int { return []int{0, len(b1), len(b1) + len(b2)}[i] }
	for _, tc := range []struct {
		name string
		edit func(p []byte, r *diskless.RunCoordinate) []byte
		want int  // batches that pass
		ok   bool // the run passes
	}{
		{"good", func(p []byte, _ *diskless.RunCoordinate) []byte { return p }, 3, true},
		{"CRC of the second", func(p []byte, _ *diskless.RunCoordinate) []byte { p[at(1)+70] ^= 1; return p }, 1, false},
		{"stored base offset of the third", func(p []byte, _ *diskless.RunCoordinate) []byte { p[at(2)+7] = 1; return p }, 2, false},
		{"magic of the first", func(p []byte, _ *diskless.RunCoordinate) []byte { p[16] = 1; return p }, 0, false},
		{"length of the second past the end", func(p []byte, _ *diskless.RunCoordinate) []byte {
			p[at(1)+8] = 0x7f
			return p
		}, 1, false},
		{"truncated", func(p []byte, r *diskless.RunCoordinate) []byte { return p[:len(p)-1] }, 0, false},
		{"bytes after the last batch", func(p []byte, r *diskless.RunCoordinate) []byte {
			r.ByteSize += 4
			return append(p, 0, 0, 0, 0)
		}, 3, false},
		{"more offsets than the batches", func(p []byte, r *diskless.RunCoordinate) []byte { r.LastOffset++; return p }, 0, false},
		{"fewer offsets than the batches", func(p []byte, r *diskless.RunCoordinate) []byte { r.LastOffset--; return p }, 2, false},
		{"another max timestamp", func(p []byte, r *diskless.RunCoordinate) []byte { r.BatchMaxTimestamp = 60; return p }, 0, false},
		{"a smaller max timestamp", func(p []byte, r *diskless.RunCoordinate) []byte { r.BatchMaxTimestamp = 40; return p }, 2, false},
		{"a coordinate too small", func(p []byte, r *diskless.RunCoordinate) []byte { r.ByteSize = 12; return p }, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := coord()
			p := tc.edit(slices.Clone(good), &r)
			n, err := verifyRun(p, &r)
			if n != tc.want || (err == nil) != tc.ok {
				t.Fatalf("verifyRun = %d, %v; want %d passing", n, err, tc.want)
			}
			if err != nil && !errors.Is(err, errRunCheck) {
				t.Fatalf("error %v does not wrap errRunCheck", err)
			}
		})
	}
}

func TestBudgetTake(t *testing.T) {
	rs := func(sizes ...int32) []diskless.RunCoordinate {
		out := make([]diskless.RunCoordinate, len(sizes))
		for i, s := range sizes {
			out[i].ByteSize = s
		}
		return out
	}
	b := newBudget(1000)
	for i, step := range []struct {
		runs         []diskless.RunCoordinate
		partitionMax int32
		n            int
		tail         int32
		size         int64
		remaining    int64
	}{
		{rs(), 100, 0, 0, 0, 1000},                 // empty partition: the exemption stays
		{rs(300, 100), 100, 1, 300, 300, 900},      // the first run whole, to serve 100 of it: charged the limit
		{rs(70, 100, 100), 150, 2, 80, 150, 750},   // the first run whole, then 80 more: the second only in part
		{rs(200), 50, 0, 0, 0, 750},                // a limit below a batch header: nothing
		{rs(12, 100), 1000, 0, 0, 0, 750},          // a coordinate too small stops the take
		{rs(100, 12, 100), 1000, 1, 100, 100, 650}, // … after the first
		{rs(1000), 588, 1, 1000, 1000, 62},         // charged the limit
		{rs(100), 1000, 1, 100, 100, 0},            // a header's worth left: the run, charged what was left
		{rs(10), -5, 0, 0, 0, 0},                   // negative limits are 0
	} {
		n, tail, size := b.take(step.runs, step.partitionMax, 0)
		if n != step.n || tail != step.tail || size != step.size || b.remaining != step.remaining {
			t.Errorf("step %d: took %d (last %d bytes, %d in all), %d left; want %d (%d, %d), %d",
				i, n, tail, size, b.remaining, step.n, step.tail, step.size, step.remaining)
		}
	}
	// The first run of the response is taken whatever the limits.
	b = newBudget(0)
	if n, _, size := b.take(rs(5000), 0, 0); n != 1 || size != 5000 {
		t.Errorf("first run of the response: %d, %d bytes", n, size)
	}
	// From offset 8 of a first run of offsets [0,9], an estimated fifth of
	// its bytes are served: 300 more of the runs after it are read.
	b = newBudget(1000)
	first := rs(1000, 200, 200)
	first[0].LastOffset = 9
	if n, tail, size := b.take(first, 500, 8); n != 3 || tail != 100 || size != 1300 || b.remaining != 500 {
		t.Errorf("from inside the first run: %d runs, last %d bytes, %d in all, %d left; want 3, 100, 1300, 500", n, tail, size, b.remaining)
	}
}

func TestBudgetTakeBatches(t *testing.T) {
	bs := func(sizes ...int) []runBatch {
		out := make([]runBatch, len(sizes))
		for i, s := range sizes {
			out[i].size = s
		}
		return out
	}
	b := newBudget(250)
	for i, step := range []struct {
		batches      []runBatch
		partitionMax int32
		n            int
		size         int64
		remaining    int64
	}{
		{bs(), 100, 0, 0, 250},         // empty partition: the exemption stays
		{bs(300, 100), 100, 1, 300, 0}, // first batch of the response, over both limits
		{bs(100), 100, 0, 0, 0},        // nothing left
		{bs(10), -5, 0, 0, 0},          // negative limits are 0
	} {
		n, size := b.takeBatches(step.batches, step.partitionMax)
		if n != step.n || size != step.size || b.remaining != step.remaining {
			t.Errorf("step %d: took %d (%d bytes), %d left; want %d (%d), %d",
				i, n, size, b.remaining, step.n, step.size, step.remaining)
		}
	}
}

func TestAppendSpans(t *testing.T) {
	c := func(key string, off int64, size int32) diskless.RunCoordinate {
		return diskless.RunCoordinate{ObjectKey: key, ByteOffset: off, ByteSize: size}
	}
	bs := []diskless.RunCoordinate{
		c("a", 0, 100), c("a", 100, 50), // one run
		c("a", 200, 10), // gap
		c("b", 210, 10), // other object
		c("a", 220, 5),  // back to a, not adjacent to b's end in a
	}
	buf := make([]byte, 175)
	spans := appendSpans(nil, 3, bs, 5, buf)
	if len(spans) != countSpans(bs) {
		t.Fatalf("%d spans, countSpans says %d", len(spans), countSpans(bs))
	}
	want := []struct {
		key           string
		off           int64
		pos, n, batch int
	}{{"a", 0, 0, 150, 0}, {"a", 200, 150, 10, 2}, {"b", 210, 160, 10, 3}, {"a", 220, 170, 5, 4}}
	if len(spans) != len(want) {
		t.Fatalf("%d spans, want %d", len(spans), len(want))
	}
	for i, w := range want {
		s := spans[i]
		if s.key != w.key || s.off != w.off || len(s.dst) != w.n || &s.dst[0] != &buf[w.pos] || s.run != w.batch || s.part != 3 {
			t.Errorf("span %d: %s@%d len %d batch %d part %d; want %s@%d len %d at %d batch %d",
				i, s.key, s.off, len(s.dst), s.run, s.part, w.key, w.off, w.n, w.pos, w.batch)
		}
	}
}
