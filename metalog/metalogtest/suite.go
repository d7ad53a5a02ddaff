// Package metalogtest holds what tests of metadata logs share: Run, the
// conformance suite every metalog.Log backend passes (the embedded file
// log, the in-memory log, a Kafka-topic backend), and Memory, the one
// in-memory log the other packages' tests and benchmarks use.
package metalogtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/diskless-sidecar/sidecar/metalog"
)

// Store is one test's set of shard logs of a backend under Run.
type Store interface {
	// Open opens shard's log: empty the first time; after its handles
	// were closed, holding what they made durable.
	Open(shard int32) (metalog.Log, error)
	// Tear makes shard's log, whose handles are all closed, look as a
	// crash during its last Append would have left it, in the variant-th
	// way (0, 1, …) such a crash can; it reports false, doing nothing,
	// when variant is past the backend's last.
	Tear(t *testing.T, shard int32, variant int) bool
}

// Backend is what Run needs of a backend.
type Backend struct {
	// New returns a fresh store for one (sub)test.
	New func(t *testing.T) Store
	// Fences says that a second handle on a shard's log, once opened and
	// replayed, fences a handle open before it (metalog.ErrFenced), as a
	// Kafka backend taking a shard over does (its first Replay claims the
	// shard; the in-memory log fences at open). When false Run never opens
	// a second handle: the backend requires its caller to hold the log
	// exclusively (the file log's directory).
	Fences bool
}

