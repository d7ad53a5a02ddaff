package upload

import (
	"testing"
	"time"
)

// TestHedgePolicyDelay: the delay is the cap until 16 durations are known,
// then the nearest-rank percentile of the last 256, clamped to the floor
// and the cap.
func TestHedgePolicyDelay(t *testing.T) {
	ms := time.Millisecond
	cfg := Config{HedgePercentile: 90, HedgeMinDelay: 50 * ms, HedgeMaxDelay: time.Second, HedgeMaxPercent: 10}
	feed := func(p *hedgePolicy, ds ...time.Duration) {
		for _, d := range ds {
			p.observe(d)
		}
	}
	// seq returns n durations 1..n times unit.
	seq := func(n int, unit time.Duration) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = time.Duration(i+1) * unit
		}
		return out
	}
	tests := []struct {
		name    string
		cfg     Config
		samples []time.Duration
		want    time.Duration
	}{
		{"no durations: the cap", cfg, nil, time.Second},
		{"15 durations: still the cap", cfg, seq(15, 100*ms), time.Second},
		// 16 durations 10..160 ms: rank ceil(0.9 × 16) = 15 → 150 ms.
		{"16 durations: their p90", cfg, seq(16, 10*ms), 150 * ms},
		// 100 durations 1..100 ms: rank 90 → 90 ms.
		{"p90 of 100", cfg, seq(100, ms), 90 * ms},
		{"p50 of 100", Config{HedgePercentile: 50, HedgeMinDelay: ms, HedgeMaxDelay: time.Second}, seq(100, ms), 50 * ms},
		{"p99 of 100", Config{HedgePercentile: 99, HedgeMinDelay: ms, HedgeMaxDelay: time.Second}, seq(100, ms), 99 * ms},
		{"below the floor", cfg, seq(100, 100*time.Microsecond), 50 * ms},
		{"above the cap", cfg, seq(100, 100*ms), time.Second},
		// 300 durations: the first 44 (1..44 s) have left the window of
		// 256; the rest are 45..300 ms.
		{"only the last 256 count", Config{HedgePercentile: 50, HedgeMinDelay: ms, HedgeMaxDelay: time.Hour},
			append(seq(44, time.Second), seq(300, ms)[44:]...), 172 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newHedgePolicy(tt.cfg)
			feed(p, tt.samples...)
			if got := p.delay(); got != tt.want {
				t.Fatalf("delay %v, want %v", got, tt.want)
			}
		})
	}
	// The delay follows new durations.
	p := newHedgePolicy(cfg)
	feed(p, seq(100, ms)...)
	if got := p.delay(); got != 90*ms {
		t.Fatalf("delay %v, want 90ms", got)
	}
	for range hedgeWindow {
		p.observe(300 * ms)
	}
	if got := p.delay(); got != 300*ms {
		t.Fatalf("delay after slower uploads %v, want 300ms", got)
	}
}

// TestHedgePolicyBudget: the budget starts with a burst of 3 hedges and
// earns HedgeMaxPercent hundredths of one per upload, never above the
// burst: over n uploads that each want a hedge, at most one each and at
// most 3 + n × percent / 100 in all, and no fewer than n × percent / 100.
func TestHedgePolicyBudget(t *testing.T) {
	for _, tt := range []struct{ percent, uploads int }{
		{10, 1}, {10, 10}, {10, 100}, {10, 1000}, {1, 1000}, {50, 333}, {100, 50},
	} {
		p := newHedgePolicy(Config{HedgePercentile: 90, HedgeMinDelay: time.Millisecond, HedgeMaxDelay: time.Second, HedgeMaxPercent: tt.percent})
		hedges := 0
		for range tt.uploads {
			p.started()
			if p.take() {
				hedges++
			}
		}
		lo, hi := tt.uploads*tt.percent/100, min(tt.uploads, hedgeBurst+tt.uploads*tt.percent/100)
		if hedges < lo || hedges > hi {
			t.Errorf("%d%%, %d uploads: %d hedges, want within [%d, %d]", tt.percent, tt.uploads, hedges, lo, hi)
		}
	}
	// A quiet spell refills no more than the burst.
	p := newHedgePolicy(Config{HedgePercentile: 90, HedgeMinDelay: time.Millisecond, HedgeMaxDelay: time.Second, HedgeMaxPercent: 10})
	for range 1000 {
		p.started()
	}
	n := 0
	for p.take() {
		n++
	}
	if n != hedgeBurst {
		t.Fatalf("%d hedges after a quiet spell, want the burst, %d", n, hedgeBurst)
	}
}
