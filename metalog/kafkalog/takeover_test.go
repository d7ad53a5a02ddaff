package kafkalog

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-sidecar/sidecar/metalog"
)

// snapshotAt prepares and stores a snapshot at index.
func snapshotAt(t *testing.T, l metalog.Log, index int64, payload string) {
	t.Helper()
	ctx := context.Background()
	if err := l.PrepareSnapshot(ctx, index); err != nil {
		t.Fatal(err)
	}
	if err := l.WriteSnapshot(ctx, index, []byte(payload)); err != nil {
		t.Fatal(err)
	}
}

// testTruncatedUnderStart: a new owner reads the latest snapshot; the old
// owner, not fenced yet (the new one has not claimed), stores a newer one
// and truncates before it. The new owner's Replay from the snapshot it
// read fails with ErrTruncated — not ErrCorrupt, which makes
// coordinator.Open give up — and starting again from the latest snapshot
// takes the shard over with every record; the old owner is fenced.
func testTruncatedUnderStart(t *testing.T, e *env) {
	tp, _ := e.topic(t, 1)
	ctx := context.Background()
	old := openShard(t, tp)
	replayAll(t, old, 0)
	mustAppend(t, old, group("a", 3))
	snapshotAt(t, old, 3, "s3")
	cur := openShard(t, tp)
	if idx, p, err := cur.ReadSnapshot(ctx); err != nil || idx != 3 || string(p) != "s3" {
		t.Fatalf("ReadSnapshot = %d, %q, %v; want the snapshot at 3", idx, p, err)
	}
	mustAppend(t, old, group("b", 2))
	snapshotAt(t, old, 5, "s5")
	if err := old.TruncateBefore(ctx, 5); err != nil {
		t.Fatalf("the old owner's TruncateBefore: %v", err)
	}
	tail := group("c", 2)
	mustAppend(t, old, tail)
	if _, err := cur.Replay(ctx, 3, func(int64, []byte) error { return nil }); !errors.Is(err, metalog.ErrTruncated) {
		t.Fatalf("the new owner's Replay(3) after the old owner truncated before 5: %v, want ErrTruncated", err)
	}
	idx, p, err := cur.ReadSnapshot(ctx)
	if err != nil || idx != 5 || string(p) != "s5" {
		t.Fatalf("ReadSnapshot again = %d, %q, %v; want the snapshot at 5", idx, p, err)
	}
	if got, next := replayAll(t, cur, 5); fmt.Sprint(got) != fmt.Sprint(strs(tail)) || next != 7 {
		t.Fatalf("the new owner replays %v (next %d) from 5, want %v (next 7)", got, next, strs(tail))
	}
	if err := old.Append(ctx, group("zombie", 1)); !errors.Is(err, metalog.ErrFenced) {
		t.Fatalf("the old owner's Append: %v, want ErrFenced", err)
	}
	mustAppend(t, cur, group("d", 1))
}

// testCheckContiguity: an Append's records get offsets from the writer's
// position on, but not consecutive ones — another writer's claim landed
// between two of its batches, and the records after the claim do not
// count for anyone. The check must not count the group as this writer's
// (it reads what is between and finds the writer fenced).
func testCheckContiguity(t *testing.T, e *env) {
	tp, _ := e.topic(t, 1)
	ctx := context.Background()
	w := openShard(t, tp)
	replayAll(t, w, 0)
	g1 := group("g1", 1)
	mustAppend(t, w, g1)
	n := openShard(t, tp) // a writer whose claim is produced by hand
	rec := func(k recordKey, v string) *kgo.Record {
		return &kgo.Record{Partition: 0, Key: k.appendTo(nil), Value: []byte(v)}
	}
	a := rec(recordKey{kind: kindRecord, epoch: w.st.epoch, index: w.st.next, parts: 1}, "a")
	c := n.claimRecord(w.st.epoch)
	b := rec(recordKey{kind: kindRecord, epoch: w.st.epoch, index: w.st.next + 1, parts: 1, flags: flagGroupEnd}, "b")
	produceRaw(t, tp, a, c, b)
	if a.Offset != w.pos {
		t.Fatalf("the group's first record at offset %d, want the writer's position %d", a.Offset, w.pos)
	}
	w.mu.Lock()
	err := w.check(ctx, []*kgo.Record{a, b}, 2)
	w.mu.Unlock()
	if !errors.Is(err, metalog.ErrFenced) {
		t.Fatalf("the check of a group split by a takeover (offsets %d, %d; the claim at %d): %v, want ErrFenced", a.Offset, b.Offset, c.Offset, err)
	}
	if got, _ := replayAll(t, n, 0); fmt.Sprint(got) != fmt.Sprint(strs(g1)) {
		t.Fatalf("the new owner replays %v, want %v", got, strs(g1))
	}
}

// testFailedAppendSettled: an Append fails after all of its records
// landed, after only the first of them (a torn group), or before any did.
// The same handle's Replay settles it — the whole group counts, the rest
// never does — the writer appends on under its new claim, and a new
// owner replays the same.
func testFailedAppendSettled(t *testing.T, e *env) {
	for _, tc := range []struct {
		name   string
		landed func(n int) int
		counts bool
	}{
		{"whole", func(n int) int { return n }, true},
		{"torn", func(int) int { return 1 }, false},
		{"none", func(int) int { return 0 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp, _ := e.topic(t, 1)
			ctx := context.Background()
			l := openShard(t, tp)
			replayAll(t, l, 0)
			g1, g2, g3 := group("g1", 2), group("g2", 3), group("g3", 1)
			mustAppend(t, l, g1)
			l.produceFault = func(recs []*kgo.Record) int { l.produceFault = nil; return tc.landed(len(recs)) }
			if err := l.Append(ctx, g2); err == nil || errors.Is(err, metalog.ErrFenced) {
				t.Fatalf("the failing Append: %v, want an error other than ErrFenced", err)
			}
			if err := l.Append(ctx, g3); err == nil {
				t.Fatal("an Append after a failed one, before Replay: nil, want an error")
			}
			want := strs(g1)
			if tc.counts {
				want = strs(g1, g2)
			}
			if got, next := replayAll(t, l, 0); fmt.Sprint(got) != fmt.Sprint(want) || next != int64(len(want)) {
				t.Fatalf("the writer replays %v (next %d), want %v", got, next, want)
			}
			mustAppend(t, l, g3)
			want = append(want, strs(g3)...)
			cur := openShard(t, tp)
			if got, next := replayAll(t, cur, 0); fmt.Sprint(got) != fmt.Sprint(want) || next != int64(len(want)) {
				t.Fatalf("a new owner replays %v (next %d), want %v", got, next, want)
			}
		})
	}
}
