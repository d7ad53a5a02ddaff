package fetch

import (
	"bytes"
	"testing"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// FuzzStamp feeds stamp arbitrary bytes against a coordinate: it must never
// panic, and a batch it accepts must come out with the rewritten header and
// (on LogAppendTime) a valid CRC.
func FuzzStamp(f *testing.F) {
	good := makeBatch(f, batch.CodecNone, 5, 10, 20, 30)
	f.Add(good, int32(len(good)), int64(2), false)
	f.Add(good, int32(len(good)), int64(2), true)
	f.Add(good[:40], int32(len(good)), int64(2), false)
	f.Add(append(good, 1, 2, 3), int32(len(good)+3), int64(2), true)
	f.Fuzz(func(t *testing.T, b []byte, size int32, lastDelta int64, lat bool) {
		b = bytes.Clone(b) // stamp rewrites in place
		c := diskless.BatchCoordinate{ByteSize: size, BaseOffset: 1000, LastOffset: 1000 + lastDelta}
		if lat {
			c.TimestampType, c.LogAppendTime = batch.TimestampLogAppendTime, 77
		}
		n, used, errc := stamp(b, []diskless.BatchCoordinate{c}, 9, false)
		if n == 0 {
			if errc == nil || used != 0 {
				t.Fatalf("refused with %v, %d bytes used", errc, used)
			}
			return
		}
		h, l, err := batch.Parse(b[:used])
		if err != nil || l != int(size) || h.BaseOffset() != 1000 || h.PartitionLeaderEpoch() != 9 {
			t.Fatalf("accepted batch: %v, len %d, base %d, epoch %d", err, l, h.BaseOffset(), h.PartitionLeaderEpoch())
		}
		if lat && (h.ComputeCRC() != h.CRC() || h.MaxTimestamp() != 77 || h.Attributes()&batch.AttrLogAppendTime == 0) {
			t.Fatal("accepted LogAppendTime batch not re-signed")
		}
	})
}

func TestBudgetTake(t *testing.T) {
	bs := func(sizes ...int32) []diskless.BatchCoordinate {
		out := make([]diskless.BatchCoordinate, len(sizes))
		for i, s := range sizes {
			out[i].ByteSize = s
		}
		return out
	}
	b := newBudget(250)
	for i, step := range []struct {
		batches      []diskless.BatchCoordinate
		partitionMax int32
		n            int
		size         int64
		remaining    int64
	}{
		{bs(), 100, 0, 0, 250},         // empty partition: the exemption stays
		{bs(300, 100), 100, 1, 300, 0}, // first batch of the response, over both limits
		{bs(100), 100, 0, 0, 0},        // nothing left
		{bs(10), -5, 0, 0, 0},          // negative limits are 0
		{bs(12, 100), 1000, 0, 0, 0},   // a coordinate too small stops the take
		{bs(batch.HeaderSize), 1 << 30, 0, 0, 0},
	} {
		n, size := b.take(step.batches, step.partitionMax)
		if n != step.n || size != step.size || b.remaining != step.remaining {
			t.Errorf("step %d: took %d (%d bytes), %d left; want %d (%d), %d",
				i, n, size, b.remaining, step.n, step.size, step.remaining)
		}
	}
}

func TestAppendSpans(t *testing.T) {
	c := func(key string, off int64, size int32) diskless.BatchCoordinate {
		return diskless.BatchCoordinate{ObjectKey: key, ByteOffset: off, ByteSize: size}
	}
	bs := []diskless.BatchCoordinate{
		c("a", 0, 100), c("a", 100, 50), // one run
		c("a", 200, 10), // gap
		c("b", 210, 10), // other object
		c("a", 220, 5),  // back to a, not adjacent to b's end in a
	}
	buf := make([]byte, 175)
	spans := appendSpans(nil, 3, bs, buf)
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
		if s.key != w.key || s.off != w.off || len(s.dst) != w.n || &s.dst[0] != &buf[w.pos] || s.batch != w.batch || s.part != 3 {
			t.Errorf("span %d: %s@%d len %d batch %d part %d; want %s@%d len %d at %d batch %d",
				i, s.key, s.off, len(s.dst), s.batch, s.part, w.key, w.off, w.n, w.pos, w.batch)
		}
	}
}