// Run checks b against the metalog.Log contract: append and replay round
// trips, record indexes dense across groups, reopens, snapshots and
// truncation; groups durable whole or not at all across a torn tail;
// refused and cancelled appends writing nothing; errors after Close;
// Confirm on the only writer, also while it appends; and, for a backend
// that fences, a fenced handle's calls failing with metalog.ErrFenced —
// Confirm finding a takeover by itself — and an Append racing a takeover
// either succeeding and in the new owner's replay, or failing with
// ErrFenced and its group never appearing.
func Run(t *testing.T, b Backend) {
	ctx := context.Background()
	sub := func(name string, fn func(t *testing.T, s *suite)) {
		t.Run(name, func(t *testing.T) { fn(t, &suite{t: t, st: b.New(t)}) })
	}

	sub("Empty", func(t *testing.T, s *suite) {
		l := s.open()
		if got, next := s.replay(l, 0); next != 0 || len(got) != 0 {
			t.Fatalf("fresh log: %d records, next %d", len(got), next)
		}
		if idx, p, err := l.ReadSnapshot(ctx); err != nil || idx != 0 || p != nil {
			t.Fatalf("fresh log: ReadSnapshot = %d, %q, %v; want 0, nil, nil", idx, p, err)
		}
	})

	sub("AppendReplay", func(t *testing.T, s *suite) {
		l := s.open()
		s.replay(l, 0)
		var want [][]byte
		for i, n := range []int{1, 3, 1, 7, 2} {
			g := bodies(fmt.Sprintf("g%d", i), n)
			s.append(l, g)
			want = append(want, g...)
		}
		// Binary bodies, zero bytes and a large one included.
		g := [][]byte{{0}, {0, 0, 0xff}, bytes.Repeat([]byte{0xa5}, 1<<20)}
		s.append(l, g)
		want = append(want, g...)
		for _, from := range []int64{0, 1, 4, int64(len(want)) - 1, int64(len(want))} {
			got, next := s.replay(l, from)
			if next != int64(len(want)) || !equal(got, want[from:]) {
				t.Fatalf("replay from %d: %d records, next %d; want %d, next %d", from, len(got), next, len(want)-int(from), len(want))
			}
		}
		if _, err := l.Replay(ctx, int64(len(want))+1, ignore); !errors.Is(err, metalog.ErrCorrupt) {
			t.Fatalf("replay from past the end: %v, want ErrCorrupt", err)
		}
	})

	sub("Reopen", func(t *testing.T, s *suite) {
		l := s.open()
		s.replay(l, 0)
		want := bodies("a", 5)
		s.append(l, want[:2])
		s.append(l, want[2:])
		s.close(l)
		l = s.open()
		if got, next := s.replay(l, 0); next != 5 || !equal(got, want) {
			t.Fatalf("after reopen: %d records, next %d", len(got), next)
		}
		more := bodies("b", 2)
		s.append(l, more)
		s.close(l)
		l = s.open()
		if got, next := s.replay(l, 0); next != 7 || !equal(got, append(want, more...)) {
			t.Fatalf("after appending and reopening: %d records, next %d", len(got), next)
		}
	})

	sub("AppendBeforeReplay", func(t *testing.T, s *suite) {
		l := s.open()
		if err := l.Append(ctx, bodies("x", 1)); err == nil {
			t.Fatal("Append before Replay succeeded")
		}
		if got, next := s.replay(l, 0); next != 0 || len(got) != 0 {
			t.Fatalf("after a refused append: %d records, next %d", len(got), next)
		}
	})

	sub("EmptyAppend", func(t *testing.T, s *suite) {
		l := s.open()
		s.replay(l, 0)
		s.append(l, bodies("a", 2))
		s.append(l, nil)
		s.append(l, [][]byte{})
		if _, next := s.replay(l, 0); next != 2 {
			t.Fatalf("empty appends moved the log to %d", next)
		}
	})

	sub("RecordSizes", func(t *testing.T, s *suite) {
		l := s.open()
		s.replay(l, 0)
		s.append(l, bodies("a", 1))
		for _, bad := range [][][]byte{
			{[]byte("ok"), {}},
			{[]byte("ok"), make([]byte, metalog.MaxRecordBytes+1)},
		} {
			if err := l.Append(ctx, bad); err == nil {
				t.Fatalf("append of a %d-byte record succeeded", len(bad[1]))
			}
			if got, next := s.replay(l, 0); next != 1 || len(got) != 1 {
				t.Fatalf("a refused group left %d records, next %d", len(got), next)
			}
		}
		biggest := [][]byte{bytes.Repeat([]byte{7}, metalog.MaxRecordBytes)}
		s.append(l, biggest)
		s.close(l)
		l = s.open()
		if got, next := s.replay(l, 1); next != 2 || !equal(got, biggest) {
			t.Fatalf("a record of MaxRecordBytes: %d records, next %d", len(got), next)
		}
	})

	sub("CancelledAppend", func(t *testing.T, s *suite) {
		l := s.open()
		s.replay(l, 0)
		s.append(l, bodies("a", 2))
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := l.Append(cctx, bodies("b", 3)); !errors.Is(err, context.Canceled) {
			t.Fatalf("append with a done ctx: %v, want context.Canceled", err)
		}
		if _, next := s.replay(l, 0); next != 2 {
			t.Fatalf("a cancelled append moved the log to %d", next)
		}
		s.append(l, bodies("c", 1))
		s.close(l)
		l = s.open()
		if got, next := s.replay(l, 0); next != 3 || !equal(got, append(bodies("a", 2), bodies("c", 1)...)) {
			t.Fatalf("after reopen: %d records, next %d", len(got), next)
		}
	})

	sub("ReplayCallbackError", func(t *testing.T, s *suite) {
		l := s.open()
		s.replay(l, 0)
		s.append(l, bodies("a", 4))
		stop := errors.New("stop here")
		var seen int
		_, err := l.Replay(ctx, 0, func(int64, []byte) error {
			if seen++; seen == 3 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || seen != 3 {
			t.Fatalf("Replay = %v after %d records, want the callback's error after 3", err, seen)
		}
		if got, next := s.replay(l, 0); next != 4 || len(got) != 4 {
			t.Fatalf("replay after a stopped one: %d records, next %d", len(got), next)
		}
		s.append(l, bodies("b", 1))
	})

	sub("TornTail", func(t *testing.T, s *suite) {
		g1, g2, g3 := bodies("g1", 3), bodies("g2", 2), bodies("g3", 4)
		before := append(append([][]byte{}, g1...), g2...)
		after := append(append([][]byte{}, before...), g3...)
		for variant := 0; ; variant++ {
			s := &suite{t: t, st: b.New(t)}
			l := s.open()
			s.replay(l, 0)
			s.append(l, g1)
			s.append(l, g2)
			s.append(l, g3)
			s.close(l)
			if !s.st.Tear(t, 0, variant) {
				if variant == 0 {
					t.Fatal("the backend knows no torn tail")
				}
				return
			}
			l = s.open()
			got, next := s.replay(l, 0)
			var kept [][]byte
			switch {
			case next == int64(len(before)) && equal(got, before):
				kept = before
			case next == int64(len(after)) && equal(got, after):
				kept = after
			default:
				t.Fatalf("variant %d: after a torn last group, %d records (next %d): not the groups before it, with or without it whole",
					variant, len(got), next)
			}
			g4 := bodies("g4", 2)
			s.append(l, g4)
			s.close(l)
			l = s.open()
			want := append(append([][]byte{}, kept...), g4...)
			if got, next := s.replay(l, 0); next != int64(len(want)) || !equal(got, want) {
				t.Fatalf("variant %d: after appending past the repair and reopening: %d records, next %d; want %d",
					variant, len(got), next, len(want))
			}
			s.close(l)
		}
	})

	sub("Snapshots", func(t *testing.T, s *suite) {
		l := s.open()
		s.replay(l, 0)
		s.append(l, bodies("a", 3))
		if err := l.PrepareSnapshot(ctx, 2); err == nil {
			t.Fatal("PrepareSnapshot at an index other than the log's next succeeded")
		}
		if err := l.WriteSnapshot(ctx, 3, []byte("s3")); err == nil {
			t.Fatal("WriteSnapshot without PrepareSnapshot succeeded")
		}
		payload := []byte("state at 3")
		s.snapshot(l, 3, payload)
		copy(payload, "XXXXX") // the log's copy is its own
		s.checkSnapshot(l, 3, "state at 3")
		s.append(l, bodies("b", 2))
		s.checkSnapshot(l, 3, "state at 3")
		s.snapshot(l, 5, []byte{})
		s.checkSnapshot(l, 5, "")
		s.append(l, bodies("c", 1))
		s.snapshot(l, 6, []byte("state at 6"))
		s.close(l)
		l = s.open()
		s.checkSnapshot(l, 6, "state at 6")
		if got, next := s.replay(l, 6); next != 6 || len(got) != 0 {
			t.Fatalf("replay from the snapshot: %d records, next %d", len(got), next)
		}
		if got, next := s.replay(l, 0); next != 6 || len(got) != 6 {
			t.Fatalf("replay from 0 before any truncation: %d records, next %d", len(got), next)
		}
	})

	sub("TruncateBefore", func(t *testing.T, s *suite) {
		l := s.open()
		s.replay(l, 0)
		all := bodies("a", 4)
		s.append(l, all)
		if err := l.TruncateBefore(ctx, 2); err == nil {
			t.Fatal("TruncateBefore with no snapshot at or after it succeeded")
		}
		s.snapshot(l, 4, []byte("state at 4"))
		if err := l.TruncateBefore(ctx, 5); err == nil {
			t.Fatal("TruncateBefore past the latest snapshot succeeded")
		}
		s.truncate(l, 4)
		tail := bodies("b", 3)
		s.append(l, tail)
		all = append(all, tail...)
		check := func(what string) {
			t.Helper()
			got, next, err := replayAll(ctx, l, 0)
			if err == nil && (next != 7 || !equal(got, all)) {
				t.Fatalf("%s: replay from 0 after truncation: %d records, next %d: neither an error nor the records", what, len(got), next)
			}
			if err != nil && !errors.Is(err, metalog.ErrTruncated) && !errors.Is(err, metalog.ErrCorrupt) {
				t.Fatalf("%s: replay from 0 after truncation: %v, want ErrTruncated, ErrCorrupt or the records", what, err)
			}
			// A failed Replay leaves the log to be replayed again before
			// the next Append.
			if got, next := s.replay(l, 4); next != 7 || !equal(got, tail) {
				t.Fatalf("%s: replay from the snapshot: %d records, next %d", what, len(got), next)
			}
		}
		check("open")
		s.checkSnapshot(l, 4, "state at 4")
		// Index continuity across a second snapshot and a reopen.
		s.snapshot(l, 7, []byte("state at 7"))
		s.truncate(l, 7)
		s.close(l)
		l = s.open()
		s.checkSnapshot(l, 7, "state at 7")
		if got, next := s.replay(l, 7); next != 7 || len(got) != 0 {
			t.Fatalf("after reopen: replay from 7: %d records, next %d", len(got), next)
		}
		s.append(l, bodies("c", 2))
		if got, next := s.replay(l, 7); next != 9 || !equal(got, bodies("c", 2)) {
			t.Fatalf("after appending: replay from 7: %d records, next %d", len(got), next)
		}
	})

	sub("SnapshotWhileAppending", func(t *testing.T, s *suite) {
		l := s.open()
		s.replay(l, 0)
		first := bodies("a", 10)
		s.append(l, first)
		if err := l.PrepareSnapshot(ctx, 10); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var werr error
		wg.Go(func() {
			if werr = l.WriteSnapshot(ctx, 10, bytes.Repeat([]byte("s"), 1<<20)); werr == nil {
				werr = l.TruncateBefore(ctx, 10)
			}
		})
		var more [][]byte
		for i := range 20 {
			g := bodies(fmt.Sprintf("b%d", i), 1+i%3)
			s.append(l, g)
			more = append(more, g...)
		}
		wg.Wait()
		if werr != nil {
			t.Fatalf("snapshot written while appending: %v", werr)
		}
		s.close(l)
		l = s.open()
		s.checkSnapshot(l, 10, string(bytes.Repeat([]byte("s"), 1<<20)))
		if got, next := s.replay(l, 10); next != int64(10+len(more)) || !equal(got, more) {
			t.Fatalf("records appended during the snapshot: %d, next %d; want %d", len(got), next, len(more))
		}
	})

	// Confirm on the log's only writer: nil after the first Replay, after
	// appends, and while appends are in flight (a group of its own that
	// is not acknowledged yet does not fail it).
	sub("Confirm", func(t *testing.T, s *suite) {
		l := s.open()
		s.replay(l, 0)
		s.confirm(l)
		s.append(l, bodies("a", 3))
		s.confirm(l)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		var cerr error
		confirms := 0
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if cerr = l.Confirm(ctx); cerr != nil {
					return
				}
				confirms++
			}
		})
		for i := range 20 {
			s.append(l, bodies(fmt.Sprintf("b%d", i), 1+i%3))
		}
		close(stop)
		wg.Wait()
		if cerr != nil {
			t.Fatalf("Confirm while appending (after %d that returned nil): %v", confirms, cerr)
		}
		t.Logf("%d confirmations while appending 20 groups", confirms)
		s.confirm(l)
	})

	sub("Closed", func(t *testing.T, s *suite) {
		l := s.open()
		s.replay(l, 0)
		s.append(l, bodies("a", 2))
		if err := l.PrepareSnapshot(ctx, 2); err != nil {
			t.Fatal(err)
		}
		s.close(l)
		if err := l.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		s.wantErr(metalog.ErrClosed, l)
	})

	if b.Fences {
		sub("Fenced", func(t *testing.T, s *suite) {
			old := s.open()
			s.replay(old, 0)
			s.append(old, bodies("a", 2))
			if err := old.PrepareSnapshot(ctx, 2); err != nil {
				t.Fatal(err)
			}
			cur := s.open() // takes the log over
			if got, next := s.replay(cur, 0); next != 2 || !equal(got, bodies("a", 2)) {
				t.Fatalf("the new owner replays %d records, next %d", len(got), next)
			}
			s.wantErr(metalog.ErrFenced, old)
			s.append(cur, bodies("b", 1))
			if got, next := s.replay(cur, 0); next != 3 || len(got) != 3 {
				t.Fatalf("after the fenced handle's calls: %d records, next %d", len(got), next)
			}
			if err := old.Close(); err != nil {
				t.Fatalf("closing a fenced handle: %v", err)
			}
			s.close(cur)
		})

		// Confirm finds a takeover by itself, before any other call on
		// the old handle: ErrFenced, and the handle stays fenced.
		sub("ConfirmAfterTakeover", func(t *testing.T, s *suite) {
			old := s.open()
			s.replay(old, 0)
			s.append(old, bodies("a", 2))
			s.confirm(old)
			cur := s.open()
			s.replay(cur, 0)
			s.append(cur, bodies("b", 1))
			if err := old.Confirm(ctx); !errors.Is(err, metalog.ErrFenced) {
				t.Fatalf("Confirm after another handle took the log over and appended: %v, want ErrFenced", err)
			}
			if err := old.Append(ctx, bodies("late", 1)); !errors.Is(err, metalog.ErrFenced) {
				t.Fatalf("Append after Confirm found the takeover: %v, want ErrFenced", err)
			}
			s.confirm(cur)
			if got, next := s.replay(cur, 0); next != 3 || !equal(got, append(bodies("a", 2), bodies("b", 1)...)) {
				t.Fatalf("the new owner replays %d records, next %d", len(got), next)
			}
			s.close(old)
			s.close(cur)
		})

		// An Append racing with a takeover: either it succeeded and the
		// new owner's replay holds its group, or it failed with ErrFenced;
		// a group the new owner did not see never appears later.
		sub("FencedInFlight", func(t *testing.T, s *suite) {
			var want [][]byte
			for round := range 6 {
				old := s.open()
				if got, _ := s.replay(old, 0); !equal(got, want) {
					t.Fatalf("round %d: the owner replays %d records, want %d", round, len(got), len(want))
				}
				g := bodies(fmt.Sprintf("r%d", round), 1+round%3)
				var aerr error
				var wg sync.WaitGroup
				wg.Go(func() { aerr = old.Append(ctx, g) })
				if round%2 == 1 {
					wg.Wait() // sometimes the append comes first
				}
				cur := s.open()
				got, next := s.replay(cur, 0)
				wg.Wait()
				has := len(got) == len(want)+len(g) && equal(got[len(want):], g)
				switch {
				case !has && (len(got) != len(want) || !equal(got, want)):
					t.Fatalf("round %d: the new owner replays %d records (next %d): neither the log before the race nor with the raced group", round, len(got), next)
				case aerr == nil && !has:
					t.Fatalf("round %d: an Append that returned nil is not in the new owner's replay", round)
				case aerr != nil && !errors.Is(aerr, metalog.ErrFenced):
					t.Fatalf("round %d: the raced Append failed with %v, want ErrFenced", round, aerr)
				}
				if err := old.Append(ctx, bodies("late", 1)); !errors.Is(err, metalog.ErrFenced) {
					t.Fatalf("round %d: an Append after the takeover: %v, want ErrFenced", round, err)
				}
				want = got
				s.close(old)
				s.close(cur)
			}
			later := s.open()
			if got, _ := s.replay(later, 0); !equal(got, want) {
				t.Fatalf("a later owner replays %d records, want the %d the last owner saw", len(got), len(want))
			}
		})
	}
}

