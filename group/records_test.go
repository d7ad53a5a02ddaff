package group

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func sampleRecords() []Record {
	return []Record{
		&OffsetCommitRecord{Group: "g", CommitTimestamp: 1700, ProducerID: -1, ProducerEpoch: -1, Topics: []CommitTopic{
			{Name: "t", TopicID: topicID("t"), Partitions: []CommitPartition{{Partition: 0, Offset: 10, LeaderEpoch: 3, Metadata: "m", ExpireTimestamp: -1}, {Partition: 7, Offset: 0, LeaderEpoch: -1, ExpireTimestamp: 99}}},
			{Name: "u", Partitions: []CommitPartition{{Partition: 1, Offset: 5, LeaderEpoch: -1, ExpireTimestamp: -1}}},
		}},
		&OffsetCommitRecord{Group: "g", CommitTimestamp: 1800, ProducerID: 42, ProducerEpoch: 3, Topics: []CommitTopic{
			{Name: "t", Partitions: []CommitPartition{{Partition: 1, Offset: 20, LeaderEpoch: -1, ExpireTimestamp: -1}}},
		}},
		&OffsetsDeletedRecord{Group: "g", Topics: []DeletedTopic{{Name: "u", Partitions: []int32{1, 2}}}},
		&TxnOffsetsEndedRecord{ProducerID: 42, ProducerEpoch: 3, Committed: true},
		&GroupDeletedRecord{Group: "h"},
		&TopicOffsetsDeletedRecord{TopicName: "t", TopicID: topicID("t")},
		&TopicOffsetsDeletedRecord{TopicName: "u"},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, rec := range sampleRecords() {
		b := AppendRecord(nil, rec)
		got, err := DecodeRecord(b)
		if err != nil {
			t.Fatalf("%T: %v", rec, err)
		}
		if !reflect.DeepEqual(normalize(got), normalize(rec)) {
			t.Fatalf("%T: got %+v, want %+v", rec, got, rec)
		}
		if !IsRecordKey(got.Key()) {
			t.Fatalf("key %d", got.Key())
		}
	}
}

// TestRecordLongGroupID: a group id over 1 MiB round-trips. A request may
// carry one and nothing refuses it on the way in, so the decoder must read
// back whatever the encoder wrote, or the shard's log would not replay.
func TestRecordLongGroupID(t *testing.T) {
	g := strings.Repeat("g", 1<<20+1)
	for _, rec := range []Record{
		&OffsetCommitRecord{Group: g, CommitTimestamp: 1, ProducerID: -1, ProducerEpoch: -1, Topics: []CommitTopic{}},
		&GroupDeletedRecord{Group: g},
	} {
		got, err := DecodeRecord(AppendRecord(nil, rec))
		if err != nil {
			t.Fatalf("%T: %v", rec, err)
		}
		if !reflect.DeepEqual(got, rec) {
			t.Fatalf("%T: the round trip differs", rec)
		}
	}
}

// normalize makes nil and empty slices compare equal.
func normalize(r Record) Record {
	if c, ok := r.(*OffsetCommitRecord); ok {
		cp := *c
		if cp.Topics == nil {
			cp.Topics = []CommitTopic{}
		}
		return &cp
	}
	return r
}

// TestRecordCorruption is the corruption table: every truncation of every
// record, trailing bytes, unknown frame version, key and version, null
// strings and arrays, and values replay must not accept.
func TestRecordCorruption(t *testing.T) {
	for _, rec := range sampleRecords() {
		b := AppendRecord(nil, rec)
		for n := 0; n < len(b); n++ {
			if _, err := DecodeRecord(b[:n]); !errors.Is(err, ErrBadRecord) {
				t.Fatalf("%T truncated to %d of %d bytes: %v", rec, n, len(b), err)
			}
		}
		if _, err := DecodeRecord(append(bytes.Clone(b), 0)); !errors.Is(err, ErrBadRecord) {
			t.Fatalf("%T with a trailing byte: %v", rec, err)
		}
	}
	commit := AppendRecord(nil, sampleRecords()[0])
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"frame version 2", append([]byte{2}, commit[1:]...)},
		{"unknown key", []byte{1, 114, 0, 0}},
		{"partition coordinator key", []byte{1, 100, 0, 0}},
		{"version 1", append([]byte{1, 107, 1}, commit[3:]...)},
		{"null group id", append([]byte{1, 107, 0, 0}, commit[5:]...)},
		{"empty group id", AppendRecord(nil, &GroupDeletedRecord{Group: ""})},
		{"null topics", []byte{1, 107, 0, 2, 'g', 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0}},
		{"negative partition", AppendRecord(nil, &OffsetCommitRecord{Group: "g", ProducerID: -1, Topics: []CommitTopic{{Name: "t", Partitions: []CommitPartition{{Partition: -1}}}}})},
		{"empty topic", AppendRecord(nil, &OffsetCommitRecord{Group: "g", ProducerID: -1, Topics: []CommitTopic{{Name: ""}}})},
		{"producer id -2", AppendRecord(nil, &OffsetCommitRecord{Group: "g", ProducerID: -2})},
		{"txn end without producer", AppendRecord(nil, &TxnOffsetsEndedRecord{ProducerID: -1})},
		{"txn end flag 2", append(AppendRecord(nil, &TxnOffsetsEndedRecord{ProducerID: 1})[:13], 2, 0)},
		{"huge array", []byte{1, 108, 0, 2, 'g', 0xff, 0xff, 0xff, 0xff, 0x0f}},
		{"empty deleted topic", AppendRecord(nil, &TopicOffsetsDeletedRecord{})},
		{"null deleted topic", append([]byte{1, 113, 0, 0}, make([]byte, 17)...)},
		{"key 111", []byte{1, 111, 0, 0}},
		{"key 112", []byte{1, 112, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeRecord(tc.b); !errors.Is(err, ErrBadRecord) {
				t.Fatalf("decoded: %v", err)
			}
		})
	}
}

