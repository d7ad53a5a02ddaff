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
	// DefaultHedgePercentile is the percentile of recent attempt
	// durations after which an attempt is hedged: on S3-like latency
	// (SPEC §13) about 270 ms, so about one upload in twenty is hedged,
	// half of DefaultHedgeMaxPercent. Not the 90th: at 230 ms an attempt
	// of the model's 150–300 ms band has less left to run than a new
	// attempt takes at best (60 ms), so such hedges lose and cost a PUT
	// each; measured at p90, 1 hedge of 35 won (bench/RESULTS.md entry 17).
	DefaultHedgePercentile = 95
	// DefaultHedgeMinDelay floors the hedge delay: an attempt younger than
	// this is never hedged, so a fast store (a local disk: ~25 ms per 7 MiB
	// file, bench/RESULTS.md entry 3) is hedged only when an attempt
	// stalls, not for its ordinary spread.
	DefaultHedgeMinDelay = 100 * time.Millisecond
	// DefaultHedgeMaxDelay caps the hedge delay, and is the delay until
	// the window holds enough durations: 1 s is over twice S3's PUT p99
	// (SPEC §13), so an attempt that old is stuck rather than slow.
	DefaultHedgeMaxDelay = time.Second
	// DefaultHedgeMaxPercent bounds hedges to 10 per 100 uploads (and a
	// burst of 3): the extra PUT-class requests a deployment pays for.
	DefaultHedgeMaxPercent = 10
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
	// HedgeDisabled turns hedged uploads off (DESIGN §Produce step 5):
	// each attempt then runs alone until it succeeds, fails or times
	// out. Key diskless.upload.hedge.enable (its negation); default false:
	// hedging on.
	HedgeDisabled bool
	// HedgePercentile is the percentile of the last 256 attempt durations
	// after which a running attempt gets a second one under a new key,
	// in [50, 99]. Key diskless.upload.hedge.percentile; default
	// DefaultHedgePercentile.
	HedgePercentile int
	// HedgeMinDelay and HedgeMaxDelay clamp the hedge delay,
	// 1 ms ≤ HedgeMinDelay ≤ HedgeMaxDelay; HedgeMaxDelay is also the delay
	// while fewer than 16 durations are known. Keys
	// diskless.upload.hedge.min.delay.ms, diskless.upload.hedge.max.delay.ms;
	// defaults DefaultHedgeMinDelay, DefaultHedgeMaxDelay.
	HedgeMinDelay, HedgeMaxDelay time.Duration
	// HedgeMaxPercent bounds the hedges to this many per 100 uploads (plus
	// a burst of 3), in [1, 100]. Key diskless.upload.hedge.max.percent;
	// default DefaultHedgeMaxPercent.
	HedgeMaxPercent int
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
	if c.HedgePercentile == 0 {
		c.HedgePercentile = DefaultHedgePercentile
	}
	if c.HedgeMinDelay == 0 {
		// A cap set below the default floor takes the floor down with it.
		c.HedgeMinDelay = DefaultHedgeMinDelay
		if c.HedgeMaxDelay > 0 {
			c.HedgeMinDelay = min(c.HedgeMinDelay, c.HedgeMaxDelay)
		}
	}
	if c.HedgeMaxDelay == 0 {
		c.HedgeMaxDelay = max(DefaultHedgeMaxDelay, c.HedgeMinDelay)
	}
	if c.HedgeMaxPercent == 0 {
		c.HedgeMaxPercent = DefaultHedgeMaxPercent
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
	if c.HedgePercentile < 50 || c.HedgePercentile > 99 {
		errs = append(errs, fmt.Errorf("diskless.upload.hedge.percentile %d: must be in [50, 99]", c.HedgePercentile))
	}
	if c.HedgeMinDelay < time.Millisecond {
		errs = append(errs, fmt.Errorf("diskless.upload.hedge.min.delay.ms %v: must be at least 1 ms", c.HedgeMinDelay))
	}
	if c.HedgeMaxDelay < c.HedgeMinDelay {
		errs = append(errs, fmt.Errorf("diskless.upload.hedge.max.delay.ms %v: must be at least diskless.upload.hedge.min.delay.ms (%v)", c.HedgeMaxDelay, c.HedgeMinDelay))
	}
	if c.HedgeMaxPercent < 1 || c.HedgeMaxPercent > 100 {
		errs = append(errs, fmt.Errorf("diskless.upload.hedge.max.percent %d: must be in [1, 100]", c.HedgeMaxPercent))
	}
	return errors.Join(errs...)
}
