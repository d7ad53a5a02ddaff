package main

import (
	"context"
	"errors"
	"maps"
	"math"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Latency histograms hold microseconds from 1 µs to 10 min with 3
// significant digits (an error of at most 0.1%); a longer latency is
// recorded as 10 min.
const (
	histMinMicros = 1
	histMaxMicros = int64(10 * time.Minute / time.Microsecond)
	histSigFigs   = 3
)

func newHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(histMinMicros, histMaxMicros, histSigFigs)
}

// latencyShard is the latency histograms of one client. kgo calls one
// client's promises serially, and a consumer's records are handled by its
// one poll loop, so the lock is contended only by the progress printer.
type latencyShard struct {
	mu struct {
		sync.Mutex
		window *hdrhistogram.Histogram // events whose send time is in the measured window
		tick   *hdrhistogram.Histogram // events since the last progress line
		total  *hdrhistogram.Histogram // every event of the run, warmup included
	}
}

func newLatencyShard() *latencyShard {
	s := new(latencyShard)
	s.mu.window, s.mu.tick, s.mu.total = newHist(), newHist(), newHist()
	return s
}

// record adds one latency; inWindow says whether it counts in the result.
func (s *latencyShard) record(d time.Duration, inWindow bool) {
	us := min(max(d.Microseconds(), histMinMicros), histMaxMicros)
	s.mu.Lock()
	defer s.mu.Unlock()
	// RecordValue fails only for values outside the range, clamped above.
	_ = s.mu.tick.RecordValue(us)
	_ = s.mu.total.RecordValue(us)
	if inWindow {
		_ = s.mu.window.RecordValue(us)
	}
}

// mergeShards merges the histogram pick chooses from every shard into a new
// histogram; with reset, the tick histograms are emptied as they are read.
func mergeShards(shards []*latencyShard, pick func(*latencyShard) *hdrhistogram.Histogram, reset bool) *hdrhistogram.Histogram {
	h := newHist()
	for _, s := range shards {
		s.mu.Lock()
		h.Merge(pick(s))
		if reset {
			s.mu.tick.Reset()
		}
		s.mu.Unlock()
	}
	return h
}

func pickWindow(s *latencyShard) *hdrhistogram.Histogram { return s.mu.window }
func pickTick(s *latencyShard) *hdrhistogram.Histogram   { return s.mu.tick }
func pickTotal(s *latencyShard) *hdrhistogram.Histogram  { return s.mu.total }

// Latency summarises a latency histogram, in milliseconds.
type Latency struct {
	Count  int64   `json:"count"`
	MinMs  float64 `json:"min_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
}

func summarise(h *hdrhistogram.Histogram) Latency {
	ms := func(us int64) float64 { return float64(us) / 1e3 }
	return Latency{
		Count:  h.TotalCount(),
		MinMs:  ms(h.Min()),
		P50Ms:  ms(h.ValueAtQuantile(50)),
		P99Ms:  ms(h.ValueAtQuantile(99)),
		P999Ms: ms(h.ValueAtQuantile(99.9)),
		MaxMs:  ms(h.Max()),
	}
}

// stats is everything a run counts. Times are nanoseconds since base on the
// monotonic clock. Counters come in two sets: the whole run (progress lines,
// the drain's end condition) and the measured window (the result).
type stats struct {
	base  time.Time
	runID uint64

	// windowStart and windowEnd bound the measured window; both are
	// math.MaxInt64 until set, so that nothing counts before the window
	// opens and everything after it opens counts until it closes.
	windowStart, windowEnd atomic.Int64

	sent          atomic.Int64 // Produce calls
	acked         atomic.Int64 // records acknowledged without error
	ackedBytes    atomic.Int64 // their value bytes
	failed        atomic.Int64 // records whose promise had an error
	consumed      atomic.Int64 // records of this run consumed
	consumedBytes atomic.Int64 // their value bytes
	foreign       atomic.Int64 // records consumed that another run wrote

	winAcked, winAckedBytes       atomic.Int64 // acknowledged within the window
	winConsumed, winConsumedBytes atomic.Int64 // consumed within the window

	errs errorCounts

	produce []*latencyShard // one per producer
	e2e     []*latencyShard // one per consumer
}

func newStats(runID uint64, producers, consumers int) *stats {
	s := &stats{base: time.Now(), runID: runID}
	s.windowStart.Store(math.MaxInt64)
	s.windowEnd.Store(math.MaxInt64)
	for range producers {
		s.produce = append(s.produce, newLatencyShard())
	}
	for range consumers {
		s.e2e = append(s.e2e, newLatencyShard())
	}
	return s
}

// now is the time since base in nanoseconds.
func (s *stats) now() int64 { return int64(time.Since(s.base)) }

// inWindow reports whether t falls in the measured window.
func (s *stats) inWindow(t int64) bool {
	return t >= s.windowStart.Load() && t < s.windowEnd.Load()
}

// windowLength is the measured window's length, or the time since it opened
// if it is still open, or 0 if it never opened.
func (s *stats) windowLength() time.Duration {
	start, end := s.windowStart.Load(), s.windowEnd.Load()
	if start == math.MaxInt64 {
		return 0
	}
	if end == math.MaxInt64 {
		end = s.now()
	}
	return time.Duration(end - start)
}

// countError counts err under its kind, unless it is the tool's own doing:
// only the tool cancels the contexts it gives kgo (on an interrupt, or to
// stop the consumers) and closes its clients, and no record timeout is set,
// so such errors say nothing about the target. Checking the error rather
// than a stopping flag avoids racing the goroutine that notices the
// cancellation.
func (s *stats) countError(op string, err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kgo.ErrClientClosed) {
		return
	}
	s.errs.add(op + ": " + errorKind(err))
}

// errorCounts counts errors by kind.
type errorCounts struct {
	mu struct {
		sync.Mutex
		n map[string]int64
	}
}

func (e *errorCounts) add(kind string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.n == nil {
		e.mu.n = make(map[string]int64)
	}
	e.mu.n[kind]++
}

// snapshot returns a copy of the counts and their sum.
func (e *errorCounts) snapshot() (map[string]int64, int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var sum int64
	for _, n := range e.mu.n {
		sum += n
	}
	return maps.Clone(e.mu.n), sum
}

// errorKind names err's kind without the parts that vary between
// occurrences (addresses, offsets): the Kafka error code's name, a kgo
// sentinel, a network failure or, failing those, the message.
func errorKind(err error) string {
	var ke *kerr.Error
	var oe *net.OpError
	switch {
	case errors.As(err, &ke):
		return ke.Message
	case errors.Is(err, context.Canceled):
		return "context canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline exceeded"
	case errors.Is(err, kgo.ErrRecordTimeout):
		return "record timeout"
	case errors.Is(err, kgo.ErrRecordRetries):
		return "record retries exhausted"
	case errors.Is(err, kgo.ErrClientClosed):
		return "client closed"
	case errors.As(err, &oe):
		// Op and cause ("dial: connect: connection refused"), not the
		// addresses.
		return "network: " + oe.Op + ": " + oe.Err.Error()
	}
	msg := err.Error()
	if len(msg) > 80 {
		msg = msg[:80] + "…"
	}
	return msg
}

// sortedKinds returns the kinds of m, most frequent first.
func sortedKinds(m map[string]int64) []string {
	kinds := make([]string, 0, len(m))
	for k := range m {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool {
		if m[kinds[i]] != m[kinds[j]] {
			return m[kinds[i]] > m[kinds[j]]
		}
		return kinds[i] < kinds[j]
	})
	return kinds
}