func FuzzDecodeRecord(f *testing.F) {
	for _, rec := range sampleRecords() {
		f.Add(AppendRecord(nil, rec))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := DecodeRecord(b)
		if err != nil {
			if !errors.Is(err, ErrBadRecord) {
				t.Fatalf("error not ErrBadRecord: %v", err)
			}
			return
		}
		// What decodes re-encodes to a body that decodes the same, and
		// applies without panicking.
		again, err := DecodeRecord(AppendRecord(nil, rec))
		if err != nil || !reflect.DeepEqual(normalize(again), normalize(rec)) {
			t.Fatalf("re-encoding: %v", err)
		}
		NewOffsets().Apply(rec)
	})
}

func FuzzDecodeSnapshot(f *testing.F) {
	o := NewOffsets()
	for _, rec := range sampleRecords()[:2] {
		o.Apply(rec)
	}
	f.Add(o.AppendSnapshot(nil))
	f.Add(NewOffsets().AppendSnapshot(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, rest, err := DecodeSnapshot(b)
		if err != nil {
			if !errors.Is(err, ErrBadRecord) {
				t.Fatalf("error not ErrBadRecord: %v", err)
			}
			return
		}
		// What decodes re-encodes (tagged fields, which readers skip,
		// aside) to a section that decodes to the same table.
		enc := got.AppendSnapshot(nil)
		again, left, err := DecodeSnapshot(enc)
		if err != nil || len(left) != 0 || !bytes.Equal(again.AppendSnapshot(nil), enc) {
			t.Fatalf("re-encoding: %v", err)
		}
		if len(rest) > len(b) {
			t.Fatal("rest longer than input")
		}
	})
}

func TestSnapshotCorruption(t *testing.T) {
	o := NewOffsets()
	for _, rec := range sampleRecords()[:2] {
		o.Apply(rec)
	}
	b := o.AppendSnapshot(nil)
	for n := 0; n < len(b); n++ {
		if _, _, err := DecodeSnapshot(b[:n]); !errors.Is(err, ErrBadRecord) {
			t.Fatalf("truncated to %d of %d bytes: %v", n, len(b), err)
		}
	}
	if _, _, err := DecodeSnapshot(append([]byte{2}, b[1:]...)); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("version 2: %v", err)
	}
	// Groups out of order are refused (the writer sorts them).
	o2 := NewOffsets()
	o2.Apply(&OffsetCommitRecord{Group: "a", ProducerID: -1, Topics: []CommitTopic{{Name: "t", Partitions: []CommitPartition{{}}}}})
	o2.Apply(&OffsetCommitRecord{Group: "b", ProducerID: -1, Topics: []CommitTopic{{Name: "t", Partitions: []CommitPartition{{}}}}})
	sb := o2.AppendSnapshot(nil)
	i, j := bytes.IndexByte(sb, 'a'), bytes.IndexByte(sb, 'b')
	sb[i], sb[j] = 'b', 'a'
	if _, _, err := DecodeSnapshot(sb); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("groups out of order: %v", err)
	}
	rest := []byte("next section")
	if _, left, err := DecodeSnapshot(append(bytes.Clone(b), rest...)); err != nil || !bytes.Equal(left, rest) {
		t.Fatalf("bytes after the section: %q, %v", left, err)
	}
}

