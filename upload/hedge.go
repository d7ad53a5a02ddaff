package upload

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Hedged uploads (DESIGN §Produce step 5, "Hedged uploads"): an upload
// attempt that has not finished after a percentile of recent attempts'
// durations gets a second attempt of the same bytes under a new key; the
// first to be stored wins and the other is cancelled and deleted.

// hedgeWindow is how many recent attempt durations the hedge delay is
// taken from: at one file per 250 ms (the default seal interval) about a
// minute of uploads, so the delay follows the store within a minute.
const hedgeWindow = 256

// hedgeMinSamples is how many durations the window must hold before its
// percentile is trusted; until then the delay is HedgeMaxDelay.
const hedgeMinSamples = 16

// hedgeBurst caps the hedge budget's tokens: after a quiet spell, at most
// this many hedges may start back to back before the budget's rate
// (HedgeMaxPercent per hundred uploads) limits them. The budget starts
// full, so the first slow uploads of a process may be hedged.
const hedgeBurst = 3

// hedgePolicy decides when an attempt is hedged: its delay is the
// HedgePercentile of the last hedgeWindow attempt durations, clamped to
// [HedgeMinDelay, HedgeMaxDelay], and a hedge starts only while the budget
// holds a token. Each upload earns HedgeMaxPercent/100 of a token, each
// hedge spends one, so over any stretch of n uploads at most
// n × HedgeMaxPercent/100 + hedgeBurst hedges start. Safe for concurrent
// use; it does no IO and reads no clock.
type hedgePolicy struct {
	percentile         float64 // in [50, 99]
	minDelay, maxDelay time.Duration
	earn               int // hundredths of a token per upload: HedgeMaxPercent

	mu struct {
		sync.Mutex
		samples [hedgeWindow]time.Duration // a ring of attempt durations
		n       int                        // samples held, ≤ hedgeWindow
		next    int                        // where the next sample goes
		tokens  int                        // in hundredths of a hedge
		// delay is the current hedge delay, computed when samples change.
		delay time.Duration
		stale bool
	}
}

func newHedgePolicy(cfg Config) *hedgePolicy {
	p := &hedgePolicy{
		percentile: float64(cfg.HedgePercentile),
		minDelay:   cfg.HedgeMinDelay,
		maxDelay:   cfg.HedgeMaxDelay,
		earn:       cfg.HedgeMaxPercent,
	}
	p.mu.tokens = hedgeBurst * 100
	p.mu.delay = p.maxDelay
	return p
}

// observe records the duration of an attempt that stored its object, or
// of a first attempt cancelled because its hedge won (a lower bound of
// what it would have taken: leaving it out would bias the window towards
// the fast attempts hedging leaves).
func (p *hedgePolicy) observe(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.samples[p.mu.next] = d
	p.mu.next = (p.mu.next + 1) % hedgeWindow
	p.mu.n = min(p.mu.n+1, hedgeWindow)
	p.mu.stale = true
}

// delay returns how long an attempt runs before it is hedged.
func (p *hedgePolicy) delay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.stale {
		p.mu.stale = false
		p.mu.delay = p.maxDelay
		if n := p.mu.n; n >= hedgeMinSamples {
			s := slices.Clone(p.mu.samples[:n])
			slices.Sort(s)
			// Nearest rank: the smallest sample at or above the
			// percentile of the window.
			i := int(math.Ceil(p.percentile/100*float64(n))) - 1
			p.mu.delay = min(max(s[max(i, 0)], p.minDelay), p.maxDelay)
		}
	}
	return p.mu.delay
}

// started earns an upload's share of the budget.
func (p *hedgePolicy) started() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.tokens = min(p.mu.tokens+p.earn, hedgeBurst*100)
}

// take spends a token for a hedge, reporting false when the budget is
// spent.
func (p *hedgePolicy) take() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.tokens < 100 {
		return false
	}
	p.mu.tokens -= 100
	return true
}
