package upload

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/objstore"
)

func TestRetryable(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"caller cancelled", done, context.Canceled, false},
		{"caller cancelled, other error", done, errors.New("reset"), false},
		{"attempt timed out", live, fmt.Errorf("put: %w", context.DeadlineExceeded), true},
		{"invalid key", live, fmt.Errorf("put: %w", objstore.ErrInvalidKey), false},
		{"permanent (access denied, no such bucket)", live, fmt.Errorf("put: %w: 403", objstore.ErrPermanent), false},
		{"other error", live, errors.New("connection reset"), true},
		{"cancelled by the store itself", live, context.Canceled, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryable(tt.ctx, tt.err); got != tt.want {
				t.Fatalf("retryable = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBackoffCeiling(t *testing.T) {
	const huge = time.Duration(1<<63 - 1)
	tests := []struct {
		initial, max time.Duration
		attempt      int
		want         time.Duration
	}{
		{100 * time.Millisecond, time.Second, 1, 100 * time.Millisecond},
		{100 * time.Millisecond, time.Second, 2, 200 * time.Millisecond},
		{100 * time.Millisecond, time.Second, 4, 800 * time.Millisecond},
		{100 * time.Millisecond, time.Second, 5, time.Second},
		{100 * time.Millisecond, time.Second, 1000, time.Second},
		{0, time.Second, 5, 0},
		{time.Second, huge, 200, huge}, // no overflow
	}
	for _, tt := range tests {
		if got := backoffCeiling(tt.initial, tt.max, tt.attempt); got != tt.want {
			t.Errorf("backoffCeiling(%v, %v, %d) = %v, want %v", tt.initial, tt.max, tt.attempt, got, tt.want)
		}
	}
}

func TestFullJitterWithinCeiling(t *testing.T) {
	const ceiling = 10 * time.Millisecond
	var lo, hi bool
	for range 10000 {
		d := fullJitter(ceiling)
		if d < 0 || d > ceiling {
			t.Fatalf("fullJitter(%v) = %v", ceiling, d)
		}
		lo = lo || d < ceiling/4
		hi = hi || d > ceiling*3/4
	}
	if !lo || !hi {
		t.Error("fullJitter does not spread over [0, ceiling]")
	}
	if d := fullJitter(0); d != 0 {
		t.Errorf("fullJitter(0) = %v", d)
	}
}
