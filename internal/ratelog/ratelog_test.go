package ratelog

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// recorder is a slog.Handler keeping every record it gets.
type recorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec.Clone())
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func (r *recorder) lines() []map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]string
	for _, rec := range r.records {
		m := map[string]string{"msg": rec.Message, "level": rec.Level.String()}
		rec.Attrs(func(a slog.Attr) bool {
			m[a.Key] = a.Value.String()
			return true
		})
		out = append(out, m)
	}
	return out
}

// clock is an injected clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) add(d time.Duration)     { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.Unix(1_700_000_000, 0)} }
func attr(k string, v int) slog.Attr     { return slog.Int(k, v) }
func (l *Limiter) size() (int, int, int) { return len(l.mu.entries), l.mu.order.Len(), l.mu.tracked }

func TestFirstThenOneSummaryPerInterval(t *testing.T) {
	rec, c := &recorder{}, newClock()
	l := New(slog.New(rec), Config{Interval: time.Minute, Now: c.now})
	ctx := context.Background()

	for i := range 10_000 {
		l.Log(ctx, slog.LevelInfo, "10.0.0.1", "bad request", attr("i", i))
	}
	lines := rec.lines()
	if len(lines) != 1 || lines[0]["i"] != "0" || lines[0]["subject"] != "10.0.0.1" || lines[0]["repeated"] != "" {
		t.Fatalf("10,000 occurrences in one interval: want the first line only, got %v", lines)
	}

	// The interval ends: the next occurrence writes the summary of the
	// 9,999 counted (with the last one's attributes) and is itself counted.
	c.add(time.Minute)
	l.Log(ctx, slog.LevelInfo, "10.0.0.1", "bad request", attr("i", 10_000))
	lines = rec.lines()
	if len(lines) != 2 || lines[1]["repeated"] != "9999" || lines[1]["i"] != "9999" || lines[1]["interval"] != "1m0s" {
		t.Fatalf("after the interval: want one summary of 9999, got %v", lines)
	}

	// Close writes what is still counted.
	l.Close()
	lines = rec.lines()
	if len(lines) != 3 || lines[2]["repeated"] != "1" || lines[2]["i"] != "10000" {
		t.Fatalf("Close: want a summary of 1, got %v", lines)
	}
	if e, o, tr := l.size(); e != 0 || o != 0 || tr != 0 {
		t.Fatalf("after Close: %d entries, %d ordered, %d tracked", e, o, tr)
	}
}

func TestQuietConditionIsForgotten(t *testing.T) {
	rec, c := &recorder{}, newClock()
	l := New(slog.New(rec), Config{Interval: time.Minute, Now: c.now})
	ctx := context.Background()
	l.Log(ctx, slog.LevelWarn, "p1", "corrupt")
	c.add(time.Minute)
	l.Flush()
	if e, _, _ := l.size(); e != 0 {
		t.Fatalf("a condition that did not recur within its interval is still tracked (%d entries)", e)
	}
	l.Log(ctx, slog.LevelWarn, "p1", "corrupt")
	if n := len(rec.lines()); n != 2 {
		t.Fatalf("a condition back after a quiet interval: want its line at once (2 lines), got %d", n)
	}
	for _, ln := range rec.lines() {
		if ln["repeated"] != "" {
			t.Fatalf("no summary expected for a condition that never repeated: %v", ln)
		}
	}
}

func TestKeysAreMessageAndSubject(t *testing.T) {
	rec, c := &recorder{}, newClock()
	l := New(slog.New(rec), Config{Now: c.now})
	ctx := context.Background()
	for range 3 {
		l.Log(ctx, slog.LevelInfo, "a", "m1")
		l.Log(ctx, slog.LevelInfo, "b", "m1")
		l.Log(ctx, slog.LevelInfo, "a", "m2")
		l.Log(ctx, slog.LevelInfo, "", "m2")
	}
	lines := rec.lines()
	if len(lines) != 4 {
		t.Fatalf("4 distinct conditions: want 4 lines, got %v", lines)
	}
	if _, has := lines[3]["subject"]; has {
		t.Fatalf("an empty subject adds no attribute: %v", lines[3])
	}
}

