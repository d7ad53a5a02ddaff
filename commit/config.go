package commit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Config tunes retries of whole-shard commit failures. A zero field takes
// its default (the Default constants below); Validate reports invalid
// fields naming their configuration keys.
type Config struct {
	// NodeID is this sidecar's node.id, recorded as UploaderBrokerId.
	NodeID int32
	// MaxAttempts bounds the CommitFile calls per shard and object, ≥ 1.
	// Key diskless.commit.max.attempts; default DefaultMaxAttempts.
	MaxAttempts int
	// InitialBackoff and MaxBackoff bound the full-jitter exponential
	// backoff between attempts, 0 < InitialBackoff ≤ MaxBackoff. No keys;
	// defaults DefaultInitialBackoff and DefaultMaxBackoff.
	InitialBackoff, MaxBackoff time.Duration
	// Logger receives retry and failure events; nil means slog.Default().
	Logger *slog.Logger
	// Objects, if set, deletes an object no shard took a batch of (see
	// Committer.Commit); nil leaves such objects to the orphan scan.
	Objects Deleter
}

// Deleter deletes an object from the store; objstore.Store satisfies it.
// Deleting a missing key is not an error.
type Deleter interface {
	Delete(ctx context.Context, key string) error
}

// Defaults of Config's zero fields.
const (
	DefaultMaxAttempts    = 5
	DefaultInitialBackoff = 50 * time.Millisecond
	DefaultMaxBackoff     = 2 * time.Second
)

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.InitialBackoff == 0 {
		c.InitialBackoff = DefaultInitialBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports every invalid field of c (zero fields count as their
// defaults), each error naming the configuration key (the field, for
// those without one).
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("diskless.commit.max.attempts %d: must be at least 1", c.MaxAttempts))
	}
	if c.InitialBackoff <= 0 || c.MaxBackoff < c.InitialBackoff {
		errs = append(errs, fmt.Errorf("commit: InitialBackoff %v, MaxBackoff %v: must be 0 < InitialBackoff ≤ MaxBackoff", c.InitialBackoff, c.MaxBackoff))
	}
	return errors.Join(errs...)
}
