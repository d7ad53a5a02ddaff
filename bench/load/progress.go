package main

import (
	"fmt"
	"math"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// progress prints one line per cfg.ProgressInterval to cfg.Progress until
// stop is closed:
//
//	sidecar   18.0s measure | prod   47013 rec/s   48.1 MB/s p99 547ms (window 797ms) | cons   47013 rec/s   48.1 MB/s e2e p99 580ms | errors 0
//
// Rates and "p99" are of the last interval; "window" is the produce p99 of
// the measured window so far (of the whole run during the warmup).
func (l *load) progress(stop <-chan struct{}) {
	st := l.st
	tick := time.NewTicker(l.cfg.ProgressInterval)
	defer tick.Stop()
	last := time.Now()
	var lastAcked, lastAckedBytes, lastCons, lastConsBytes int64
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		now := time.Now()
		secs := now.Sub(last).Seconds()
		last = now
		acked, ackedBytes := st.acked.Load(), st.ackedBytes.Load()
		cons, consBytes := st.consumed.Load(), st.consumedBytes.Load()

		phase, sofar, sofarLabel := "measure", pickWindow, "window"
		switch t := st.now(); {
		case t < st.windowStart.Load():
			phase, sofar, sofarLabel = "warmup", pickTotal, "run"
		case t >= st.windowEnd.Load():
			phase = "drain"
		}
		tickP99 := p99(mergeShards(st.produce, pickTick, true))
		windowP99 := p99(mergeShards(st.produce, sofar, false))
		_, errs := st.errs.snapshot()

		line := fmt.Sprintf("%-7s %6.1fs %-7s | prod %7.0f rec/s %6.1f MB/s p99 %s (%s %s)",
			l.target.Name, time.Since(st.base).Seconds(), phase,
			float64(acked-lastAcked)/secs, float64(ackedBytes-lastAckedBytes)/secs/1e6,
			tickP99, sofarLabel, windowP99)
		if len(l.consumers) > 0 {
			line += fmt.Sprintf(" | cons %7.0f rec/s %6.1f MB/s e2e p99 %s",
				float64(cons-lastCons)/secs, float64(consBytes-lastConsBytes)/secs/1e6,
				p99(mergeShards(st.e2e, pickTick, true)))
		}
		line += fmt.Sprintf(" | errors %d\n", errs)
		fmt.Fprint(l.cfg.Progress, line)
		lastAcked, lastAckedBytes, lastCons, lastConsBytes = acked, ackedBytes, cons, consBytes
	}
}

// p99 formats a histogram's 99th percentile, or "-" if it is empty.
func p99(h *hdrhistogram.Histogram) string {
	if h.TotalCount() == 0 {
		return "-"
	}
	return fmtMs(float64(h.ValueAtQuantile(99)) / 1e3)
}

// fmtMs formats milliseconds with three significant digits or so.
func fmtMs(ms float64) string {
	switch {
	case math.IsNaN(ms):
		return "n/a"
	case ms >= 100:
		return fmt.Sprintf("%.0fms", ms)
	case ms >= 10:
		return fmt.Sprintf("%.1fms", ms)
	default:
		return fmt.Sprintf("%.2fms", ms)
	}
}