// TestBoundedTable: a client that makes up a new subject every time (a
// new port, a new topic) cannot grow the table or the log.
func TestBoundedTable(t *testing.T) {
	rec, c := &recorder{}, newClock()
	l := New(slog.New(rec), Config{Interval: time.Minute, MaxKeys: 8, Now: c.now})
	ctx := context.Background()
	for i := range 10_000 {
		l.Log(ctx, slog.LevelInfo, fmt.Sprintf("peer-%d", i), "bad request")
		if e, _, tr := l.size(); tr > 8 || e > 9 {
			t.Fatalf("after %d subjects: %d entries (%d tracked), want ≤ 8 tracked + 1 overflow", i+1, e, tr)
		}
	}
	lines := rec.lines()
	if len(lines) != 9 || lines[8]["subject"] != othersSubject {
		t.Fatalf("10,000 subjects, 8 keys: want 8 first lines and one for the others, got %d: %v", len(lines), lines)
	}
	c.add(time.Minute)
	l.Flush()
	lines = rec.lines()
	if len(lines) != 10 || lines[9]["repeated"] != "9991" || lines[9]["subject"] != othersSubject {
		t.Fatalf("summary of the others: want repeated=9991, got %v", lines[9:])
	}
	// The tracked subjects were quiet and are forgotten; room again.
	l.Log(ctx, slog.LevelInfo, "peer-new", "bad request")
	if lines = rec.lines(); len(lines) != 11 || lines[10]["subject"] != "peer-new" {
		t.Fatalf("after the interval a new subject is tracked again, got %v", lines[10:])
	}
}

func TestDisabledLevelIsNotTracked(t *testing.T) {
	c := newClock()
	l := New(slog.New(slog.DiscardHandler), Config{Now: c.now})
	l.Log(context.Background(), slog.LevelDebug, "x", "m")
	if e, _, _ := l.size(); e != 0 {
		t.Fatalf("a disabled level must not be tracked, %d entries", e)
	}
}

// TestTimerWritesSummary: with the real clock the summary of a condition
// that stopped comes without another Log call.
func TestTimerWritesSummary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		l := New(slog.New(rec), Config{Interval: time.Second})
		for range 5 {
			l.Log(context.Background(), slog.LevelWarn, "t/0", "fetch failed")
		}
		time.Sleep(time.Second + time.Millisecond)
		synctest.Wait()
		lines := rec.lines()
		if len(lines) != 2 || lines[1]["repeated"] != "4" {
			t.Fatalf("want the first line and a timed summary of 4, got %v", lines)
		}
		// Quiet for another interval: the next occurrence is a first
		// line again, not counted.
		time.Sleep(2 * time.Second)
		l.Log(context.Background(), slog.LevelWarn, "t/0", "fetch failed")
		if lines = rec.lines(); len(lines) != 3 || lines[2]["repeated"] != "" {
			t.Fatalf("after a quiet interval: want a first line, got %v", lines)
		}
		l.Close()
	})
}

func TestConcurrentUse(t *testing.T) {
	rec := &recorder{}
	l := New(slog.New(rec), Config{Interval: time.Hour, MaxKeys: 4})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				l.Log(context.Background(), slog.LevelInfo, fmt.Sprint(g, i%6), "m")
			}
		})
	}
	wg.Wait()
	l.Close()
	total := 0
	for _, ln := range rec.lines() {
		n := 1
		if ln["repeated"] != "" {
			fmt.Sscan(ln["repeated"], &n)
		}
		total += n
	}
	if total != 8000 {
		t.Fatalf("lines account for %d occurrences, want 8000", total)
	}
}
