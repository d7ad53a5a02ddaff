package coordinator

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/topicconfig"
)

// admin applies records to shard s through its driver, as an online
// change would.
func (e *env) admin(s int32, recs ...records.Record) {
	e.t.Helper()
	resp := e.c.shards[s].do(&request{ctx: context.Background(), build: func(*state) ([]records.Record, error) { return recs, nil }})
	if resp.err != nil {
		e.t.Fatalf("admin: %v", resp.err)
	}
}

func TestRecordsDeleted(t *testing.T) {
	e := newEnv(t, 1)
	top := e.createTopic("t", 1, nil)
	// Two runs per file: a gap between the batches, as a refused batch
	// leaves.
	e.commit(nextKey(), idem(top, 0, 1, 0, 0, 3), withByteOffset(withMaxTs(plain(top, 0, 2), 90), 150)) // [0,2] [3,4]
	e.commit(nextKey(), idem(top, 0, 2, 0, 0, 5), withByteOffset(withMaxTs(plain(top, 0, 1), 10), 150)) // [5,9] [10]
	check := func(stage string) {
		t.Helper()
		r := e.find(top, 0, 4, 1<<20)
		if r.Err != nil || r.LogStartOffset != 4 || r.HighWatermark != 11 || len(r.Runs) != 3 || r.Runs[0].BaseOffset != 3 {
			t.Fatalf("%s: find at the new log start: %+v", stage, r)
		}
		if r := e.find(top, 0, 3, 0); r.Err != kerr.OffsetOutOfRange || r.LogStartOffset != 4 {
			t.Fatalf("%s: find below the log start: %+v", stage, r)
		}
		if r := e.c.ListOffsets(context.Background(), diskless.TopicPartition{TopicID: top.ID, Partition: 0}, diskless.ListOffsetsEarliest); r.Offset != 4 {
			t.Fatalf("%s: earliest %d, want 4", stage, r.Offset)
		}
		// The removed batch [0,2] (max timestamp 1000) no longer counts:
		// [3,4] has 90, so the first batch reaching 100 is [5,9].
		if r := e.c.ListOffsets(context.Background(), diskless.TopicPartition{TopicID: top.ID, Partition: 0}, 100); r.Candidate == nil || r.Candidate.BaseOffset != 5 {
			t.Fatalf("%s: timestamp lookup: %+v", stage, r.Candidate)
		}
		s := e.c.shards[0]
		s.mu.RLock()
		st := s.mu.st
		live := []int32{st.files[0].live, st.files[1].live}
		_, p1 := st.partitions[diskless.TopicPartition{TopicID: top.ID, Partition: 0}].producers[1]
		s.mu.RUnlock()
		if live[0] != 1 || live[1] != 2 {
			t.Fatalf("%s: file live counts %v, want [1 2]", stage, live)
		}
		if p1 {
			t.Fatalf("%s: producer whose batches are all deleted kept its state", stage)
		}
	}
	e.admin(0, &records.RecordsDeleted{TopicID: top.ID, Partition: 0, NewLogStartOffset: 4})
	check("online")
	// Moving it backwards is a no-op.
	e.admin(0, &records.RecordsDeleted{TopicID: top.ID, Partition: 0, NewLogStartOffset: 1})
	check("after no-op")
	e.reopen()
	check("after restart")
	// Producer 1's state is gone: any sequence is accepted again.
	if r := e.commit(nextKey(), idem(top, 0, 1, 0, 77, 1))[0]; r.Err != nil {
		t.Fatalf("removed producer: %s", resName(r))
	}
	// Producer 2's state remains.
	if r := e.commit(nextKey(), idem(top, 0, 2, 0, 77, 1))[0]; r.Err != kerr.OutOfOrderSequenceNumber {
		t.Fatalf("kept producer: %s", resName(r))
	}
}

func TestTopicDeleted(t *testing.T) {
	e := newEnv(t, 1)
	top := e.createTopic("t", 2, nil)
	other := e.createTopic("u", 1, nil)
	e.commit(nextKey(), plain(top, 0, 1), plain(top, 1, 1), plain(other, 0, 1))
	if _, err := e.c.DeleteTopic(context.Background(), top.ID); err != nil {
		t.Fatal(err)
	}
	liveCount := func() int32 {
		s := e.c.shards[0]
		s.mu.RLock()
		defer s.mu.RUnlock()
		return s.mu.st.files[0].live
	}
	// A soft delete: the batches stay until the purge.
	if live := liveCount(); live != 3 {
		t.Fatalf("before the purge: file live count %d, want 3", live)
	}
	if err := e.c.runPurge(context.Background()); err != nil {
		t.Fatal(err)
	}
	check := func(stage string) {
		t.Helper()
		if _, ok := e.c.Topic("t"); ok {
			t.Fatalf("%s: deleted topic still in the catalog", stage)
		}
		if r := e.find(top, 0, 0, 0); r.Err != kerr.UnknownTopicOrPartition {
			t.Fatalf("%s: find on deleted topic: %s", stage, errName(r.Err))
		}
		if r := e.find(other, 0, 0, 1); r.Err != nil || len(r.Runs) != 1 {
			t.Fatalf("%s: other topic: %+v", stage, r)
		}
		if live := liveCount(); live != 1 {
			t.Fatalf("%s: file live count %d, want 1", stage, live)
		}
	}
	check("online")
	e.reopen()
	check("after restart")
	// The name is free again.
	e.createTopic("t", 1, nil)
}

