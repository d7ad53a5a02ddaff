package coordinator

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/tagged"
)

// describeProducers returns DescribeProducers' answer for tp, one line per
// producer (id, epoch, last sequence, last timestamp, coordinator epoch,
// open transaction's first offset), failing the test on an error.
func describeProducers(t *testing.T, c *Coordinator, tp diskless.TopicPartition) []string {
	t.Helper()
	ps, kErr := c.DescribeProducers(tp)
	if kErr != nil {
		t.Fatalf("DescribeProducers: %v", kErr)
	}
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%d epoch %d seq %d ts %d coordinator epoch %d txn %d",
			p.ProducerID, p.ProducerEpoch, p.LastSequence, p.LastTimestamp, p.CoordinatorEpoch, p.CurrentTxnStartOffset))
	}
	return out
}

// wantProducers fails the test unless DescribeProducers answers lines for
// tp (describeProducers' form), live and again once e reopened on its log
// (replaying it, or from its snapshot).
func wantProducers(t *testing.T, e *env, what string, tp diskless.TopicPartition, lines ...string) {
	t.Helper()
	if got := describeProducers(t, e.c, tp); !reflect.DeepEqual(got, lines) {
		t.Fatalf("%s: producers %q, want %q", what, got, lines)
	}
	e.reopenSame()
	if got := describeProducers(t, e.c, tp); !reflect.DeepEqual(got, lines) {
		t.Fatalf("%s, reopened: producers %q, want %q", what, got, lines)
	}
}

// commitOK commits b alone, failing the test if it is refused.
func commitOK(t *testing.T, e *env, what string, b diskless.CommitBatch) {
	t.Helper()
	if r := e.commit(nextKey(), b)[0]; r.Err != nil {
		t.Fatalf("%s: %v", what, r.Err)
	}
}

// commitNow is commitOK of b stamped with the test clock's time (its
// BatchMaxTimestamp), as the writer of a marker stamps it.
func commitNow(t *testing.T, e *env, what string, b diskless.CommitBatch) {
	t.Helper()
	b.BatchMaxTimestamp = e.clock.Ms()
	commitOK(t, e, what, b)
}