// TestSnapshotAnywhereEqualsReplay: for a log of records, a snapshot taken
// after any prefix and the rest replayed gives the table replay from the
// start gives (DESIGN invariant 6), byte for byte.
func TestSnapshotAnywhereEqualsReplay(t *testing.T) {
	var log []Record
	for i := range 30 {
		g := []string{"a", "b", "c"}[i%3]
		log = append(log, &OffsetCommitRecord{Group: g, CommitTimestamp: int64(i), ProducerID: -1, Topics: []CommitTopic{{Name: "t", Partitions: []CommitPartition{{Partition: int32(i % 4), Offset: int64(i), LeaderEpoch: -1, ExpireTimestamp: -1}}}}})
		switch i % 7 {
		case 2:
			log = append(log, &OffsetCommitRecord{Group: g, ProducerID: int64(i % 2), ProducerEpoch: 1, Topics: []CommitTopic{{Name: "u", Partitions: []CommitPartition{{Partition: 1, Offset: int64(100 + i)}}}}})
		case 4:
			log = append(log, &TxnOffsetsEndedRecord{ProducerID: int64(i % 2), Committed: i%3 == 0})
		case 5:
			log = append(log, &OffsetsDeletedRecord{Group: g, Topics: []DeletedTopic{{Name: "t", Partitions: []int32{1}}, {Name: "u", Partitions: []int32{1}}}})
		case 6:
			log = append(log, &GroupDeletedRecord{Group: "c"})
		}
		if i%11 == 10 {
			log = append(log, &TopicOffsetsDeletedRecord{TopicName: []string{"t", "u"}[i%2]})
		}
	}
	full := NewOffsets()
	for _, r := range log {
		full.Apply(r)
	}
	want := full.AppendSnapshot(nil)
	for cut := 0; cut <= len(log); cut++ {
		o := NewOffsets()
		for _, r := range log[:cut] {
			o.Apply(r)
		}
		o2, _, err := DecodeSnapshot(o.AppendSnapshot(nil))
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		for _, r := range log[cut:] {
			o2.Apply(r)
		}
		if got := o2.AppendSnapshot(nil); !bytes.Equal(got, want) {
			t.Fatalf("cut %d: snapshot then replay differs from replay", cut)
		}
		if o2.Len() != full.Len() {
			t.Fatalf("cut %d: %d offsets, want %d", cut, o2.Len(), full.Len())
		}
		checkIndex(t, o2)
	}
}

func TestTxnOffsets(t *testing.T) {
	o := NewOffsets()
	o.Apply(&OffsetCommitRecord{Group: "g", ProducerID: -1, Topics: []CommitTopic{{Name: "t", Partitions: []CommitPartition{{Partition: 0, Offset: 1}}}}})
	o.Apply(&OffsetCommitRecord{Group: "g", ProducerID: 7, ProducerEpoch: 1, Topics: []CommitTopic{{Name: "t", Partitions: []CommitPartition{{Partition: 0, Offset: 5}}}}})
	if v, _ := o.Get("g", "t", 0); v.Offset != 1 || !o.HasPending("g", "t", 0) {
		t.Fatalf("pending offset visible: %d", v.Offset)
	}
	o.Apply(&TxnOffsetsEndedRecord{ProducerID: 7, Committed: false})
	if v, _ := o.Get("g", "t", 0); v.Offset != 1 || o.HasPending("g", "t", 0) {
		t.Fatalf("aborted: %d", v.Offset)
	}
	o.Apply(&OffsetCommitRecord{Group: "g", ProducerID: 7, ProducerEpoch: 2, Topics: []CommitTopic{{Name: "t", Partitions: []CommitPartition{{Partition: 0, Offset: 6}}}}})
	o.Apply(&TxnOffsetsEndedRecord{ProducerID: 7, Committed: true})
	if v, _ := o.Get("g", "t", 0); v.Offset != 6 || o.HasPending("g", "t", 0) {
		t.Fatalf("committed: %d", v.Offset)
	}
}
