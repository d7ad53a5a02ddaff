package backoff

import (
	"context"
	"testing"
	"time"
)

func TestCeiling(t *testing.T) {
	for _, c := range []struct {
		initial, max time.Duration
		attempt      int
		want         time.Duration
	}{
		{100 * time.Millisecond, time.Second, 1, 100 * time.Millisecond},
		{100 * time.Millisecond, time.Second, 2, 200 * time.Millisecond},
		{100 * time.Millisecond, time.Second, 4, 800 * time.Millisecond},
		{100 * time.Millisecond, time.Second, 5, time.Second},
		{100 * time.Millisecond, time.Second, 1000, time.Second},
		{time.Duration(1 << 62), time.Duration(1<<63 - 1), 10, time.Duration(1<<63 - 1)}, // no overflow
		{2 * time.Second, time.Second, 1, time.Second},
	} {
		if got := Ceiling(c.initial, c.max, c.attempt); got != c.want {
			t.Errorf("Ceiling(%v, %v, %d) = %v, want %v", c.initial, c.max, c.attempt, got, c.want)
		}
	}
}

func TestFullJitterSpreads(t *testing.T) {
	const ceiling = 1000
	lo, hi := time.Duration(ceiling), time.Duration(0)
	for range 10000 {
		d := FullJitter(ceiling)
		if d < 0 || d > ceiling {
			t.Fatalf("FullJitter(%d) = %v", ceiling, d)
		}
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo > ceiling/10 || hi < ceiling*9/10 {
		t.Fatalf("draws span only [%v, %v] of [0, %d]", lo, hi, ceiling)
	}
	if FullJitter(0) != 0 || FullJitter(-5) != 0 {
		t.Fatal("FullJitter of a non-positive ceiling is not 0")
	}
}

func TestSleepHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); err != context.Canceled || time.Since(start) > time.Second {
		t.Fatalf("Sleep on a cancelled context: %v after %v", err, time.Since(start))
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
}
