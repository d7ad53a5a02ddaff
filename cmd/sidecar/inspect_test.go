package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/batchtest"
	"github.com/diskless-sidecar/sidecar/segment"
)

// TestDumpSegment: `wal dump` of a segment object lists the batches of its
// data and its index entries with absolute offsets; a damaged index is an
// error (exit 1), the batches still listed.
func TestDumpSegment(t *testing.T) {
	var data bytes.Buffer
	w := segment.NewWriter(&data, [16]byte{0xab}, 3, 1000, 1)
	for i := range 3 {
		b := batchtest.Make(batchtest.Plain(int64(50+i)), batchtest.Values("v", 2)...)
		if err := w.Add(b, w.NextOffset(), 7000, batch.TimestampCreateTime); err != nil {
			t.Fatal(err)
		}
	}
	tail, _ := w.Finish()
	obj := append(data.Bytes(), tail...)

	d := dumpWAL("s", obj)
	if d.Error != "" || len(d.Batches) != 3 || d.Records != 6 || d.BadCRCs != 0 || d.Segment == nil {
		t.Fatalf("dump %+v", d)
	}
	sg := d.Segment
	// The topic id as `meta dump` and the coordinator print it, so that
	// the two dumps can be matched.
	if want := (diskless.TopicID{0xab}).String(); sg.TopicID != want {
		t.Errorf("topic id %q, want %q", sg.TopicID, want)
	}
	if sg.Partition != 3 || sg.BaseOffset != 1000 || sg.DataSize != int64(data.Len()) || len(sg.Entries) != 3 ||
		sg.Entries[0].FirstOffset != 1000 || sg.Entries[2].LastOffset != 1005 || sg.Entries[1].ByteOffset != int64(d.Batches[1].ByteOffset) ||
		sg.Entries[2].MaxTimestamp != 52 || sg.Entries[0].AppendTime != 7000 {
		t.Fatalf("segment %+v", sg)
	}
	var out strings.Builder
	printWAL(&out, d)
	if !strings.Contains(out.String(), "segment object: topic id ab") || !strings.Contains(out.String(), "3 index entries") {
		t.Errorf("printed:\n%s", out.String())
	}

	// A bit flipped in the index: the trailer still names a segment, the
	// index's CRC fails.
	bad := bytes.Clone(obj)
	bad[data.Len()+2] ^= 1
	if d := dumpWAL("s", bad); d.Segment == nil || d.Error == "" || len(d.Batches) != 3 {
		t.Fatalf("damaged index: %+v", d)
	}

	// A WAL object has no segment part.
	if d := dumpWAL("w", data.Bytes()); d.Segment != nil || d.Error != "" || len(d.Batches) != 3 {
		t.Fatalf("WAL object: %+v", d)
	}
}
