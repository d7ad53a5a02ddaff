// Package backoff computes exponential backoff with full jitter and waits
// it out under a context: the one retry schedule of the sidecar's IO
// boundaries (object uploads, S3 requests, coordinator commits).
//
// The wait before retry n (1-based: after the n-th failed attempt) is drawn
// uniformly from [0, min(initial·2^(n−1), max)] — "full jitter", which
// spreads many clients' retries over the whole window instead of
// synchronising them ("Exponential Backoff And Jitter", AWS Architecture
// Blog, 2015).
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Ceiling returns the backoff ceiling after the given failed attempt
// (1-based): initial·2^(attempt−1), capped at maxBackoff, without overflow.
func Ceiling(initial, maxBackoff time.Duration, attempt int) time.Duration {
	d := initial
	for i := 1; i < attempt && d < maxBackoff; i++ {
		if d > maxBackoff/2 { // also keeps d*2 from overflowing
			return maxBackoff
		}
		d *= 2
	}
	return min(d, maxBackoff)
}

// FullJitter draws uniformly from [0, ceiling]; 0 for a ceiling ≤ 0.
func FullJitter(ceiling time.Duration) time.Duration {
	if ceiling <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(ceiling) + 1))
}

// Wait returns FullJitter(Ceiling(initial, maxBackoff, attempt)).
func Wait(initial, maxBackoff time.Duration, attempt int) time.Duration {
	return FullJitter(Ceiling(initial, maxBackoff, attempt))
}

// Sleep waits for d or until ctx is done, whichever is first, and returns
// ctx.Err() in the second case (also for d ≤ 0 with ctx already done).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
