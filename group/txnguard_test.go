package group

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnCommitReq is a TxnOffsetCommit v3 of producer (9, 1) for group g, no
// member, of offset for partitions 0 and 1 of t.
func txnCommitReq(offset int64) *kmsg.TxnOffsetCommitRequest {
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.Version, r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch, r.Generation = 3, "tx", "g", 9, 1, -1
	r.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{
		{Partition: 0, Offset: offset, LeaderEpoch: -1}, {Partition: 1, Offset: offset, LeaderEpoch: -1},
	}}}
	return r
}

// wantTxnCommit calls CommitTxnOffsets with token seq and checks every
// partition's answer is want, with a record exactly when want is nil
// (applied then), and none pending when refused.
func wantTxnCommit(h *harness, what string, offset, seq int64, want *kerr.Error) {
	h.t.Helper()
	resp, rec := h.c.CommitTxnOffsets(h.now, txnCommitReq(offset), seq)
	for _, p := range resp.Topics[0].Partitions {
		wantCode(h.t, what, p.ErrorCode, want)
	}
	switch {
	case want == nil && rec == nil:
		h.t.Fatalf("%s: no record", what)
	case want == nil:
		if rec.TxnSeq != seq {
			h.t.Fatalf("%s: record token %d, want %d", what, rec.TxnSeq, seq)
		}
		h.apply(rec)
	case rec != nil:
		h.t.Fatalf("%s: refused but wrote %+v", what, rec)
	case h.c.Offsets().HasPending("g", "t", 0) || h.c.Offsets().HasPending("g", "t", 1):
		h.t.Fatalf("%s: refused but an offset is pending", what)
	}
}

// TestTxnOffsetsGuard drives the window between TxnOffsetCommit's check
// and its write on the group's shard (DESIGN §Transactions, the offsets'
// guard): the check answered transaction 3 as open; its record 110 then
// ends it here; the record 107 the check allowed is refused at the write
// with INVALID_TXN_STATE on every partition, and nothing of it is
// pending. The producer's next transaction writes; a record 110 decided
// earlier in the same group commit, not applied yet, refuses as well;
// one whose write failed (ReplaceOffsets) does not; a token of 0 (not
// known) is never refused; the guard lasts producer.id.expiration.ms.
func TestTxnOffsetsGuard(t *testing.T) {
	h := newHarness(t, Config{})
	h.c.Offsets().SetProducerIDExpiration(time.Hour.Milliseconds())

	// Transaction 3 ends (aborted) between the check and the write.
	h.apply(h.c.EndTxnOffsets(h.now, 9, 1, 3, false))
	wantTxnCommit(h, "transaction 3's offsets after its record 110", 5, 3, kerr.InvalidTxnState)
	wantTxnCommit(h, "an earlier transaction's", 5, 2, kerr.InvalidTxnState)
	if _, ok := h.c.Offsets().Get("g", "t", 0); ok {
		t.Fatal("a refused offset is committed")
	}
	wantTxnCommit(h, "a token not known", 6, 0, nil)
	h.apply(&TxnOffsetsEndedRecord{ProducerID: 9, ProducerEpoch: 1})
	wantTxnCommit(h, "transaction 4", 7, 4, nil)
	h.apply(h.c.EndTxnOffsets(h.now, 9, 1, 4, true))
	if v, _ := h.c.Offsets().Get("g", "t", 0); v.Offset != 7 {
		t.Fatalf("transaction 4 committed %d, want 7", v.Offset)
	}

	// Transaction 5's record 110 decided in the same group commit, before
	// the write: refused although not applied yet.
	end5 := h.c.EndTxnOffsets(h.now, 9, 1, 5, true)
	wantTxnCommit(h, "transaction 5's offsets behind its record 110 in one group commit", 8, 5, kerr.InvalidTxnState)
	h.apply(end5)
	if v, _ := h.c.Offsets().Get("g", "t", 0); v.Offset != 7 {
		t.Fatalf("after transaction 5: %d, want 7", v.Offset)
	}

	// Transaction 6's record 110 not written (the append failed, the
	// table rebuilt from the log): transaction 6's offsets are not refused.
	h.c.EndTxnOffsets(h.now, 9, 1, 6, true)
	h.c.ReplaceOffsets(h.c.Offsets())
	wantTxnCommit(h, "transaction 6 after its record 110 failed", 9, 6, nil)
	h.apply(h.c.EndTxnOffsets(h.now, 9, 1, 6, true))

	// Another producer is not refused by producer 9's guard.
	other := txnCommitReq(10)
	other.ProducerID = 10
	if resp, rec := h.c.CommitTxnOffsets(h.now, other, 6); rec == nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("another producer refused: %+v", resp)
	}

	// The guard lasts producer.id.expiration.ms from its record 110.
	h.now = h.now.Add(time.Hour - time.Millisecond)
	wantTxnCommit(h, "transaction 6 just before the expiration", 11, 6, kerr.InvalidTxnState)
	h.now = h.now.Add(time.Millisecond)
	wantTxnCommit(h, "transaction 6 at the expiration", 11, 6, nil)
}