// TestApplyRefusesInconsistentRecords checks that apply validates before it
// mutates: a log that contradicts itself fails replay rather than building
// a wrong state.
func TestApplyRefusesInconsistentRecords(t *testing.T) {
	tid := diskless.TopicID{7}
	b := records.CommittedBatch{Magic: 2, ByteSize: 10, AssignedBaseOffset: 0, AssignedLastOffset: 0, LogAppendTimestamp: 5, ProducerID: -1}
	file := func(key string, bs ...records.CommittedBatch) *records.FileCommitted {
		return &records.FileCommitted{ObjectKey: key, ObjectFormat: 1, FileSize: 100,
			Topics: []records.FileTopic{{TopicID: tid, Partitions: []records.FilePartition{{Partition: 0, Batches: bs}}}}}
	}
	shift := func(b records.CommittedBatch, base int64) records.CommittedBatch {
		b.AssignedBaseOffset, b.AssignedLastOffset = base, base
		return b
	}
	owned := func(r *records.FileCommitted, owners ...int32) *records.FileCommitted { r.OwnerIDs = owners; return r }
	setup := []records.Record{
		&records.PartitionCreated{TopicID: tid, TopicName: "t", Partition: 0},
		&records.TopicConfig{TopicID: tid, TopicName: "t", NumPartitions: 1},
		owned(file("k1", b), 0, 3),
		&records.ProducerIDBlock{NodeID: 1, FirstProducerID: 0, BlockSize: 1000},
		owned(file("k0", shift(b, 1)), 0),
		&records.RecordsDeleted{TopicID: tid, Partition: 0, NewLogStartOffset: 2}, // releases k1 and k0
		&records.FileDeleted{ObjectKey: "k0", DeleterShard: 0},
	}
	cases := []struct {
		name string
		rec  records.Record
	}{
		{"partition created twice", &records.PartitionCreated{TopicID: tid, TopicName: "t", Partition: 0}},
		{"partition with zero topic id", &records.PartitionCreated{TopicName: "t", Partition: 1}},
		{"file key committed twice", file("k1", shift(b, 2))},
		{"offset below high watermark", file("k2", shift(b, 1))},
		{"offset above high watermark", file("k2", shift(b, 3))},
		{"gap inside the file", file("k2", shift(b, 2), shift(b, 4))},
		{"unknown partition", &records.FileCommitted{ObjectKey: "k2", Topics: []records.FileTopic{{TopicID: diskless.TopicID{8}, Partitions: []records.FilePartition{{Batches: []records.CommittedBatch{b}}}}}}},
		{"no batches", &records.FileCommitted{ObjectKey: "k2"}},
		{"two append times", file("k2", shift(b, 2), func() records.CommittedBatch { x := shift(b, 3); x.LogAppendTimestamp = 6; return x }())},
		{"last before base", file("k2", func() records.CommittedBatch { x := shift(b, 2); x.AssignedLastOffset = 0; return x }())},
		{"timestamp type 3", file("k2", func() records.CommittedBatch { x := shift(b, 2); x.TimestampType = 3; return x }())},
		{"log start above high watermark", &records.RecordsDeleted{TopicID: tid, Partition: 0, NewLogStartOffset: 3}},
		{"owner out of range", owned(file("k2", shift(b, 2)), 0, MaxShards)},
		{"deletion of unknown file", &records.FileDeleted{ObjectKey: "nope"}},
		{"file deleted twice", &records.FileDeleted{ObjectKey: "k0"}},
		{"deleter not an owner", &records.FileDeleted{ObjectKey: "k1", DeleterShard: 1}},
		{"deleter a higher owner", &records.FileDeleted{ObjectKey: "k1", DeleterShard: 3}},
		{"records deleted on unknown partition", &records.RecordsDeleted{TopicID: tid, Partition: 1, NewLogStartOffset: 0}},
		{"topic name taken", &records.TopicConfig{TopicID: diskless.TopicID{9}, TopicName: "t", NumPartitions: 1}},
		{"topic id taken", &records.TopicConfig{TopicID: tid, TopicName: "v", NumPartitions: 1}},
		{"invalid topic name", &records.TopicConfig{TopicID: diskless.TopicID{9}, TopicName: "a b", NumPartitions: 1}},
		{"zero partitions", &records.TopicConfig{TopicID: diskless.TopicID{9}, TopicName: "v", NumPartitions: 0}},
		{"producer block overlaps", &records.ProducerIDBlock{FirstProducerID: 999, BlockSize: 10}},
		{"producer block leaves a hole", &records.ProducerIDBlock{FirstProducerID: 1001, BlockSize: 10}},
		{"empty producer block", &records.ProducerIDBlock{FirstProducerID: 1000, BlockSize: 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := newState(0, DefaultProducerIDExpirationMs, discardLogger())
			for _, r := range setup {
				if err := st.apply(r); err != nil {
					t.Fatalf("setup: %v", err)
				}
			}
			before := st.appendSnapshot(nil)
			if err := st.apply(tc.rec); !errors.Is(err, errInconsistent) {
				t.Fatalf("apply: %v, want errInconsistent", err)
			}
			if after := st.appendSnapshot(nil); string(after) != string(before) {
				t.Fatal("a refused record changed the state")
			}
		})
	}
}