// suite is the state of one test of Run.
type suite struct {
	t  *testing.T
	st Store
}

func (s *suite) open() metalog.Log {
	s.t.Helper()
	l, err := s.st.Open(0)
	if err != nil {
		s.t.Fatalf("Open: %v", err)
	}
	s.t.Cleanup(func() { l.Close() })
	return l
}

func (s *suite) close(l metalog.Log) {
	s.t.Helper()
	if err := l.Close(); err != nil {
		s.t.Fatalf("Close: %v", err)
	}
}

func (s *suite) replay(l metalog.Log, from int64) ([][]byte, int64) {
	s.t.Helper()
	got, next, err := replayAll(context.Background(), l, from)
	if err != nil {
		s.t.Fatalf("Replay from %d: %v", from, err)
	}
	return got, next
}

func (s *suite) append(l metalog.Log, bodies [][]byte) {
	s.t.Helper()
	if err := l.Append(context.Background(), bodies); err != nil {
		s.t.Fatalf("Append of %d records: %v", len(bodies), err)
	}
}

func (s *suite) snapshot(l metalog.Log, index int64, payload []byte) {
	s.t.Helper()
	ctx := context.Background()
	if err := l.PrepareSnapshot(ctx, index); err != nil {
		s.t.Fatalf("PrepareSnapshot(%d): %v", index, err)
	}
	if err := l.WriteSnapshot(ctx, index, payload); err != nil {
		s.t.Fatalf("WriteSnapshot(%d): %v", index, err)
	}
}