// TestOffsetsGuardApply: the table applies the guard too, so a log holds
// the same state whoever wrote it: a record 107 written after its
// transaction's record 110 (by a sidecar without the guard) changes
// nothing on replay, a later transaction's applies; a record 110 without
// a time (written before it) remembers nothing; the entries expire and
// are swept as the clock of the records 110 moves, so the table stays
// bounded.
func TestOffsetsGuardApply(t *testing.T) {
	const expiration = 120_000
	commit := func(o *Offsets, pid, seq, at int64) {
		o.Apply(&OffsetCommitRecord{Group: "g", CommitTimestamp: at, ProducerID: pid, ProducerEpoch: 1, TxnSeq: seq,
			Topics: []CommitTopic{{Name: "t", Partitions: []CommitPartition{{Offset: seq}}}}})
	}
	o := NewOffsets()
	o.SetProducerIDExpiration(expiration)
	o.Apply(&TxnOffsetsEndedRecord{ProducerID: 7, TxnSeq: 3, Timestamp: 1_000})
	commit(o, 7, 3, 1_001)
	if o.HasPending("g", "t", 0) {
		t.Fatal("a record 107 after its transaction's record 110 is pending")
	}
	commit(o, 7, 4, 1_002)
	if !o.HasPending("g", "t", 0) {
		t.Fatal("the next transaction's record 107 is not pending")
	}
	o.Apply(&TxnOffsetsEndedRecord{ProducerID: 7, TxnSeq: 4, Committed: true, Timestamp: 1_003})

	// A record 110 written before the guard (no time) remembers nothing.
	o.Apply(&TxnOffsetsEndedRecord{ProducerID: 8, TxnSeq: 3})
	commit(o, 8, 3, 1_004)
	if !o.HasPending("g", "t", 0) {
		t.Fatal("a record 110 without a time refused a record 107")
	}
	o.Apply(&TxnOffsetsEndedRecord{ProducerID: 8, TxnSeq: 3})

	// Expired at 1_003 + expiration: not refused, then swept.
	commit(o, 7, 4, 1_003+expiration)
	if !o.HasPending("g", "t", 0) {
		t.Fatal("an expired guard refused a record 107")
	}
	if _, ok := o.ended[7]; !ok {
		t.Fatal("swept before a record 110 moved the clock")
	}
	o.Apply(&TxnOffsetsEndedRecord{ProducerID: 9, TxnSeq: 1, Timestamp: 1_003 + expiration + endedSweepIntervalMs})
	if _, ok := o.ended[7]; ok || len(o.ended) != 1 {
		t.Fatalf("after the sweep: %v, want producer 9's alone", o.ended)
	}
}

