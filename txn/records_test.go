package txn

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func sampleRecord() *StateRecord {
	return &StateRecord{
		TransactionalID: "tx-1", ProducerID: 42, ProducerEpoch: 3, LastProducerID: -1, LastProducerEpoch: 2,
		TimeoutMs: 60000, State: Ongoing, StartTimestamp: 1000, UpdateTimestamp: 1005,
		Topics: []Topic{{TopicID: [16]byte{1}, Name: "a", Partitions: []int32{0, 2}}, {TopicID: [16]byte{2}, Name: "b", Partitions: []int32{1}}},
		Groups: []string{"g1", "g2"}, Seq: 7, CoordinatorEpoch: -1,
	}
}

// TestRecordRoundTrip: every record decodes to itself — also one whose
// transactional id is over 1 MiB: the coordinator takes any id a request
// carries, so the decoder must read back whatever the encoder wrote, or
// the shard's log would not replay.
func TestRecordRoundTrip(t *testing.T) {
	long := sampleRecord()
	long.TransactionalID = strings.Repeat("x", 1<<20+1)
	for _, rec := range []*StateRecord{sampleRecord(), long, {TransactionalID: "x", ProducerID: 0, LastProducerID: -1, LastProducerEpoch: -1, TimeoutMs: 1, StartTimestamp: -1, Topics: []Topic{}, Groups: []string{}}} {
		b := AppendRecord(nil, rec)
		got, err := DecodeRecord(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, rec) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, rec)
		}
		if !bytes.Equal(AppendRecord(nil, got), b) {
			t.Fatal("re-encoding differs")
		}
	}
}

func TestRecordCorruption(t *testing.T) {
	good := AppendRecord(nil, sampleRecord())
	mutate := func(f func(r *StateRecord)) []byte {
		r := sampleRecord()
		f(r)
		return AppendRecord(nil, r)
	}
	for name, b := range map[string][]byte{
		"empty":              nil,
		"truncated":          good[:len(good)-1],
		"trailing":           append(append([]byte(nil), good...), 0),
		"frame version":      append([]byte{2}, good[1:]...),
		"other key":          append([]byte{1, 117}, good[2:]...),
		"record version":     append([]byte{1, 118, 1}, good[3:]...),
		"empty id":           mutate(func(r *StateRecord) { r.TransactionalID = "" }),
		"state out of range": mutate(func(r *StateRecord) { r.State = 9 }),
		"negative pid":       mutate(func(r *StateRecord) { r.ProducerID = -1 }),
		"topics unsorted":    mutate(func(r *StateRecord) { r.Topics[0], r.Topics[1] = r.Topics[1], r.Topics[0] }),
		"partitions repeat":  mutate(func(r *StateRecord) { r.Topics[0].Partitions = []int32{2, 2} }),
		"groups unsorted":    mutate(func(r *StateRecord) { r.Groups = []string{"b", "a"} }),
		"negative seq":       mutate(func(r *StateRecord) { r.Seq = -1 }),
		"coordinator epoch":  mutate(func(r *StateRecord) { r.CoordinatorEpoch = -2 }),
		// The CoordinatorEpoch tag (count 1, tag 1, size 4) cut to 3 bytes.
		"coordinator epoch size": append(append(append([]byte(nil), good[:len(good)-11]...), 1, 1, 3), 0, 0, 5),
		// The Seq tag (count 1, tag 0, size 8) cut to 7 bytes.
		"seq size": append(append(append([]byte(nil), good[:len(good)-11]...), 1, 0, 7), good[len(good)-8:len(good)-1]...),
	} {
		if _, err := DecodeRecord(b); !errors.Is(err, ErrBadRecord) {
			t.Errorf("%s: %v, want ErrBadRecord", name, err)
		}
	}
	for i := range good {
		if _, err := DecodeRecord(good[:i]); !errors.Is(err, ErrBadRecord) {
			t.Fatalf("prefix of %d bytes: %v", i, err)
		}
	}
}

// TestRecordWithoutSeq: a record written before Seq and CoordinatorEpoch
// were kept (no tagged field) decodes with Seq 0 and CoordinatorEpoch −1,
// and one with Seq 0 and CoordinatorEpoch −1 is written so; a coordinator
// epoch is tag 1, an int32.
func TestRecordWithoutSeq(t *testing.T) {
	rec := sampleRecord()
	rec.Seq = 0
	b := AppendRecord(nil, rec)
	if b[len(b)-1] != 0 {
		t.Fatalf("a record with Seq 0 ends with tag count %d", b[len(b)-1])
	}
	got, err := DecodeRecord(b)
	if err != nil || got.Seq != 0 || got.CoordinatorEpoch != -1 {
		t.Fatalf("DecodeRecord: %+v %v", got, err)
	}
	rec.CoordinatorEpoch = 5
	b = AppendRecord(nil, rec)
	if tail := b[len(b)-7:]; !bytes.Equal(tail, []byte{1, 1, 4, 0, 0, 0, 5}) {
		t.Fatalf("coordinator epoch 5 ends the record with % x", tail)
	}
	if got, err = DecodeRecord(b); err != nil || got.CoordinatorEpoch != 5 {
		t.Fatalf("DecodeRecord: %+v %v", got, err)
	}
}

