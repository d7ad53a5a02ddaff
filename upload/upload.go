// Package upload puts sealed WAL objects into the object store (DESIGN §Produce
// step 5): it names each object with a fresh key, "<prefix>/<id>"
// (SPEC §7), and retries transient failures with capped exponential backoff
// and full jitter, each attempt under its own timeout and each resending the
// object from its first byte.
//
// An Uploader holds no goroutines and no buffers: Upload runs on the
// caller's goroutine and never retains data after it returns.
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
	"time"

	"github.com/diskless-sidecar/sidecar/internal/backoff"
)

// Putter is what Upload needs from the object store: objstore.Store
// satisfies it. Put must be atomic (whole object or none) and must not
// retain data after it returns.
type Putter interface {
	Put(ctx context.Context, key string, data []byte) error
}

// Uploader uploads objects with retries. It is safe for concurrent use.
type Uploader struct {
	cfg    Config
	store  Putter
	log    *slog.Logger
	sleep  func(ctx context.Context, d time.Duration) error
	jitter func(ceiling time.Duration) time.Duration
	stats  Stats
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
// identical bytes. Upload stops at the first success, after
// Config.MaxAttempts attempts, at an error that retrying cannot fix, or when
// ctx is done; the error then wraps the last attempt's error, and ctx's
// error if ctx ended it. On error the key is returned too: an object may
// exist under it (a late success), and the orphan scan deletes it unless it
// is committed.
//
// data is only read, and not retained after Upload returns.
func (u *Uploader) Upload(ctx context.Context, data []byte) (key string, err error) {
	key = u.newKey()
	if err := ctx.Err(); err != nil {
		u.stats.Failures.Add(1)
		return key, fmt.Errorf("upload %s: %w", key, err)
	}
	var lastErr error
	attempt := 1
	for ; ; attempt++ {
		u.stats.Attempts.Add(1)
		if attempt > 1 {
			u.stats.Retries.Add(1)
		}
		lastErr = u.put(ctx, key, data)
		if lastErr == nil {
			u.stats.Uploads.Add(1)
			u.stats.BytesUploaded.Add(int64(len(data)))
			return key, nil
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