// TestOffsetsGuardSnapshot: the guard is in the offsets snapshot (the
// section's tagged field 0, docs/format/metadata-records.md
// §Consumer-group offsets in snapshots), pinned byte for byte, refused
// when malformed; a table loaded from it refuses what the table did; a
// section written before it (no tag) loads with nothing remembered.
func TestOffsetsGuardSnapshot(t *testing.T) {
	o := NewOffsets()
	o.Apply(&TxnOffsetsEndedRecord{ProducerID: 9, TxnSeq: 5, Timestamp: 258})
	o.Apply(&TxnOffsetsEndedRecord{ProducerID: 2, TxnSeq: 1, Timestamp: 255})
	if o.Empty() {
		t.Fatal("a table holding a guard is Empty: the shard would write no section")
	}
	b := o.AppendSnapshot(nil)
	// Version 1, no groups, no pending, tags {0: clock 258, ended
	// [(2, 1, 255), (9, 5, 258)]}.
	entry := func(pid, seq, at string) string { return pid + seq + at + "00" }
	guard := "0000000000000102" + "03" +
		entry("0000000000000002", "0000000000000001", "00000000000000ff") +
		entry("0000000000000009", "0000000000000005", "0000000000000102")
	if got, want := hex.EncodeToString(b), "01"+"01"+"01"+"01"+"00"+"3b"+guard; got != want {
		t.Fatalf("snapshot %s, want %s", got, want)
	}
	got, rest, err := DecodeSnapshot(b)
	if err != nil || len(rest) != 0 || !bytes.Equal(got.AppendSnapshot(nil), b) {
		t.Fatalf("round trip: %v", err)
	}
	if !got.reached(9, 5, 300) || got.reached(9, 6, 300) || !got.reached(2, 1, 300) {
		t.Fatalf("loaded guard: %v", got.ended)
	}

	// A section written before the guard: nothing remembered.
	old := NewOffsets()
	old.Apply(&OffsetCommitRecord{Group: "g", ProducerID: 9, ProducerEpoch: 1, TxnSeq: 6, Topics: []CommitTopic{{Name: "t", Partitions: []CommitPartition{{}}}}})
	ob := old.AppendSnapshot(nil)
	if !strings.HasSuffix(hex.EncodeToString(ob), "0000000000000006"+"00") {
		t.Fatalf("a table without a guard writes a tag: %x", ob)
	}
	if got, _, err := DecodeSnapshot(ob); err != nil || len(got.ended) != 0 || got.clock != 0 {
		t.Fatalf("old section: %v, %v", err, got)
	}

	// Malformed guards are refused.
	head := "01" + "01" + "01" + "01" + "00"
	tag := func(body string) []byte {
		b, _ := hex.DecodeString(body)
		out := []byte{1, 1, 1, 1, 0, byte(len(b))}
		return append(out, b...)
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"clock 0", tag("0000000000000000" + "01")},
		{"token 0", tag("0000000000000102" + "02" + entry("0000000000000009", "0000000000000000", "0000000000000102"))},
		{"time 0", tag("0000000000000102" + "02" + entry("0000000000000009", "0000000000000001", "0000000000000000"))},
		{"time after the clock", tag("0000000000000102" + "02" + entry("0000000000000009", "0000000000000001", "0000000000000103"))},
		{"producers out of order", tag("0000000000000102" + "03" +
			entry("0000000000000009", "0000000000000001", "0000000000000102") + entry("0000000000000002", "0000000000000001", "0000000000000102"))},
		{"bytes left in the tag", tag("0000000000000102" + "01" + "00")},
		{"entries past the tag", tag("0000000000000102" + "02")},
		{"truncated", b[:len(b)-1]},
	} {
		if _, _, err := DecodeSnapshot(tc.b); !errors.Is(err, ErrBadRecord) {
			t.Errorf("%s (%x after %s): %v", tc.name, tc.b[5:], head, err)
		}
	}
}
