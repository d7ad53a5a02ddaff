// Package upload puts sealed WAL objects into the object store (DESIGN §Produce
// step 5): it names each object with a fresh key, "<prefix>/<id>"
// (SPEC §7), and retries transient failures with capped exponential backoff
// and full jitter, each attempt under its own timeout and each resending the
// object from its first byte.
//
// Upload runs on the caller's goroutine; with hedging (on by default) each
// attempt runs on a goroutine of the Uploader's, so that a second one can
// start beside it, and the losing attempt of a hedged upload finishes and
// has its object deleted in the background: Close waits for those.
//
// This is the outer of two retry layers with the S3 backend: the store
// (objstore/s3) resends single requests — a PUT, one multipart part, a
// Complete — a few times, and aborts a multipart upload that failed; the
// Uploader then retries the whole object, from its first byte, under a
// fresh attempt timeout. Errors the store marks objstore.ErrPermanent
// are not retried.
package upload

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/diskless-sidecar/sidecar/internal/backoff"
)

// Putter is what Upload needs from the object store: objstore.Store
// satisfies it. Put must be atomic (whole object or none) and must not
// retain data after it returns; Delete (of a hedge's losing object) must
// treat a missing key as done.
type Putter interface {
	Put(ctx context.Context, key string, data []byte) error
	Delete(ctx context.Context, key string) error
}

// Uploader uploads objects with retries. It is safe for concurrent use.
type Uploader struct {
	cfg    Config
	store  Putter
	log    *slog.Logger
	sleep  func(ctx context.Context, d time.Duration) error
	jitter func(ceiling time.Duration) time.Duration
	stats  Stats
	hedge  *hedgePolicy // nil when hedging is off

	// bg holds the attempts run under hedging and the clean-ups of the
	// losing ones; Close waits for them.
	bg sync.WaitGroup
}

// Option configures an Uploader.
type Option func(*Uploader)

// WithLogger sets the logger for retries and failures (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(u *Uploader) { u.log = l }
}

// WithSleep replaces the wait between attempts. sleep must return early
// with ctx.Err() when ctx is done. Tests use it to run retry schedules
// without waiting.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(u *Uploader) { u.sleep = sleep }
}

// WithJitter replaces the draw of the actual backoff from its ceiling
// (default: uniform in [0, ceiling]). Tests use it to pin the schedule.
func WithJitter(jitter func(ceiling time.Duration) time.Duration) Option {
	return func(u *Uploader) { u.jitter = jitter }
}

// New returns an Uploader that puts objects into store. It fails if cfg is
// invalid (see Config.Validate).
func New(cfg Config, store Putter, opts ...Option) (*Uploader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("upload: %w", err)
	}
	u := &Uploader{
		cfg:    cfg.withDefaults(),
		store:  store,
		log:    slog.Default(),
		sleep:  backoff.Sleep,
		jitter: backoff.FullJitter,
	}
	if !u.cfg.HedgeDisabled {
		u.hedge = newHedgePolicy(u.cfg)
		u.stats.hedgeDelay = u.hedge.delay
	}
	for _, o := range opts {
		o(u)
	}
	return u, nil
}

// Stats returns the uploader's counters, updated live.
func (u *Uploader) Stats() *Stats { return &u.stats }