// TestTableCoordinatorEpoch: the table keeps the largest coordinator
// epoch of the records applied, a removed id's included, and its
// snapshot keeps it when no id is left; a coordinator created over it
// takes the next epoch, and Adopt writes a transaction prepared under an
// older epoch again under its own, once.
func TestTableCoordinatorEpoch(t *testing.T) {
	tb := NewTable()
	if tb.Epoch() != -1 || !tb.Empty() {
		t.Fatalf("a new table: epoch %d, empty %v", tb.Epoch(), tb.Empty())
	}
	r := sampleRecord()
	r.State, r.CoordinatorEpoch = PrepareCommit, 2
	tb.Apply(r)
	dead := sampleRecord()
	dead.TransactionalID, dead.State, dead.Topics, dead.Groups, dead.CoordinatorEpoch = "tx-0", Dead, []Topic{}, []string{}, 4
	tb.Apply(dead)
	if tb.Epoch() != 4 {
		t.Fatalf("epoch %d, want 4 (the removed id's record)", tb.Epoch())
	}
	c, err := New(Config{}, tb)
	if err != nil {
		t.Fatal(err)
	}
	if c.Epoch() != 5 {
		t.Fatalf("coordinator epoch %d, want 5", c.Epoch())
	}
	if cur, rec := c.Adopt(r.TransactionalID, r.ProducerID, r.ProducerEpoch, PrepareAbort); cur != nil || rec != nil {
		t.Fatalf("Adopt of another state: %v %v", cur, rec)
	}
	cur, rec := c.Adopt(r.TransactionalID, r.ProducerID, r.ProducerEpoch, PrepareCommit)
	if rec == nil || cur != rec || rec.CoordinatorEpoch != 5 || rec.State != PrepareCommit || rec.Seq != r.Seq || r.CoordinatorEpoch != 2 {
		t.Fatalf("Adopt: %+v %+v (the table's %+v)", cur, rec, r)
	}
	tb.Apply(rec)
	if cur, rec := c.Adopt(r.TransactionalID, r.ProducerID, r.ProducerEpoch, PrepareCommit); cur == nil || rec != nil {
		t.Fatalf("Adopt again: %v %v, want the state and nothing to write", cur, rec)
	}
	for _, tb := range []*Table{tb, func() *Table {
		only := NewTable()
		only.Apply(dead)
		return only
	}()} {
		b := tb.AppendSnapshot(nil)
		got, _, err := DecodeSnapshot(b)
		if err != nil || got.Epoch() != tb.Epoch() || got.Len() != tb.Len() {
			t.Fatalf("snapshot of %d ids, epoch %d: %d ids, epoch %d, %v", tb.Len(), tb.Epoch(), got.Len(), got.Epoch(), err)
		}
		if !bytes.Equal(got.AppendSnapshot(nil), b) {
			t.Fatal("re-encoding differs")
		}
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	tb := NewTable()
	r1 := sampleRecord()
	r2 := sampleRecord()
	r2.TransactionalID, r2.State, r2.Topics, r2.Groups = "tx-0", CompleteCommit, []Topic{}, []string{}
	tb.Apply(r1)
	tb.Apply(r2)
	b := tb.AppendSnapshot(nil)
	got, rest, err := DecodeSnapshot(append(b, 9, 9))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rest, []byte{9, 9}) {
		t.Fatalf("rest %v", rest)
	}
	if !reflect.DeepEqual(got.ids, tb.ids) {
		t.Fatalf("snapshot round trip differs")
	}
	if !bytes.Equal(got.AppendSnapshot(nil), b) {
		t.Fatal("re-encoding differs")
	}
	for i := range b {
		if _, _, err := DecodeSnapshot(b[:i]); !errors.Is(err, ErrBadRecord) {
			t.Fatalf("prefix of %d bytes: %v", i, err)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(AppendRecord(nil, sampleRecord()))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := DecodeRecord(b)
		if err != nil {
			return
		}
		again, err := DecodeRecord(AppendRecord(nil, rec))
		if err != nil || !reflect.DeepEqual(again, rec) {
			t.Fatalf("a decoded record does not round-trip: %v", err)
		}
	})
}

func FuzzDecodeSnapshot(f *testing.F) {
	tb := NewTable()
	tb.Apply(sampleRecord())
	f.Add(tb.AppendSnapshot(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, _, err := DecodeSnapshot(b)
		if err != nil {
			return
		}
		if _, _, err := DecodeSnapshot(got.AppendSnapshot(nil)); err != nil {
			t.Fatalf("a decoded snapshot does not decode again: %v", err)
		}
	})
}