// TestProducerStateAfterMarkers: a marker updates its producer's state in
// the partition as Kafka's does (SPEC §15) — a producer that only had a
// marker there is listed by DescribeProducers at the marker's epoch, with
// no sequence and the marker's time; a marker of the producer's epoch
// keeps its sequences and takes its time; one of a newer epoch takes that
// epoch and forgets the sequences, so the producer's next batch must start
// at 0 (an older epoch's batch is refused); one of an older epoch is
// refused (INVALID_PRODUCER_EPOCH) and changes nothing. The same after replaying the log and after loading a snapshot
// (state equal to the live one), and a marker's producer state expires
// producer.id.expiration.ms after the marker like a batch's.
func TestProducerStateAfterMarkers(t *testing.T) {
	replayAndSnapshot(t, func(t *testing.T, e *env) {
		top := e.createTopic("t", 2, nil)
		tp0 := diskless.TopicPartition{TopicID: top.ID, Partition: 0}
		tp1 := diskless.TopicPartition{TopicID: top.ID, Partition: 1}
		// Each batch's and marker's timestamp is the clock's (commitNow).
		refused := func(what string, b diskless.CommitBatch, want error) {
			t.Helper()
			b.BatchMaxTimestamp = e.clock.Ms()
			if r := e.commit(nextKey(), b)[0]; r.Err != want {
				t.Fatalf("%s: %v, want %v", what, r.Err, want)
			}
		}
		markerAt := func(partition int32, pid int64, epoch int16, commit bool) diskless.CommitBatch {
			b := marker(top, partition, pid, commit)
			b.ProducerEpoch = epoch
			return b
		}
		dataAt := func(pid int64, epoch int16, baseSeq, n int32) diskless.CommitBatch {
			b := txnData(top, 0, pid, baseSeq, n)
			b.ProducerEpoch = epoch
			return b
		}
		want := func(what string, tp diskless.TopicPartition, lines ...string) {
			t.Helper()
			wantProducers(t, e, what, tp, lines...)
		}

		t0 := e.clock.Ms()
		commitNow(t, e, "producer 7's batch, epoch 2", dataAt(7, 2, 0, 2))
		want("after the batch", tp0, fmt.Sprintf("7 epoch 2 seq 1 ts %d coordinator epoch -1 txn 0", t0))

		// A marker of the same epoch: the sequences stay, its time counts.
		e.clock.Advance(time.Second)
		t1 := e.clock.Ms()
		commitNow(t, e, "its COMMIT, epoch 2", markerAt(0, 7, 2, true))
		want("after the same epoch's marker", tp0, fmt.Sprintf("7 epoch 2 seq 1 ts %d coordinator epoch 0 txn -1", t1))
		commitNow(t, e, "the next batch continues the sequence", dataAt(7, 2, 2, 1))

		// A producer with only a marker in the partition is listed.
		e.clock.Advance(time.Second)
		t2 := e.clock.Ms()
		commitNow(t, e, "producer 9's ABORT in a partition it never wrote", markerAt(1, 9, 3, false))
		want("after a marker alone", tp1, fmt.Sprintf("9 epoch 3 seq -1 ts %d coordinator epoch 0 txn -1", t2))

		// A marker of a newer epoch takes it and forgets the sequences.
		e.clock.Advance(time.Second)
		t3 := e.clock.Ms()
		commitNow(t, e, "producer 7's ABORT, epoch 3", markerAt(0, 7, 3, false))
		want("after the bumping marker", tp0, fmt.Sprintf("7 epoch 3 seq -1 ts %d coordinator epoch 0 txn -1", t3))
		refused("a batch of the epoch before", dataAt(7, 2, 3, 1), kerr.InvalidProducerEpoch)
		refused("a batch of the new epoch not at 0", dataAt(7, 3, 3, 1), kerr.OutOfOrderSequenceNumber)

		// A marker of an older epoch is refused at its commit, as Kafka's
		// leader refuses it at its append, and changes nothing.
		e.clock.Advance(time.Second)
		refused("producer 7's ABORT, epoch 1", markerAt(0, 7, 1, false), kerr.InvalidProducerEpoch)
		want("after an older epoch's marker", tp0, fmt.Sprintf("7 epoch 3 seq -1 ts %d coordinator epoch 0 txn -1", t3))

		t5 := e.clock.Ms()
		commitNow(t, e, "a batch of the new epoch at 0", dataAt(7, 3, 0, 1))
		want("after the new epoch's first batch", tp0, fmt.Sprintf("7 epoch 3 seq 0 ts %d coordinator epoch 0 txn 5", t5)) // the refused marker took no offset

		// Producer 9's state expires a day after its marker (the sweep
		// runs at a commit).
		e.clock.Set(time.UnixMilli(t2 + DefaultProducerIDExpirationMs))
		commitNow(t, e, "a batch of another producer", idem(top, 1, 11, 0, 0, 1))
		want("a day after the marker", tp1, fmt.Sprintf("11 epoch 0 seq 0 ts %d coordinator epoch -1 txn -1", e.clock.Ms()))
	})
}

// TestMarkerResentRefreshesEntry: the same transaction's marker again —
// its token reached, from a new owner of the id's shard at coordinator
// epoch 1 after the first's 0 — takes the epoch and refreshes the
// producer's entry as Kafka's marker append refreshes its timestamp: a
// day after the first marker (less than a day after the second) the
// entry still shows coordinator epoch 1 and refuses a marker of epoch 0
// (TRANSACTION_COORDINATOR_FENCED). Live, after replay and from a
// snapshot alike (SPEC §15).
func TestMarkerResentRefreshesEntry(t *testing.T) {
	replayAndSnapshot(t, func(t *testing.T, e *env) {
		top := e.createTopic("t", 1, nil)
		tp := diskless.TopicPartition{TopicID: top.ID, Partition: 0}
		want := func(what string, lines ...string) {
			t.Helper()
			wantProducers(t, e, what, tp, lines...)
		}
		commitNow(t, e, "producer 7's batch of transaction 1", withSeq(txnData(top, 0, 7, 0, 1), 1))
		t0 := e.clock.Ms()
		commitNow(t, e, "its ABORT, coordinator epoch 0", withEpoch(withSeq(marker(top, 0, 7, false), 1), 0))
		e.clock.Advance(time.Hour)
		t1 := e.clock.Ms()
		commitNow(t, e, "the same ABORT from the new owner, coordinator epoch 1", withEpoch(withSeq(marker(top, 0, 7, false), 1), 1))
		want("after the marker again", fmt.Sprintf("7 epoch 0 seq 0 ts %d coordinator epoch 1 txn -1", t1))

		// A day after the first marker: a commit sweeps the state.
		e.clock.Set(time.UnixMilli(t0 + DefaultProducerIDExpirationMs))
		commitNow(t, e, "a batch of another producer", idem(top, 0, 11, 0, 0, 1))
		want("a day after the first marker", fmt.Sprintf("7 epoch 0 seq 0 ts %d coordinator epoch 1 txn -1", t1),
			fmt.Sprintf("11 epoch 0 seq 0 ts %d coordinator epoch -1 txn -1", e.clock.Ms()))
		if r := e.commit(nextKey(), withEpoch(marker(top, 0, 7, false), 0))[0]; r.Err != kerr.TransactionCoordinatorFenced {
			t.Fatalf("a marker of coordinator epoch 0: %v, want TRANSACTION_COORDINATOR_FENCED", r.Err)
		}
	})
}