// Upload puts data into the store under a new key and returns the key.
//
// Every attempt sends all of data under the same key, so an attempt that
// timed out on our side but succeeded on the store's is overwritten with
// identical bytes. An attempt still running after the hedge delay (see
// hedgePolicy) may get one concurrent second attempt, a hedge, under a
// second new key — at most one per Upload, while the hedge budget allows:
// the first of the two to store its object wins and its key is returned;
// the other is cancelled and its key deleted once its Put has returned
// (in the background: Close waits for it). A Delete that fails, or a
// cancelled PUT the store completes after the Delete, leaves an object
// no shard knows, which the orphan scan deletes after its grace period.
//
// Upload stops at the first success, after Config.MaxAttempts attempts
// (hedges not counted), at an error that retrying cannot fix, or when ctx
// is done; the error then wraps the last attempt's error, and ctx's error
// if ctx ended it. On error the first key is returned too: an object may
// exist under it (a late success), and the orphan scan deletes it unless
// it is committed; a hedge's key is deleted.
//
// data is only read. A losing attempt may still read it after Upload
// returns, until its Put has returned; the caller must not change it.
func (u *Uploader) Upload(ctx context.Context, data []byte) (key string, err error) {
	key = u.newKey()
	if err := ctx.Err(); err != nil {
		u.stats.Failures.Add(1)
		return key, fmt.Errorf("upload %s: %w", key, err)
	}
	mayHedge := u.hedge != nil
	if mayHedge {
		u.hedge.started()
	}
	var lastErr error
	attempt := 1
	for ; ; attempt++ {
		u.stats.Attempts.Add(1)
		if attempt > 1 {
			u.stats.Retries.Add(1)
		}
		var won string
		if mayHedge {
			won, mayHedge, lastErr = u.hedged(ctx, key, data)
		} else {
			won, lastErr = key, u.timed(ctx, key, data)
		}
		if lastErr == nil {
			u.stats.Uploads.Add(1)
			u.stats.BytesUploaded.Add(int64(len(data)))
			return won, nil
		}
		if !retryable(ctx, lastErr) || attempt >= u.cfg.MaxAttempts {
			break
		}
		wait := u.jitter(backoff.Ceiling(u.cfg.InitialBackoff, u.cfg.MaxBackoff, attempt))
		u.log.LogAttrs(ctx, slog.LevelWarn, "upload attempt failed, retrying",
			slog.String("key", key), slog.Int("attempt", attempt),
			slog.Int("max_attempts", u.cfg.MaxAttempts),
			slog.Duration("backoff", wait), slog.Any("error", lastErr))
		if err := u.sleep(ctx, wait); err != nil {
			u.stats.Failures.Add(1)
			return key, fmt.Errorf("upload %s: %w after %d attempts (last: %w)", key, err, attempt, lastErr)
		}
	}
	u.stats.Failures.Add(1)
	if cerr := ctx.Err(); cerr != nil && !errors.Is(lastErr, cerr) {
		return key, fmt.Errorf("upload %s: %w after %d attempts (last: %w)", key, cerr, attempt, lastErr)
	}
	u.log.LogAttrs(ctx, slog.LevelWarn, "upload failed",
		slog.String("key", key), slog.Int("attempts", attempt), slog.Any("error", lastErr))
	return key, fmt.Errorf("upload %s: gave up after %d attempts: %w", key, attempt, lastErr)
}

// timed makes one attempt alone, feeding its duration to the hedge delay
// when it stored the object.
func (u *Uploader) timed(ctx context.Context, key string, data []byte) error {
	start := time.Now()
	err := u.put(ctx, key, data)
	if err == nil && u.hedge != nil {
		u.hedge.observe(time.Since(start))
	}
	return err
}

// run is one attempt in flight under hedging.
type run struct {
	key    string
	hedge  bool // the second attempt, under its own key
	start  time.Time
	cancel context.CancelFunc
}

// runResult is what an attempt's Put returned, and when.
type runResult struct {
	run *run
	err error
	end time.Time
}

// hedged makes one attempt under key that may be hedged: after the hedge
// delay, if the attempt still runs and the budget allows, a second one
// starts under a new key. It returns the winner's key, whether a later
// attempt may still be hedged (false once this one was), and the error
// when neither stored the object (the first attempt's, the one retries
// repeat).
func (u *Uploader) hedged(ctx context.Context, key string, data []byte) (won string, mayHedge bool, err error) {
	// Both attempts report here; buffered so that a loser's goroutine
	// never blocks once Upload has left it behind.
	results := make(chan runResult, 2)
	first := u.launch(ctx, key, false, data, results)
	running := []*run{first}
	var failed []*run // attempts that returned an error
	timer := time.NewTimer(u.hedge.delay())
	defer timer.Stop()
	mayHedge = true
	var firstErr error
	for {
		select {
		case <-timer.C:
			if !u.hedge.take() {
				continue // over budget: this attempt runs alone
			}
			mayHedge = false
			u.stats.Hedges.Add(1)
			u.stats.Attempts.Add(1)
			h := u.launch(ctx, u.newKey(), true, data, results)
			running = append(running, h)
			u.log.LogAttrs(ctx, slog.LevelDebug, "upload attempt slow, hedging",
				slog.String("key", key), slog.String("hedge", h.key),
				slog.Duration("after", time.Since(first.start)))
		case r := <-results:
			running = slices.DeleteFunc(running, func(x *run) bool { return x == r.run })
			if r.err == nil {
				u.hedge.observe(r.end.Sub(r.run.start))
				if r.run.hedge {
					u.stats.HedgeWins.Add(1)
					if len(running) > 0 {
						// The first attempt took at least this long.
						u.hedge.observe(time.Since(first.start))
					}
				}
				u.cleanUp(r.run.key, failed, running, results)
				return r.run.key, mayHedge, nil
			}
			if r.run.hedge {
				// A failed hedge may still have stored its object (an
				// answer lost): its key is never used again.
				u.cleanUp(key, []*run{r.run}, nil, nil)
			} else {
				firstErr = r.err
				failed = append(failed, r.run)
			}
			if len(running) == 0 {
				if firstErr == nil {
					firstErr = r.err
				}
				return key, mayHedge, firstErr
			}
		}
	}
}

