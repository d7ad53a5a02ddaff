package s3

import (
	"context"
	"log/slog"
	"time"

	"github.com/diskless-sidecar/sidecar/internal/backoff"
)

// Retries of the start-up sweep of stale multipart uploads
// (SweepStaleUploads). A store that throttles or is unreachable at start-up
// is retried for about 20 minutes (attempt n waits up to
// min(1 s × 2^(n−1), 5 min), full jitter), which outlasts S3's throttling
// bursts, then the sweep waits for the next start; the bucket's
// AbortIncompleteMultipartUpload lifecycle rule, if any, covers the rest.
const (
	staleSweepAttempts       = 10
	staleSweepBackoff        = time.Second
	staleSweepBackoffMax     = 5 * time.Minute
	staleSweepAttemptTimeout = time.Minute
)

// staleSweep is the background retry of SweepStaleUploads, owned by the
// Store: started by SweepStaleUploads, stopped and waited for by Close.
type staleSweep struct {
	attempts            int
	initial, maxBackoff time.Duration
	cancel              context.CancelFunc
	done                chan struct{} // closed when the goroutine returns
}

// SweepStaleUploads aborts the stale multipart uploads under prefix as
// AbortStaleUploads does and returns that first attempt's result. When it
// fails (the store throttling, unreachable), the sweep goes on in the
// background: up to staleSweepAttempts attempts in all, with jittered
// exponential backoff between them (internal/backoff), each bounded by a
// minute; the outcome is logged. Close stops it and waits for it. Call it
// once per Store.
func (s *Store) SweepStaleUploads(ctx context.Context, prefix string, olderThan time.Duration) (int, error) {
	n, err := s.AbortStaleUploads(ctx, prefix, olderThan)
	if err == nil {
		return n, nil
	}
	bg, cancel := context.WithCancel(context.Background())
	s.sweep.cancel, s.sweep.done = cancel, make(chan struct{})
	go func() {
		defer close(s.sweep.done)
		s.retrySweep(bg, prefix, olderThan, n)
	}()
	return n, err
}

// retrySweep makes attempts 2… of SweepStaleUploads until one succeeds,
// the attempts run out or ctx is cancelled (Close). aborted counts the
// uploads the failed attempts aborted.
func (s *Store) retrySweep(ctx context.Context, prefix string, olderThan time.Duration, aborted int) {
	w := &s.sweep
	var err error
	for attempt := 2; attempt <= w.attempts; attempt++ {
		if backoff.Sleep(ctx, backoff.Wait(w.initial, w.maxBackoff, attempt-1)) != nil {
			return // Close
		}
		actx, cancel := context.WithTimeout(ctx, staleSweepAttemptTimeout)
		var n int
		n, err = s.AbortStaleUploads(actx, prefix, olderThan)
		cancel()
		aborted += n
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			s.log.LogAttrs(ctx, slog.LevelInfo, "aborted stale multipart uploads after retrying",
				slog.Int("uploads", aborted), slog.Int("attempts", attempt))
			return
		}
	}
	s.log.LogAttrs(ctx, slog.LevelWarn, "gave up aborting stale multipart uploads until the next start",
		slog.Int("attempts", w.attempts), slog.Int("uploads", aborted), slog.Any("error", err))
}

// stopSweep cancels the background sweep, if any, and waits for it.
func (s *Store) stopSweep() {
	if s.sweep.cancel != nil {
		s.sweep.cancel()
		<-s.sweep.done
	}
}