// TestProducerLastTimestamp: DescribeProducers' LastTimestamp is what
// Kafka's producer entry keeps (SPEC §15) — a CreateTime batch's
// maxTimestamp, not its log-append time; a LogAppendTime batch's
// log-append time, not the producer's timestamp; a marker's likewise —,
// and expiration still counts from the log-append time. Live, after
// replay and from a snapshot alike.
func TestProducerLastTimestamp(t *testing.T) {
	replayAndSnapshot(t, func(t *testing.T, e *env) {
		top := e.createTopic("t", 2, nil)
		want := func(what string, p int32, lines ...string) {
			t.Helper()
			wantProducers(t, e, what, diskless.TopicPartition{TopicID: top.ID, Partition: p}, lines...)
		}
		old := e.clock.Ms() - time.Hour.Milliseconds()
		ct := idem(top, 0, 7, 0, 0, 2)
		ct.BatchMaxTimestamp = old
		commitOK(t, e, "a CreateTime batch an hour old", ct)
		want("after the CreateTime batch", 0, fmt.Sprintf("7 epoch 0 seq 1 ts %d coordinator epoch -1 txn -1", old))

		lat := idem(top, 1, 8, 0, 0, 1)
		lat.BatchMaxTimestamp, lat.TimestampType = old, batch.TimestampLogAppendTime
		commitOK(t, e, "a LogAppendTime batch", lat)
		want("after the LogAppendTime batch", 1, fmt.Sprintf("8 epoch 0 seq 0 ts %d coordinator epoch -1 txn -1", e.clock.Ms()))

		e.clock.Advance(time.Second)
		m := marker(top, 0, 7, false)
		m.BatchMaxTimestamp = e.clock.Ms() - 10
		commitOK(t, e, "an ABORT stamped 10 ms before its commit", m)
		want("after the marker", 0, fmt.Sprintf("7 epoch 0 seq 1 ts %d coordinator epoch 0 txn -1", e.clock.Ms()-10))

		// Producer 7 expires a day after its marker's commit, not its
		// timestamp: 5 ms before, a commit (which sweeps) keeps it.
		e.clock.Set(time.UnixMilli(e.clock.Ms() - 5 + DefaultProducerIDExpirationMs))
		commitOK(t, e, "a batch of another producer", idem(top, 0, 11, 0, 0, 1))
		if got := describeProducers(t, e.c, diskless.TopicPartition{TopicID: top.ID, Partition: 0}); len(got) != 2 {
			t.Fatalf("a day after the marker's timestamp, before its commit's: producers %q, want 7's and 11's", got)
		}
	})
}