func TestDecodeSnapshotCorruption(t *testing.T) {
	e := newEnv(t, 1)
	workload(t, e, 12)
	good := stateBytes(e.c)[0]
	st := newState(0, DefaultProducerIDExpirationMs, discardLogger())
	if err := st.decodeSnapshot(good); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if string(st.appendSnapshot(nil)) != string(good) {
		t.Fatal("snapshot does not round-trip")
	}
	for n := range len(good) {
		st := newState(0, DefaultProducerIDExpirationMs, discardLogger())
		if err := st.decodeSnapshot(good[:n]); !errors.Is(err, errBadSnapshot) {
			t.Fatalf("prefix of %d/%d bytes: %v", n, len(good), err)
		}
	}
	if err := newState(0, DefaultProducerIDExpirationMs, discardLogger()).decodeSnapshot(append(good, 0)); err == nil {
		t.Fatal("trailing byte accepted")
	}
}

func FuzzDecodeSnapshot(f *testing.F) {
	st := newState(0, DefaultProducerIDExpirationMs, discardLogger())
	tid := diskless.TopicID{7}
	st.apply(&records.PartitionCreated{TopicID: tid, TopicName: "t", Partition: 0})
	st.apply(&records.TopicConfig{TopicID: tid, TopicName: "t", NumPartitions: 1, Configs: []records.TopicConfigEntry{{Name: "retention.ms", Value: "5"}}})
	st.apply(&records.FileCommitted{ObjectKey: "k", ObjectFormat: 1, FileSize: 100, Topics: []records.FileTopic{{TopicID: tid, Partitions: []records.FilePartition{{Batches: []records.CommittedBatch{
		{Magic: 2, ByteSize: 10, AssignedLastOffset: 1, LogAppendTimestamp: 5, ProducerID: 3, LastSequence: 1},
		{Magic: 2, ByteOffset: 10, ByteSize: 10, AssignedBaseOffset: 2, AssignedLastOffset: 2, LogAppendTimestamp: 5, ProducerID: -1, TimestampType: 1},
	}}}}}})
	st.apply(&records.ProducerIDBlock{FirstProducerID: 0, BlockSize: 1000})
	f.Add(st.appendSnapshot(nil))
	f.Add(newState(0, 1, discardLogger()).appendSnapshot(nil))
	_, churned := lifecycleRecords(f, 60) // free slots, closed files
	f.Add(churned.appendSnapshot(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		st := newState(0, DefaultProducerIDExpirationMs, discardLogger())
		if err := st.decodeSnapshot(b); err != nil {
			return
		}
		// A loaded state encodes stably and serves reads without panics.
		enc := st.appendSnapshot(nil)
		again := newState(0, DefaultProducerIDExpirationMs, discardLogger())
		if err := again.decodeSnapshot(enc); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if string(again.appendSnapshot(nil)) != string(enc) {
			t.Fatal("re-encoding differs")
		}
		for _, p := range st.partitions {
			p.visible, p.visHWM, p.visLogStart = true, p.hwm, p.logStart
			st.findBatches(p, p.logStart, 1<<20, false)
			st.listOffsets(p, 0)
			st.listOffsets(p, diskless.ListOffsetsMaxTimestamp)
		}
	})
}

// TestStoredConfigThatNoLongerParses: a catalog record whose configs this
// version refuses keeps the topic, with default values and a warning.
func TestStoredConfigThatNoLongerParses(t *testing.T) {
	e := newEnv(t, 1)
	id := diskless.TopicID{0x42}
	e.admin(0, &records.PartitionCreated{TopicID: id, TopicName: "old", Partition: 0},
		&records.TopicConfig{TopicID: id, TopicName: "old", NumPartitions: 1,
			Configs: []records.TopicConfigEntry{{Name: "retention.ms", Value: "forever"}}})
	for _, stage := range []string{"online", "after restart"} {
		top, ok := e.c.Topic("old")
		if !ok || top.Config.RetentionMs != topicconfig.DefaultRetentionMs || top.Config.Raw["retention.ms"] != "forever" {
			t.Fatalf("%s: %+v %v", stage, top, ok)
		}
		if !strings.Contains(e.logs.String(), "no longer parses") {
			t.Fatalf("%s: no warning", stage)
		}
		e.reopen()
	}
}