// launch starts one attempt of data under key on a goroutine of the
// Uploader's, under its own attempt timeout; its result goes to results.
func (u *Uploader) launch(ctx context.Context, key string, hedge bool, data []byte, results chan<- runResult) *run {
	actx, cancel := context.WithTimeout(ctx, u.cfg.AttemptTimeout)
	r := &run{key: key, hedge: hedge, start: time.Now(), cancel: cancel}
	u.bg.Go(func() {
		err := u.store.Put(actx, key, data)
		cancel()
		results <- runResult{run: r, err: err, end: time.Now()}
	})
	return r
}

// cleanUp deletes, in the background, the objects that losing attempts
// may have stored: ended have returned; running are still in flight, are
// cancelled now, and report on results. Every key but winner's is
// deleted once its attempt has returned, so no Put of it is still on its
// way from this process when its Delete goes out.
func (u *Uploader) cleanUp(winner string, ended, running []*run, results <-chan runResult) {
	for _, r := range running {
		r.cancel()
	}
	if len(ended) == 0 && len(running) == 0 {
		return
	}
	u.bg.Go(func() {
		losers := ended
		for range running {
			losers = append(losers, (<-results).run)
		}
		for _, r := range losers {
			if r.key != winner {
				u.deleteLoser(r.key)
			}
		}
	})
}

// deleteTimeout bounds the Delete of a losing attempt's object.
const deleteTimeout = 10 * time.Second

// deleteLoser deletes an object a losing attempt may have stored.
func (u *Uploader) deleteLoser(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
	defer cancel()
	if err := u.store.Delete(ctx, key); err != nil {
		u.stats.HedgeDeleteFailures.Add(1)
		u.log.LogAttrs(ctx, slog.LevelWarn, "deleting a losing upload attempt's object failed; the orphan scan will",
			slog.String("key", key), slog.Any("error", err))
		return
	}
	u.stats.HedgeDeletes.Add(1)
}

// Close waits for the losing attempts still in flight to return and for
// the Deletes of their objects (each bounded by the attempt timeout and
// deleteTimeout). Upload must not be called after Close.
func (u *Uploader) Close() {
	u.bg.Wait()
}

// put makes one attempt under its own timeout.
func (u *Uploader) put(ctx context.Context, key string, data []byte) error {
	actx, cancel := context.WithTimeout(ctx, u.cfg.AttemptTimeout)
	defer cancel()
	return u.store.Put(actx, key, data)
}

// newKey returns "<prefix>/<id>" with a 128-bit id from crypto/rand as 32
// lowercase hex digits: collisions are negligible (SPEC §7: keys are never
// reused), and the random leading characters spread requests over S3's
// key-prefix partitions.
func (u *Uploader) newKey() string {
	var id [16]byte
	_, _ = rand.Read(id[:]) // never returns an error (crypto/rand, Go 1.24+)
	buf := make([]byte, 0, len(u.cfg.Prefix)+1+hex.EncodedLen(len(id)))
	buf = append(buf, u.cfg.Prefix...)
	buf = append(buf, '/')
	buf = hex.AppendEncode(buf, id[:])
	return string(buf)
}
