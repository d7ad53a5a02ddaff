package upload

import (
	"errors"
	"fmt"
	"time"

	"github.com/diskless-sidecar/sidecar/objstore"
)

// Defaults for Config's zero fields.
const (
	// DefaultPrefix keeps WAL objects under their own prefix so that other
	// object kinds can be added beside them and the orphan scan lists only
	// WAL objects.
	DefaultPrefix = "wal"
	// DefaultMaxAttempts bounds one object's retries: with the default
	// backoff, the 7 waits between 8 attempts have ceilings of 0.1, 0.2,
	// 0.4, 0.8, 1, 1 and 1 s, at most 4.5 s and about 2.3 s on average:
	// long enough to ride out an S3 throttling burst, short against the
	// producers' delivery.timeout.ms (120 s by default).
	DefaultMaxAttempts = 8
	// DefaultInitialBackoff is the backoff ceiling before the second
	// attempt, as Kafka's retry.backoff.ms (100 ms).
	DefaultInitialBackoff = 100 * time.Millisecond
	// DefaultMaxBackoff caps the backoff ceiling, as Kafka's
	// retry.backoff.max.ms (1 s).
	DefaultMaxBackoff = time.Second
	// DefaultAttemptTimeout bounds one PUT. An 8 MiB PUT takes 200–400 ms
	// at p99 on S3 Standard (SPEC §13); 10 s leaves room for slow links
	// while cutting off a hung connection long before produce times out.
	DefaultAttemptTimeout = 10 * time.Second
)

// Config configures an Uploader. A zero field takes its default; New
// validates the result.
type Config struct {
	// Prefix is the first part of every object key, "<Prefix>/<id>"
	// (SPEC §7): slash-separated segments without a leading or trailing
	// slash. Key diskless.object.key.prefix (shared with the orphan scan,
	// which lists it); default DefaultPrefix.
	Prefix string
	// MaxAttempts is how many times one object is tried before Upload
	// gives up, ≥ 1. Key diskless.upload.max.attempts; default
	// DefaultMaxAttempts.
	MaxAttempts int
	// InitialBackoff is the backoff ceiling after the first failed attempt;
	// it doubles after each further one, up to MaxBackoff, and the actual
	// wait is drawn uniformly from [0, ceiling] ("full jitter"). Key
	// diskless.upload.retry.backoff.ms; default DefaultInitialBackoff.
	InitialBackoff time.Duration
	// MaxBackoff caps the backoff ceiling, ≥ InitialBackoff. Key
	// diskless.upload.retry.backoff.max.ms; default DefaultMaxBackoff.
	MaxBackoff time.Duration
	// AttemptTimeout bounds each attempt; an attempt that times out is
	// retried. Key diskless.upload.attempt.timeout.ms; default
	// DefaultAttemptTimeout.
	AttemptTimeout time.Duration
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.InitialBackoff == 0 {
		c.InitialBackoff = DefaultInitialBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = max(DefaultMaxBackoff, c.InitialBackoff)
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = DefaultAttemptTimeout
	}
	return c
}

// Validate reports every invalid field of c (zero fields count as their
// defaults), each error naming the configuration key.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	// Any valid id makes a key valid iff "<prefix>/x" is valid.
	if err := objstore.ValidateKey(c.Prefix + "/x"); err != nil {
		errs = append(errs, fmt.Errorf("diskless.object.key.prefix %q: must be slash-separated segments without leading or trailing slash, empty, . or .. segments: %w", c.Prefix, err))
	}
	if c.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("diskless.upload.max.attempts %d: must be at least 1", c.MaxAttempts))
	}
	if c.InitialBackoff < 0 {
		errs = append(errs, fmt.Errorf("diskless.upload.retry.backoff.ms %v: must not be negative", c.InitialBackoff))
	}
	if c.MaxBackoff < c.InitialBackoff {
		errs = append(errs, fmt.Errorf("diskless.upload.retry.backoff.max.ms %v: must be at least diskless.upload.retry.backoff.ms (%v)", c.MaxBackoff, c.InitialBackoff))
	}
	if c.AttemptTimeout < 0 {
		errs = append(errs, fmt.Errorf("diskless.upload.attempt.timeout.ms %v: must not be negative", c.AttemptTimeout))
	}
	return errors.Join(errs...)
}
