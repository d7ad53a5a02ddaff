package wal_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/batchtest"
	"github.com/diskless-sidecar/sidecar/wal"
)

const now = int64(1_700_000_000_000)

func tid(b byte) [16]byte { return [16]byte{15: b} }

// TestPackGroupsByPartitionKeepingArrivalOrder checks the SPEC §7 layout:
// grouped by (topic id, partition), arrival order within a group, bytes
// untouched, locations pointing at each entry's own batch.
func TestPackGroupsByPartitionKeepingArrivalOrder(t *testing.T) {
	mk := func(v string) []byte { return batchtest.Make(batchtest.Plain(now), batchtest.Values(v, 1)...) }
	entries := []wal.Entry{
		{TopicID: tid(2), Partition: 0, Batch: mk("t2p0-first")},
		{TopicID: tid(1), Partition: 1, Batch: mk("t1p1-first")},
		{TopicID: tid(2), Partition: 0, Batch: mk("t2p0-second")},
		{TopicID: tid(1), Partition: 0, Batch: mk("t1p0-only")},
		{TopicID: tid(1), Partition: 1, Batch: mk("t1p1-second")},
	}
	locs := make([]wal.Location, len(entries))
	prefix := []byte("prefix")
	var p wal.Packer
	out := p.Pack(append([]byte(nil), prefix...), entries, locs)
	if !bytes.HasPrefix(out, prefix) {
		t.Fatal("Pack clobbered dst")
	}
	obj := out[len(prefix):]
	if len(obj) != wal.Size(entries) {
		t.Fatalf("object is %d bytes, want %d", len(obj), wal.Size(entries))
	}
	for i, e := range entries {
		l := locs[i]
		if got := obj[l.ByteOffset : l.ByteOffset+l.ByteSize]; !bytes.Equal(got, e.Batch) {
			t.Fatalf("entry %d: bytes at its location differ", i)
		}
	}
	wantOrder := []int{3, 1, 4, 0, 2} // t1p0, t1p1 (arrival), t2p0 (arrival)
	for k := 1; k < len(wantOrder); k++ {
		if locs[wantOrder[k]].ByteOffset <= locs[wantOrder[k-1]].ByteOffset {
			t.Fatalf("layout order wrong: locations %+v", locs)
		}
	}
	var walked []int
	if err := wal.Walk(obj, func(off int, h batch.Header) error {
		walked = append(walked, off)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(walked) != len(entries) {
		t.Fatalf("walked %d batches, want %d", len(walked), len(entries))
	}
}

func TestWalkCorruption(t *testing.T) {
	good := batchtest.Make(batchtest.Plain(now), batchtest.Values("v", 2)...)
	obj := append(append([]byte(nil), good...), good...)
	cases := []struct {
		name string
		obj  []byte
		want error
	}{
		{"truncated second batch", obj[:len(obj)-5], batch.ErrShort},
		{"truncated header", obj[:len(good)+20], batch.ErrShort},
		{"bad length", func() []byte {
			b := append([]byte(nil), obj...)
			b[len(good)+8], b[len(good)+9], b[len(good)+10], b[len(good)+11] = 0, 0, 0, 1
			return b
		}(), batch.ErrBadLength},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := 0
			err := wal.Walk(c.obj, func(int, batch.Header) error { n++; return nil })
			if !errors.Is(err, c.want) || n != 1 {
				t.Fatalf("Walk = %v after %d batches, want %v after 1", err, n, c.want)
			}
		})
	}
}

func FuzzWalk(f *testing.F) {
	good := batchtest.Make(batchtest.Plain(now), batchtest.Values("v", 2)...)
	f.Add(append(append([]byte(nil), good...), good...))
	f.Add([]byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, obj []byte) {
		end := 0
		_ = wal.Walk(obj, func(off int, h batch.Header) error {
			if off != end || off+h.Len() > len(obj) {
				t.Fatalf("batch at %d of %d bytes escapes the object of %d", off, h.Len(), len(obj))
			}
			end = off + h.Len()
			return nil
		})
	})
}