func (s *suite) truncate(l metalog.Log, index int64) {
	s.t.Helper()
	if err := l.TruncateBefore(context.Background(), index); err != nil {
		s.t.Fatalf("TruncateBefore(%d): %v", index, err)
	}
}

func (s *suite) checkSnapshot(l metalog.Log, index int64, payload string) {
	s.t.Helper()
	idx, p, err := l.ReadSnapshot(context.Background())
	if err != nil || idx != index || p == nil || string(p) != payload {
		s.t.Fatalf("ReadSnapshot = %d, %d bytes, %v; want %d, %d bytes", idx, len(p), err, index, len(payload))
	}
}

// confirm confirms l, failing the test on an error.
func (s *suite) confirm(l metalog.Log) {
	s.t.Helper()
	if err := l.Confirm(context.Background()); err != nil {
		s.t.Fatalf("Confirm: %v", err)
	}
}

// wantErr checks that every call on l fails with target.
func (s *suite) wantErr(target error, l metalog.Log) {
	s.t.Helper()
	ctx := context.Background()
	cerr := l.Confirm(ctx) // first: the other calls may find out too
	_, rerr := l.Replay(ctx, 0, ignore)
	_, _, serr := l.ReadSnapshot(ctx)
	for name, err := range map[string]error{
		"Confirm":         cerr,
		"Replay":          rerr,
		"Append":          l.Append(ctx, bodies("z", 1)),
		"ReadSnapshot":    serr,
		"PrepareSnapshot": l.PrepareSnapshot(ctx, 2),
		"WriteSnapshot":   l.WriteSnapshot(ctx, 2, []byte("s")),
		"TruncateBefore":  l.TruncateBefore(ctx, 0),
	} {
		if !errors.Is(err, target) {
			s.t.Errorf("%s: %v, want %v", name, err, target)
		}
	}
}

// replayAll replays l from from, checking that indexes are dense from
// from, and returns copies of the bodies.
func replayAll(ctx context.Context, l metalog.Log, from int64) ([][]byte, int64, error) {
	var got [][]byte
	var gap error
	next, err := l.Replay(ctx, from, func(index int64, body []byte) error {
		if want := from + int64(len(got)); index != want && gap == nil {
			gap = fmt.Errorf("record index %d, want %d", index, want)
		}
		got = append(got, bytes.Clone(body))
		return nil
	})
	if err == nil && gap != nil {
		return nil, 0, gap
	}
	if err == nil && next != from+int64(len(got)) {
		return nil, 0, fmt.Errorf("replay from %d gave %d records and next %d", from, len(got), next)
	}
	return got, next, err
}

func ignore(int64, []byte) error { return nil }

// bodies returns n distinct bodies of different lengths.
func bodies(prefix string, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, "%s-%d-%s", prefix, i, bytes.Repeat([]byte{'x'}, i*7))
	}
	return out
}

func equal(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