// TestProducerTimesTag: the snapshot's tag 7 round-trips the producers'
// timestamps that differ from their last write, omits the others (and
// the whole tag when none differs), and its loader refuses an unknown
// partition or producer, a repeated partition, producers out of order and
// a truncated field (docs/format/metadata-records.md §Snapshots).
func TestProducerTimesTag(t *testing.T) {
	tp := diskless.TopicPartition{TopicID: diskless.TopicID{1}, Partition: 0}
	fresh := func() *state {
		s := newState(0, DefaultProducerIDExpirationMs, nil)
		s.partitions[tp] = &partition{tp: tp, producers: map[int64]*producerState{
			3: {lastWrite: 50, lastTimestamp: 50}, 7: {lastWrite: 50, lastTimestamp: 50}}}
		return s
	}
	fz := &frozenState{partitions: []frozenPartition{{tp: tp, producers: []frozenProducer{
		{id: 3, ps: producerState{lastWrite: 50, lastTimestamp: 50}},
		{id: 7, ps: producerState{lastWrite: 50, lastTimestamp: 20}},
	}}}}
	b := fz.appendProducerTimes(nil)
	s := fresh()
	if err := s.readProducerTimes(&kbin.Reader{Src: b}); err != nil {
		t.Fatal(err)
	}
	if got := [2]int64{s.partitions[tp].producers[3].lastTimestamp, s.partitions[tp].producers[7].lastTimestamp}; got != [2]int64{50, 20} {
		t.Fatalf("round trip: timestamps %v, want [50 20]", got)
	}
	fz.partitions[0].producers[1].ps.lastTimestamp = 50
	if b := fz.appendProducerTimes(nil); b != nil {
		t.Fatalf("no timestamp differs: tag of %d bytes written", len(b))
	}
	field := func(tp diskless.TopicPartition, ids ...int64) []byte {
		f := kbin.AppendUuid(nil, tp.TopicID)
		f = kbin.AppendInt32(f, tp.Partition)
		f = kbin.AppendCompactArrayLen(f, len(ids))
		for _, id := range ids {
			f = kbin.AppendInt64(kbin.AppendInt64(f, id), 1)
			f = tagged.AppendNone(f)
		}
		return tagged.AppendNone(f)
	}
	other := diskless.TopicPartition{TopicID: diskless.TopicID{2}, Partition: 0}
	for name, b := range map[string][]byte{
		"unknown partition":   append(kbin.AppendCompactArrayLen(nil, 1), field(other, 7)...),
		"unknown producer":    append(kbin.AppendCompactArrayLen(nil, 1), field(tp, 9)...),
		"repeated partition":  append(append(kbin.AppendCompactArrayLen(nil, 2), field(tp, 7)...), field(tp, 3)...),
		"producers unordered": append(kbin.AppendCompactArrayLen(nil, 1), field(tp, 7, 3)...),
		"truncated":           append(kbin.AppendCompactArrayLen(nil, 1), field(tp, 7)[:30]...),
	} {
		if err := fresh().readProducerTimes(&kbin.Reader{Src: b}); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}

// TestExpiredProducerListedUntilSwept: a producer whose state expired is
// listed by DescribeProducers until a sweep drops it — at the shard's
// next commit —, as Kafka's leader lists it until its periodic check
// (SPEC §15), while a batch of it is already taken at any sequence.
func TestExpiredProducerListedUntilSwept(t *testing.T) {
	e := newEnv(t, 1)
	top := e.createTopic("t", 1, nil)
	tp := diskless.TopicPartition{TopicID: top.ID, Partition: 0}
	if r := e.commit(nextKey(), idem(top, 0, 7, 0, 0, 1))[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	e.clock.Advance(time.Duration(DefaultProducerIDExpirationMs) * time.Millisecond)
	if got := describeProducers(t, e.c, tp); len(got) != 1 {
		t.Fatalf("expired, no commit since: producers %q, want 7's", got)
	}
	if r := e.commit(nextKey(), idem(top, 0, 7, 0, 5, 1))[0]; r.Err != nil {
		t.Fatalf("producer 7's batch at sequence 5 once expired: %v", r.Err)
	}
	if got := describeProducers(t, e.c, tp); len(got) != 1 || got[0] != "7 epoch 0 seq 5 ts 1000 coordinator epoch -1 txn -1" {
		t.Fatalf("after the sweeping commit: producers %q, want 7's new state alone", got)
	}
	e.clock.Advance(time.Duration(DefaultProducerIDExpirationMs) * time.Millisecond)
	if r := e.commit(nextKey(), idem(top, 0, 11, 0, 0, 1))[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := describeProducers(t, e.c, tp); len(got) != 1 || got[0][:3] != "11 " {
		t.Fatalf("after another producer's commit a day later: producers %q, want 11's alone", got)
	}
}

// TestOlderEpochMarkerChangesNothing: a marker of an older producer epoch
// than the partition's producer state — refused at its commit since
// markerEpochStale, but possible in a log written before that check —
// changes nothing of the state when applied (replayed): not the epoch,
// the sequences, the last write, LastTimestamp nor the last offset
// (SPEC §15, docs/format/metadata-records.md record 102).
func TestOlderEpochMarkerChangesNothing(t *testing.T) {
	st := newState(0, time.Hour.Milliseconds(), discardLogger())
	p := &partition{}
	st.recordProducerBatch(p, nil, &records.CommittedBatch{
		ProducerID: 7, ProducerEpoch: 3, BaseSequence: 0, LastSequence: 1,
		AssignedBaseOffset: 0, AssignedLastOffset: 1, LogAppendTimestamp: 1_000, BatchMaxTimestamp: 900,
	})
	before := *p.producers[7]
	st.recordProducerMarker(p, p.producers[7], &records.CommittedBatch{
		ProducerID: 7, ProducerEpoch: 1, AssignedBaseOffset: 2, AssignedLastOffset: 2,
		LogAppendTimestamp: 2_000, BatchMaxTimestamp: 2_000,
	})
	if got := *p.producers[7]; got != before {
		t.Fatalf("producer 7 after a marker of epoch 1 on its epoch 3: %+v, want unchanged %+v", got, before)
	}
}
