package group

import (
	"bytes"
	"encoding/hex"
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
		&OffsetCommitRecord{Group: "g", CommitTimestamp: 1900, ProducerID: 43, ProducerEpoch: 0, TxnSeq: 1 << 40, Topics: []CommitTopic{
			{Name: "u", Partitions: []CommitPartition{{Partition: 2, Offset: 30, LeaderEpoch: -1, ExpireTimestamp: -1}}},
		}},
		&OffsetsDeletedRecord{Group: "g", Topics: []DeletedTopic{{Name: "u", Partitions: []int32{1, 2}}}},
		&TxnOffsetsEndedRecord{ProducerID: 42, ProducerEpoch: 3, Committed: true},
		&TxnOffsetsEndedRecord{ProducerID: 43, ProducerEpoch: 0, TxnSeq: 7},
		&TxnOffsetsEndedRecord{ProducerID: 44, ProducerEpoch: 1, TxnSeq: 2, Timestamp: 2000},
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
		{"txn end TxnSeq of 4 bytes", append(AppendRecord(nil, &TxnOffsetsEndedRecord{ProducerID: 1})[:14], 1, 0, 4, 0, 0, 0, 1)},
		{"txn end TxnSeq past the end", append(AppendRecord(nil, &TxnOffsetsEndedRecord{ProducerID: 1})[:14], 1, 0, 8, 0, 0, 0, 1)},
		{"txn end negative TxnSeq", AppendRecord(nil, &TxnOffsetsEndedRecord{ProducerID: 1, TxnSeq: -1})},
		{"txn end Timestamp of 4 bytes", append(AppendRecord(nil, &TxnOffsetsEndedRecord{ProducerID: 1})[:14], 1, 1, 4, 0, 0, 0, 1)},
		{"txn end negative Timestamp", AppendRecord(nil, &TxnOffsetsEndedRecord{ProducerID: 1, TxnSeq: 1, Timestamp: -1})},
		{"commit negative TxnSeq", AppendRecord(nil, &OffsetCommitRecord{Group: "g", ProducerID: 1, TxnSeq: -1})},
		{"commit TxnSeq without producer", AppendRecord(nil, &OffsetCommitRecord{Group: "g", ProducerID: -1, TxnSeq: 1})},
		{"commit TxnSeq of 9 bytes", append(AppendRecord(nil, &OffsetCommitRecord{Group: "g", ProducerID: 1, Topics: []CommitTopic{}})[:4+1+8+8+2+1],
			1, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 1)},
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

// TestTxnSeqLayout pins records 107 and 110 with their token
// (docs/format/metadata-records.md §107, §110): tagged field 0, size 8,
// big-endian; without one, an empty tagged-field section, the bytes of a
// record written before the token.
func TestTxnSeqLayout(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  Record
		want string
	}{
		// Frame 1, key 110, version 0, ProducerId 9, ProducerEpoch 2,
		// Committed, tags {0: TxnSeq 5}.
		{"110 with token", &TxnOffsetsEndedRecord{ProducerID: 9, ProducerEpoch: 2, Committed: true, TxnSeq: 5},
			"016e00" + "0000000000000009" + "0002" + "01" + "01" + "00" + "08" + "0000000000000005"},
		{"110 without token", &TxnOffsetsEndedRecord{ProducerID: 9, ProducerEpoch: 2},
			"016e00" + "0000000000000009" + "0002" + "00" + "00"},
		// The same with its time, tags {0: TxnSeq 5, 1: Timestamp 258}
		// (§110: the offsets' guard remembers the token from then).
		{"110 with token and time", &TxnOffsetsEndedRecord{ProducerID: 9, ProducerEpoch: 2, Committed: true, TxnSeq: 5, Timestamp: 258},
			"016e00" + "0000000000000009" + "0002" + "01" + "02" + "00" + "08" + "0000000000000005" + "01" + "08" + "0000000000000102"},
		// Frame 1, key 107, version 0, "g", CommitTimestamp 1, ProducerId
		// 9, ProducerEpoch 2, no topics, tags {0: TxnSeq 5}.
		{"107 with token", &OffsetCommitRecord{Group: "g", CommitTimestamp: 1, ProducerID: 9, ProducerEpoch: 2, TxnSeq: 5, Topics: []CommitTopic{}},
			"016b00" + "0267" + "0000000000000001" + "0000000000000009" + "0002" + "01" + "01" + "00" + "08" + "0000000000000005"},
	} {
		if got := hex.EncodeToString(AppendRecord(nil, tc.rec)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	// The offsets snapshot's pending transaction ends with its tagged
	// fields, {0: token 5}, then the section's (§Consumer-group offsets in
	// snapshots).
	o := NewOffsets()
	o.Apply(&OffsetCommitRecord{Group: "g", ProducerID: 9, ProducerEpoch: 2, TxnSeq: 5,
		Topics: []CommitTopic{{Name: "t", Partitions: []CommitPartition{{Offset: 1}}}}})
	if got, want := hex.EncodeToString(o.AppendSnapshot(nil)), "01"+"00"+"08"+"0000000000000005"+"00"; !strings.HasSuffix(got, want) {
		t.Errorf("snapshot %s, want it to end with %s", got, want)
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
			log = append(log, &OffsetCommitRecord{Group: g, ProducerID: int64(i % 2), ProducerEpoch: 1, TxnSeq: int64(i), Topics: []CommitTopic{{Name: "u", Partitions: []CommitPartition{{Partition: 1, Offset: int64(100 + i)}}}}})
		case 3:
			// A stale record 110 (an earlier transaction's token): a
			// snapshot must keep the pending offsets' token for it to
			// change nothing after a cut too.
			log = append(log, &TxnOffsetsEndedRecord{ProducerID: int64((i - 1) % 2), TxnSeq: int64(i - 2), Committed: true})
		case 4:
			// With a time (minutes apart, more than the expiration
			// below): the offsets' guard remembers the token, refuses
			// the record 107 of its transaction written after it, and
			// forgets it in a later sweep.
			pid, seq, at := int64(i%2), int64(i-2)*int64(i%2), int64(i)*40_000
			log = append(log, &TxnOffsetsEndedRecord{ProducerID: pid, Committed: i%3 == 0, TxnSeq: seq, Timestamp: at},
				&OffsetCommitRecord{Group: g, CommitTimestamp: at + 1, ProducerID: pid, ProducerEpoch: 1, TxnSeq: seq, Topics: []CommitTopic{{Name: "u", Partitions: []CommitPartition{{Partition: 2, Offset: int64(200 + i)}}}}})
		case 5:
			log = append(log, &OffsetsDeletedRecord{Group: g, Topics: []DeletedTopic{{Name: "t", Partitions: []int32{1}}, {Name: "u", Partitions: []int32{1}}}})
		case 6:
			log = append(log, &GroupDeletedRecord{Group: "c"})
		}
		if i%11 == 10 {
			log = append(log, &TopicOffsetsDeletedRecord{TopicName: []string{"t", "u"}[i%2]})
		}
	}
	const expiration = 100_000
	full := NewOffsets()
	full.SetProducerIDExpiration(expiration)
	for _, r := range log {
		full.Apply(r)
	}
	want := full.AppendSnapshot(nil)
	for cut := 0; cut <= len(log); cut++ {
		o := NewOffsets()
		o.SetProducerIDExpiration(expiration)
		for _, r := range log[:cut] {
			o.Apply(r)
		}
		o2, _, err := DecodeSnapshot(o.AppendSnapshot(nil))
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		o2.SetProducerIDExpiration(expiration)
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

// TestTxnOffsetsToken: a record 110 ends the producer's pending offsets
// only when its token is not below theirs (DESIGN §Transactions): an
// earlier transaction's record 110 changes nothing, the same
// transaction's or a later one's ends them, and a record without a token
// (written before it) ends them whatever theirs, as does any record 110
// pending offsets without a token.
func TestTxnOffsetsToken(t *testing.T) {
	commit := func(o *Offsets, seq, offset int64) {
		o.Apply(&OffsetCommitRecord{Group: "g", ProducerID: 7, ProducerEpoch: 1, TxnSeq: seq,
			Topics: []CommitTopic{{Name: "t", Partitions: []CommitPartition{{Partition: 0, Offset: offset}}}}})
	}
	for _, tc := range []struct {
		name       string
		pendingSeq int64
		endSeq     int64
		ends       bool
	}{
		{"an earlier transaction's", 3, 2, false},
		{"the same transaction's", 3, 3, true},
		{"a later transaction's", 3, 4, true},
		{"without a token", 3, 0, true},
		{"pending offsets without a token", 0, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOffsets()
			commit(o, tc.pendingSeq, 5)
			// Through a snapshot: the token is kept there.
			o, _, err := DecodeSnapshot(o.AppendSnapshot(nil))
			if err != nil {
				t.Fatal(err)
			}
			o.Apply(&TxnOffsetsEndedRecord{ProducerID: 7, ProducerEpoch: 1, TxnSeq: tc.endSeq, Committed: true})
			v, ok := o.Get("g", "t", 0)
			if ended := ok && v.Offset == 5 && !o.HasPending("g", "t", 0); ended != tc.ends {
				t.Fatalf("ended %v (offset %d %v, pending %v), want %v", ended, v.Offset, ok, o.HasPending("g", "t", 0), tc.ends)
			}
			if !tc.ends {
				// The pending offsets' own record 110 still ends them.
				o.Apply(&TxnOffsetsEndedRecord{ProducerID: 7, ProducerEpoch: 1, TxnSeq: tc.pendingSeq, Committed: true})
				if v, _ := o.Get("g", "t", 0); v.Offset != 5 || o.HasPending("g", "t", 0) {
					t.Fatalf("their own record 110: offset %d, pending %v", v.Offset, o.HasPending("g", "t", 0))
				}
			}
		})
	}
}

// TestTxnOffsetsTokenLargest: the pending offsets' token is the largest
// of the records 107 that wrote them (docs/format/metadata-records.md
// §107), not the last: a record 107 of transaction 2, checked in it and
// written after transaction 3's (the window between TxnOffsetCommit's
// check and its write, DESIGN §Transactions), leaves the token at 3, so a
// deposed coordinator's late record 110 of transaction 2 still changes
// nothing, and transaction 3's ends them all.
func TestTxnOffsetsTokenLargest(t *testing.T) {
	o := NewOffsets()
	for _, c := range []struct{ seq, offset int64 }{{3, 9}, {2, 5}} {
		o.Apply(&OffsetCommitRecord{Group: "g", ProducerID: 7, ProducerEpoch: 1, TxnSeq: c.seq,
			Topics: []CommitTopic{{Name: "t", Partitions: []CommitPartition{{Partition: int32(c.seq), Offset: c.offset}}}}})
	}
	o.Apply(&TxnOffsetsEndedRecord{ProducerID: 7, ProducerEpoch: 1, TxnSeq: 2, Committed: true})
	if _, ok := o.Get("g", "t", 3); ok || !o.HasPending("g", "t", 3) || !o.HasPending("g", "t", 2) {
		t.Fatalf("transaction 2's late record 110 ended transaction 3's pending offsets (committed %v)", ok)
	}
	o.Apply(&TxnOffsetsEndedRecord{ProducerID: 7, ProducerEpoch: 1, TxnSeq: 3, Committed: true})
	for p, want := range map[int32]int64{3: 9, 2: 5} {
		if v, ok := o.Get("g", "t", p); !ok || v.Offset != want || o.HasPending("g", "t", p) {
			t.Fatalf("partition %d after transaction 3's record 110: %d %v, want %d committed", p, v.Offset, ok, want)
		}
	}
}
