package coordinator

import (
	"bytes"
	"testing"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
)

// TestLateRepeatOfForgottenKey: a shared file (owners 0 and 1) is closed,
// forgotten, then committed again under the same key (a repeat later than
// the invariant allows), lands in its old slot and is closed again. The
// state stays a function of the log: a snapshot after any record, then
// replay, equals replay from the start, and no live batch names a closed
// or free slot.
func TestLateRepeatOfForgottenKey(t *testing.T) {
	tid := diskless.TopicID{5}
	mk := func(key string, hwm, ts int64, owners ...int32) *records.FileCommitted {
		return &records.FileCommitted{ObjectKey: key, ObjectFormat: 1, FileSize: 100, OwnerIDs: owners,
			Topics: []records.FileTopic{{TopicID: tid, Partitions: []records.FilePartition{{Partition: 0, Batches: []records.CommittedBatch{{
				Magic: 2, ByteOffset: 0, ByteSize: 10, AssignedBaseOffset: hwm, AssignedLastOffset: hwm,
				LogAppendTimestamp: ts, BatchMaxTimestamp: ts, TimestampType: 1, ProducerID: -1}}}}}}}
	}
	h := int64(3_600_000)
	recs := []records.Record{
		&records.PartitionCreated{TopicID: tid, TopicName: "t", Partition: 0},
		mk("k1", 0, 10, 0, 1),
		mk("k2", 1, 20, 0),
		&records.RecordsDeleted{TopicID: tid, Partition: 0, NewLogStartOffset: 1},
		&records.FileDeleted{ObjectKey: "k1", DeleterShard: 0},
		mk("k3", 2, 20+2*h, 0),    // forgets k1
		mk("k1", 3, 21+2*h, 0, 1), // late repeat: k1 anew, in k1's old slot
		&records.RecordsDeleted{TopicID: tid, Partition: 0, NewLogStartOffset: 4},
		&records.FileDeleted{ObjectKey: "k1", DeleterShard: 0},
		&records.FileDeleted{ObjectKey: "k2", DeleterShard: 0},
		mk("k4", 4, 30+4*h, 0),
		mk("k5", 5, 31+4*h, 0),
	}
	full := newState(0, DefaultProducerIDExpirationMs, discardLogger())
	for i, r := range recs {
		if err := full.apply(r); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	want := full.appendSnapshot(nil)
	for i := range recs {
		st := newState(0, DefaultProducerIDExpirationMs, discardLogger())
		for _, r := range recs[:i] {
			st.apply(r)
		}
		ld := newState(0, DefaultProducerIDExpirationMs, discardLogger())
		if err := ld.decodeSnapshot(st.appendSnapshot(nil)); err != nil {
			t.Fatalf("at %d: %v", i, err)
		}
		for _, r := range recs[i:] {
			if err := ld.apply(r); err != nil {
				t.Fatalf("at %d: %v", i, err)
			}
		}
		if !bytes.Equal(ld.appendSnapshot(nil), want) {
			t.Fatalf("snapshot at %d then replay differs", i)
		}
		// Every live batch names a live file.
		p := ld.partitions[diskless.TopicPartition{TopicID: tid, Partition: 0}]
		for j := range p.runs.len() {
			e := p.runs.at(j)
			if ld.files[e.file].free() || ld.files[e.file].closed {
				t.Fatalf("batch %d in slot %d: %+v", e.baseOffset, e.file, ld.files[e.file])
			}
		}
	}
}
