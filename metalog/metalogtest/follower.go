package metalogtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/metalog"
)

// FollowStore is one test's set of shard logs of a backend under
// RunFollower: a writer and followers of each shard.
type FollowStore interface {
	Open(shard int32) (metalog.Log, error)
	Follow(shard int32) (metalog.Follower, error)
}

// RunFollower checks a backend's followers against the metalog.Follower
// contract: a follower of an empty log has nothing and waits; it sees
// every group the writer appended, whole and in order, from any index,
// without being reopened; a Wait started before an Append returns after
// it; a snapshot and a truncation by the writer show as the snapshot and
// ErrTruncated below it; a follower fences nothing; Close ends a Wait.
func RunFollower(t *testing.T, newStore func(t *testing.T) FollowStore) {
	ctx := context.Background()
	t.Run("FollowsTheWriter", func(t *testing.T) {
		st := newStore(t)
		w := mustOpen(t, st)
		if _, err := w.Replay(ctx, 0, func(int64, []byte) error { return nil }); err != nil {
			t.Fatal(err)
		}
		f, err := st.Follow(0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if got, next := followReplay(t, f, 0); next != 0 || len(got) != 0 {
			t.Fatalf("empty log: %d records, next %d", len(got), next)
		}
		short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		err = f.Wait(short, 0)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait on an empty log: %v, want the deadline", err)
		}

		// A Wait started before the Append returns after it.
		waited := make(chan error, 1)
		go func() { waited <- f.Wait(ctx, 0) }()
		var want [][]byte
		for i, n := range []int{3, 1, 2} {
			g := bodies(fmt.Sprintf("f%d", i), n)
			if err := w.Append(ctx, g); err != nil {
				t.Fatal(err)
			}
			want = append(want, g...)
			if i == 0 {
				if err := <-waited; err != nil {
					t.Fatalf("Wait across an Append: %v", err)
				}
			}
		}
		for _, from := range []int64{0, 2, 3, 6} {
			got, next := followReplay(t, f, from)
			if next != 6 || !slices.EqualFunc(got, want[from:], slices.Equal) {
				t.Fatalf("Replay from %d: %q next %d, want %q next 6", from, got, next, want[from:])
			}
		}
		if err := f.Wait(ctx, 5); err != nil {
			t.Fatalf("Wait for a record there already: %v", err)
		}
		// The follower fenced nothing: the writer appends on.
		if err := w.Append(ctx, bodies("after", 1)); err != nil {
			t.Fatalf("the writer after a follower read: %v", err)
		}
		if got, next := followReplay(t, f, 6); next != 7 || len(got) != 1 {
			t.Fatalf("the next group: %d records, next %d", len(got), next)
		}
		// Close ends a Wait.
		go func() { waited <- f.Wait(ctx, 7) }()
		f.Close()
		if err := <-waited; !errors.Is(err, metalog.ErrClosed) {
			t.Fatalf("Wait across Close: %v", err)
		}
		if _, err := f.Replay(ctx, 0, func(int64, []byte) error { return nil }); !errors.Is(err, metalog.ErrClosed) {
			t.Fatalf("Replay after Close: %v", err)
		}
	})

	t.Run("Truncated", func(t *testing.T) {
		st := newStore(t)
		w := mustOpen(t, st)
		if _, err := w.Replay(ctx, 0, func(int64, []byte) error { return nil }); err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			if err := w.Append(ctx, bodies(fmt.Sprintf("t%d", i), 2)); err != nil {
				t.Fatal(err)
			}
		}
		f, err := st.Follow(0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := w.PrepareSnapshot(ctx, 8); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteSnapshot(ctx, 8, []byte("state@8")); err != nil {
			t.Fatal(err)
		}
		if err := w.TruncateBefore(ctx, 8); err != nil {
			t.Fatal(err)
		}
		if err := w.Append(ctx, bodies("t4", 1)); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Replay(ctx, 2, func(int64, []byte) error { return nil }); !errors.Is(err, metalog.ErrTruncated) {
			t.Fatalf("Replay below the truncation: %v, want ErrTruncated", err)
		}
		idx, payload, err := f.ReadSnapshot(ctx)
		if err != nil || idx != 8 || string(payload) != "state@8" {
			t.Fatalf("ReadSnapshot: %d %q %v", idx, payload, err)
		}
		if got, next := followReplay(t, f, 8); next != 9 || len(got) != 1 || string(got[0]) != "t4-0-" {
			t.Fatalf("Replay from the snapshot: %q next %d", got, next)
		}
	})
}

func mustOpen(t *testing.T, st FollowStore) metalog.Log {
	t.Helper()
	l, err := st.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// followReplay replays f from from and returns copies of the bodies.
func followReplay(t *testing.T, f metalog.Follower, from int64) ([][]byte, int64) {
	t.Helper()
	var got [][]byte
	next, err := f.Replay(context.Background(), from, func(i int64, b []byte) error {
		if i != from+int64(len(got)) {
			return fmt.Errorf("record %d after %d records from %d", i, len(got), from)
		}
		got = append(got, slices.Clone(b))
		return nil
	})
	if err != nil {
		t.Fatalf("Replay from %d: %v", from, err)
	}
	return got, next
}
