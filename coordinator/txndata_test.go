package coordinator

import (
	"reflect"
	"testing"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// txnData returns a transactional batch of n records of producer pid.
func txnData(t diskless.Topic, partition int32, pid int64, baseSeq, n int32) diskless.CommitBatch {
	b := idem(t, partition, pid, 0, baseSeq, n)
	b.Txn = diskless.TxnData
	return b
}

// marker returns producer pid's COMMIT or ABORT marker.
func marker(t diskless.Topic, partition int32, pid int64, commit bool) diskless.CommitBatch {
	b := plain(t, partition, 1)
	b.ProducerID, b.ProducerEpoch = pid, 0
	b.Txn = diskless.TxnAbort
	if commit {
		b.Txn = diskless.TxnCommit
	}
	return b
}

func (e *env) findCommitted(t diskless.Topic, partition int32, offset int64) diskless.FindBatchesResult {
	return e.c.FindBatches(e.t.Context(), []diskless.FindBatchesRequest{{TopicID: t.ID, Partition: partition, Offset: offset, MaxBytes: 1 << 20, ReadCommitted: true}})[0]
}

// TestPartitionTransactions: a partition's last stable offset stays at the
// first batch of its earliest open transaction until that transaction's
// marker is committed; a read_committed FindBatches returns no run from it
// on and lists the aborted transactions overlapping what it returns; a
// marker for a producer with no open transaction changes nothing; the
// state (open and aborted transactions) is the same after replaying the
// log and after loading a snapshot, and the log start offset drops the
// aborted transactions whose marker is below it (SPEC §15).
func TestPartitionTransactions(t *testing.T) {
	replayAndSnapshot(t, func(t *testing.T, e *env) {
		top := e.createTopic("t", 1, nil)
		lso := func(want, wantHWM int64) {
			t.Helper()
			r := e.findCommitted(top, 0, e.find(top, 0, 0, 0).LogStartOffset)
			if r.Err != nil || r.LastStableOffset != want || r.HighWatermark != wantHWM {
				t.Fatalf("LSO %d HWM %d err %v, want %d, %d", r.LastStableOffset, r.HighWatermark, r.Err, want, wantHWM)
			}
			for _, run := range r.Runs {
				if run.BaseOffset >= want {
					t.Fatalf("read_committed run at %d, LSO %d", run.BaseOffset, want)
				}
			}
		}
		// 0: plain; 1–2: producer 7; 3: producer 8; 4: plain.
		e.commit(nextKey(), plain(top, 0, 1), txnData(top, 0, 7, 0, 2))
		e.commit(nextKey(), txnData(top, 0, 8, 0, 1), plain(top, 0, 1))
		lso(1, 5)
		if r := e.findCommitted(top, 0, 1); len(r.Runs) != 0 || r.Err != nil {
			t.Fatalf("read_committed at the LSO: %+v", r)
		}
		if r := e.find(top, 0, 1, 1<<20); len(r.Runs) == 0 || r.LastStableOffset != 1 {
			t.Fatalf("read_uncommitted at 1: %+v", r)
		}
		// 5: producer 7 aborts; 6: a marker of a producer with none open.
		e.commit(nextKey(), marker(top, 0, 7, false), marker(top, 0, 9, true))
		lso(3, 7)
		r := e.findCommitted(top, 0, 0)
		if want := []diskless.AbortedTxn{{ProducerID: 7, FirstOffset: 1, LastOffset: 5}}; !reflect.DeepEqual(r.Aborted, want) {
			t.Fatalf("aborted %+v, want %+v", r.Aborted, want)
		}
		// 7: producer 8 commits: nothing open.
		e.commit(nextKey(), marker(top, 0, 8, true))
		lso(8, 8)
		if r := e.findCommitted(top, 0, 6); len(r.Aborted) != 0 {
			t.Fatalf("aborted from 6: %+v", r.Aborted)
		}
		// 8–9: producer 7 again, open across a restart.
		e.commit(nextKey(), txnData(top, 0, 7, 2, 2))
		lso(8, 10)
		e.reopenSame()
		lso(8, 10)
		if r := e.findCommitted(top, 0, 0); len(r.Aborted) != 1 {
			t.Fatalf("aborted after restart: %+v", r.Aborted)
		}
		// The log start past the abort's marker drops it.
		if _, err := e.c.DeleteRecords(t.Context(), diskless.TopicPartition{TopicID: top.ID, Partition: 0}, 6); err != nil {
			t.Fatal(err)
		}
		if r := e.findCommitted(top, 0, 6); len(r.Aborted) != 0 || r.LastStableOffset != 8 {
			t.Fatalf("after DeleteRecords: %+v", r)
		}
		e.commit(nextKey(), marker(top, 0, 7, false))
		lso(11, 11)
		e.reopenSame()
		if r := e.findCommitted(top, 0, 6); !reflect.DeepEqual(r.Aborted, []diskless.AbortedTxn{{ProducerID: 7, FirstOffset: 8, LastOffset: 10}}) {
			t.Fatalf("aborted: %+v", r.Aborted)
		}
	})
}

// replayAndSnapshot runs test on a coordinator of one shard whose state
// is rebuilt by replaying its log (env.reopenSame), and on one that
// snapshots after every record, so that it loads a snapshot.
func replayAndSnapshot(t *testing.T, test func(t *testing.T, e *env)) {
	for _, snap := range []bool{false, true} {
		t.Run(map[bool]string{false: "replay", true: "snapshot"}[snap], func(t *testing.T) {
			test(t, newEnv(t, 1, func(c *Config) {
				if snap {
					c.SnapshotIntervalRecords = 1
				}
			}))
		})
	}
}

// TestTxnBatchChecks: a batch of an unknown transaction kind, a
// transactional batch without a producer id, and a marker of more than
// one record are refused with INVALID_RECORD.
func TestTxnBatchChecks(t *testing.T) {
	e := newEnv(t, 1)
	top := e.createTopic("t", 1, nil)
	bad := txnData(top, 0, 7, 0, 1)
	bad.Txn = 4
	noPID := plain(top, 0, 1)
	noPID.Txn = diskless.TxnData
	long := marker(top, 0, 7, true)
	long.LastOffsetDelta = 1
	for _, b := range []diskless.CommitBatch{bad, noPID, long} {
		if res := e.commit(nextKey(), b); resName(res[0]) != "INVALID_RECORD" {
			t.Errorf("Txn %d, producer %d: %s", b.Txn, b.ProducerID, resName(res[0]))
		}
	}
}

// TestDeleteRecordsPastOpenTransaction: as Kafka, DeleteRecords (and
// retention, which moves the log start the same way) may pass the first
// offset of an open transaction — Kafka checks only the high watermark —
// and the last stable offset is then the log start offset; the
// transaction stays open with its first offset below the log start, so
// its abort lists it for a read_committed fetch from the log start, whose
// consumer drops the producer's records up to the marker (SPEC §15). The
// state survives a snapshot taken meanwhile: before, the snapshot's reader
// refused an open transaction below the log start and the shard did not
// open again.
func TestDeleteRecordsPastOpenTransaction(t *testing.T) {
	e := newEnv(t, 1, func(c *Config) { c.SnapshotIntervalRecords = 1 })
	top := e.createTopic("t", 1, nil)
	tp := diskless.TopicPartition{TopicID: top.ID, Partition: 0}
	// 0–1: producer 7's open transaction; 2: plain; 3: producer 7 again.
	e.commit(nextKey(), txnData(top, 0, 7, 0, 2), plain(top, 0, 1))
	e.commit(nextKey(), txnData(top, 0, 7, 2, 1))
	if low, err := e.c.DeleteRecords(t.Context(), tp, 2); err != nil || low != 2 {
		t.Fatalf("DeleteRecords to 2: %d, %v", low, err)
	}
	check := func(when string, wantLSO, wantHWM int64, wantAborted []diskless.AbortedTxn) {
		t.Helper()
		r := e.findCommitted(top, 0, 2)
		if r.Err != nil || r.LogStartOffset != 2 || r.LastStableOffset != wantLSO || r.HighWatermark != wantHWM || !reflect.DeepEqual(r.Aborted, wantAborted) {
			t.Fatalf("%s: log start %d, LSO %d, HWM %d, aborted %+v, err %v; want 2, %d, %d, %+v",
				when, r.LogStartOffset, r.LastStableOffset, r.HighWatermark, r.Aborted, r.Err, wantLSO, wantHWM, wantAborted)
		}
	}
	check("open", 2, 4, nil)
	// The snapshot of this state loads (the periodic snapshots run
	// asynchronously: decode one here).
	for i, b := range stateBytes(e.c) {
		if err := newState(int32(i), DefaultProducerIDExpirationMs, discardLogger()).decodeSnapshot(b); err != nil {
			t.Fatalf("shard %d: the snapshot of an open transaction below the log start: %v", i, err)
		}
	}
	e.reopenSame()
	check("open, after a restart", 2, 4, nil)
	// 4: the abort.
	e.commit(nextKey(), marker(top, 0, 7, false))
	aborted := []diskless.AbortedTxn{{ProducerID: 7, FirstOffset: 0, LastOffset: 4}}
	check("aborted", 5, 5, aborted)
	e.reopenSame()
	check("aborted, after a restart", 5, 5, aborted)
}
