package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// smallConfig is a light load for tests: a couple of seconds, few clients,
// a paced rate so that the race detector's slowdown does not matter. The
// drain is long: it ends as soon as every acknowledged record is consumed,
// so it costs nothing on an idle machine and gives a loaded one the time
// it needs.
func smallConfig() Config {
	cfg := defaultConfig()
	cfg.Partitions = 3
	cfg.Producers = 2
	cfg.Consumers = 2
	cfg.RecordSize = 200
	cfg.Codec = "zstd"
	cfg.Linger = time.Millisecond
	cfg.Warmup = 300 * time.Millisecond
	cfg.Duration = 2 * time.Second
	cfg.Drain = 2 * time.Minute
	cfg.Rate = 2000
	cfg.ProgressInterval = 500 * time.Millisecond
	return cfg
}

func startTestKfake(t *testing.T) Target {
	t.Helper()
	c, target, err := startKfake()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return target
}

// metricsServer serves the sidecar's store counters in the Prometheus text
// format, each scrape showing more work done than the one before: 3
// objects of 8 MiB and 1 ranged GET per 64 MiB fetched per scrape.
func metricsServer(t *testing.T) *httptest.Server {
	t.Helper()
	var scrapes atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := float64(scrapes.Add(1))
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# HELP diskless_upload_objects_total Objects uploaded.\n# TYPE diskless_upload_objects_total counter\n")
		fmt.Fprintf(w, "diskless_upload_objects_total{otel_scope_name=\"upload\"} %g\n", 3*n)
		fmt.Fprintf(w, "# TYPE diskless_upload_bytes_total counter\ndiskless_upload_bytes_total %g\n", 3*8*(1<<20)*n)
		fmt.Fprintf(w, "# TYPE diskless_cache_store_reads_total counter\ndiskless_cache_store_reads_total %g\n", n)
		fmt.Fprintf(w, "# TYPE diskless_fetch_bytes_total counter\ndiskless_fetch_bytes_total %g\n", 64*(1<<20)*n)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestRunKfake runs the tool's core against an in-process kfake and checks
// that every figure is there and sane.
func TestRunKfake(t *testing.T) {
	target := startTestKfake(t)
	target.MetricsURL = metricsServer(t).URL
	cfg := smallConfig()
	var progress bytes.Buffer
	cfg.Progress = &progress
	cfg.ProgressInterval = 100 * time.Millisecond

	res, err := run(t.Context(), cfg, target)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("progress:\n%s", progress.String())
	var report bytes.Buffer
	writeReport(&report, cfg, []Result{res})
	t.Logf("report:%s", report.String())

	if res.Interrupted {
		t.Error("interrupted")
	}
	if res.WindowSeconds < cfg.Duration.Seconds() || res.WindowSeconds > cfg.Duration.Seconds()+1 {
		t.Errorf("window %.2fs, want about %v", res.WindowSeconds, cfg.Duration)
	}
	// Paced at 2000 records/s: the pacer must never exceed the rate. How
	// far below it a loaded machine falls is not this test's business
	// (speed is measured, not asserted): only that records flowed.
	if r := res.Produced.RecordsPerSec; r <= 0 || r > 2400 {
		t.Errorf("produced %.0f records/s, want > 0 and at most about %.0f", r, cfg.Rate)
	}
	if want := res.Produced.RecordsPerSec * float64(cfg.RecordSize) / 1e6; !near(res.Produced.MBPerSec, want) {
		t.Errorf("produced %.3f MB/s, want %.3f", res.Produced.MBPerSec, want)
	}
	if res.Consumed == nil || res.Consumed.RecordsPerSec <= 0 {
		t.Errorf("consumed %+v, want records consumed", res.Consumed)
	}
	checkLatency(t, "produce", res.ProduceLatency)
	if res.E2ELatency == nil {
		t.Fatal("no end-to-end latency")
	}
	checkLatency(t, "e2e", *res.E2ELatency)
	if res.ErrorCount != 0 || res.Unacked != 0 || res.Unconsumed != 0 || res.Foreign != 0 {
		t.Errorf("errors %v (%d), unacked %d, unconsumed %d, foreign %d; want none",
			res.Errors, res.ErrorCount, res.Unacked, res.Unconsumed, res.Foreign)
	}
	// Two scrapes, one before the window and one after the drain: the
	// deltas are one step of metricsServer.
	s := res.Store
	if s.NA != "" || s.ObjectsPerGiB == nil || s.GetsPerGiB == nil || s.AvgObjectMiB == nil {
		t.Fatalf("store figures %+v", s)
	}
	if *s.ObjectsPerGiB != 128 || *s.AvgObjectMiB != 8 || *s.GetsPerGiB != 16 {
		t.Errorf("objects/GiB %v, mean object %v MiB, GETs/GiB %v; want 128, 8, 16",
			*s.ObjectsPerGiB, *s.AvgObjectMiB, *s.GetsPerGiB)
	}
	// The run lasts at least 2.3 s, 23 intervals: progress lines are printed (their
	// repetition and format are TestProgress's; how many ticks a loaded
	// machine's scheduler lets through is not this test's business).
	if !strings.Contains(progress.String(), "kfake ") || !strings.Contains(progress.String(), "| errors 0\n") {
		t.Errorf("progress %q: want lines of the run", progress.String())
	}
	for _, want := range []string{"produced records/s", "produce p999", "e2e p99", "GETs per GiB fetched"} {
		if !strings.Contains(report.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// -plot draws the run's own histograms.
	if res.produceHist.TotalCount() != res.ProduceLatency.Count || res.e2eHist == nil || res.e2eHist.TotalCount() != res.E2ELatency.Count {
		t.Errorf("histograms kept for -plot do not match the latencies %+v, %+v", res.ProduceLatency, *res.E2ELatency)
	}
	if err := writePlot(filepath.Join(t.TempDir(), "run.svg"), cfg, []Result{res}); err != nil {
		t.Errorf("plot of the run: %v", err)
	}
}

func checkLatency(t *testing.T, name string, l Latency) {
	t.Helper()
	if l.Count == 0 || l.P50Ms <= 0 || l.P99Ms < l.P50Ms || l.P999Ms < l.P99Ms || l.MaxMs < l.P999Ms {
		t.Errorf("%s latency %+v: want ordered non-zero percentiles", name, l)
	}
	if l.P99Ms > 10_000 {
		t.Errorf("%s p99 %.0fms: a paced load on kfake should answer in far less", name, l.P99Ms)
	}
}

// writerFunc is an io.Writer calling f with each write (the progress loop
// writes a line at a time).
type writerFunc func(line []byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

func near(a, b float64) bool { return a > b*0.999-1e-9 && a < b*1.001+1e-9 }

// TestRunInterrupted cancels a run in its window: it returns the figures so
// far, marked, without error.
func TestRunInterrupted(t *testing.T) {
	target := startTestKfake(t)
	cfg := smallConfig()
	cfg.Duration = time.Minute
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// Cancel at the first progress line of the window with records
	// produced in it (not after a fixed time: a loaded machine produced
	// nothing in a 1 s window), noting when. The window's produce
	// latencies ("(window -)" while none) count records sent in the
	// window and acknowledged, so some are in the window's figures; the
	// line's rate does not tell (its tick may have ended its acks before
	// the window opened: "produced 0" in a full run on main, 1 in 3 runs
	// alone at load 50).
	var cancelled atomic.Int64
	cfg.ProgressInterval = 100 * time.Millisecond
	cfg.Progress = writerFunc(func(line []byte) {
		if bytes.Contains(line, []byte(" measure ")) && !bytes.Contains(line, []byte("(window -)")) &&
			cancelled.CompareAndSwap(0, time.Now().UnixNano()) {
			cancel()
		}
	})
	res, err := run(ctx, cfg, target)
	if err != nil {
		t.Fatal(err)
	}
	if cancelled.Load() == 0 {
		t.Fatal("the run ended without a progress line of its window showing records")
	}
	if d := time.Since(time.Unix(0, cancelled.Load())); d > 10*time.Second {
		t.Errorf("interrupted run returned %v after its cancellation", d)
	}
	if !res.Interrupted || res.WindowSeconds <= 0 || res.WindowSeconds >= cfg.Duration.Seconds() || res.Produced.Records == 0 {
		t.Errorf("interrupted %t, window %.2fs, produced %d; want a short marked window with records",
			res.Interrupted, res.WindowSeconds, res.Produced.Records)
	}
	if res.ErrorCount != 0 {
		t.Errorf("errors %v: the tool's own cancellation is not an error", res.Errors)
	}
	if res.Store.NA != "kfake has no object store" {
		t.Errorf("store n/a %q", res.Store.NA)
	}
}

// TestRunSetupErrors: a target that cannot be driven is an error, at once.
func TestRunSetupErrors(t *testing.T) {
	cfg := smallConfig()
	// A port that was just free: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	start := time.Now()
	_, err = run(t.Context(), cfg, Target{Name: "sidecar", Brokers: []string{closed}})
	if err == nil || !strings.Contains(err.Error(), "no broker reachable") {
		t.Errorf("unreachable broker: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("unreachable broker reported after %v", d)
	}
	bad := cfg
	bad.Codec = "brotli"
	if _, err := run(t.Context(), bad, Target{Name: "x", Brokers: []string{closed}}); err == nil {
		t.Error("bad config accepted")
	}
}

// TestStoreNA: an unreachable metrics endpoint makes the store figures n/a
// with the reason; the load itself goes on.
func TestStoreNA(t *testing.T) {
	target := startTestKfake(t)
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/metrics"
	srv.Close()
	target.MetricsURL = url
	cfg := smallConfig()
	cfg.Duration = 500 * time.Millisecond
	cfg.Consumers = 0
	res, err := run(t.Context(), cfg, target)
	if err != nil {
		t.Fatal(err)
	}
	// The load went on: records are in the topic, every one sent was
	// acknowledged in the drain. (Counted in the topic, not in the
	// window: how many a loaded machine acknowledges within 500 ms is not
	// this test's business.)
	if n := topicRecords(t, target, res.Topic); n == 0 || res.Unacked != 0 || res.ErrorCount != 0 {
		t.Errorf("%d records in the topic, unacked %d, errors %v: want records, all acknowledged", n, res.Unacked, res.Errors)
	}
	if res.Consumed != nil || res.E2ELatency != nil {
		t.Errorf("consumed %v, e2e %v: want no consumer figures", res.Consumed, res.E2ELatency)
	}
	if res.Store.ObjectsPerGiB != nil || !strings.Contains(res.Store.NA, "connection refused") {
		t.Errorf("store %+v: want n/a naming the refused connection", res.Store)
	}
}

// topicRecords is the sum of topic's partitions' end offsets on target.
func topicRecords(t *testing.T, target Target, topic string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(target.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).ListEndOffsets(t.Context(), topic)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	var n int64
	offs.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// lineWriter counts the lines written to it, for a goroutine to write and
// the test to read.
type lineWriter struct {
	mu    sync.Mutex
	b     bytes.Buffer
	lines int
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines += bytes.Count(p, []byte("\n"))
	return w.b.Write(p)
}

func (w *lineWriter) snapshot() (string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String(), w.lines
}

// TestProgress: the progress loop prints a line per interval, again and
// again, until stopped, naming the target and the phase.
func TestProgress(t *testing.T) {
	var w lineWriter
	cfg := smallConfig()
	cfg.ProgressInterval = 20 * time.Millisecond
	cfg.Progress = &w
	l := &load{cfg: cfg, target: Target{Name: "kfake"}, st: newStats(1, 1, 1), consumers: []*consumer{{}}}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); l.progress(stop) }()
	deadline := time.Now().Add(time.Minute)
	for _, n := w.snapshot(); n < 3; _, n = w.snapshot() {
		if time.Now().After(deadline) {
			t.Fatalf("%d progress lines after a minute at one per %v", n, cfg.ProgressInterval)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	<-done
	out, _ := w.snapshot()
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if !strings.HasPrefix(line, "kfake ") || !strings.Contains(line, " warmup ") ||
			!strings.Contains(line, "| prod ") || !strings.Contains(line, "| cons ") || !strings.HasSuffix(line, "| errors 0") {
			t.Errorf("line %d %q: want the target, the phase, producer and consumer figures, the errors", i, line)
		}
	}
}

func TestStoreDelta(t *testing.T) {
	tests := []struct {
		name          string
		before, after counters
		objects, gets float64 // -1: n/a
		na            string
	}{
		{
			name:    "all there",
			before:  counters{metricUploadObjects: 10, metricUploadBytes: 1 << 30, metricStoreReads: 5, metricFetchBytes: 0},
			after:   counters{metricUploadObjects: 138, metricUploadBytes: 2 << 30, metricStoreReads: 9, metricFetchBytes: 2 << 30},
			objects: 128, gets: 2,
		},
		{
			name:    "nothing fetched",
			before:  counters{metricUploadObjects: 0, metricUploadBytes: 0, metricStoreReads: 0, metricFetchBytes: 7},
			after:   counters{metricUploadObjects: 1, metricUploadBytes: 1 << 29, metricStoreReads: 0, metricFetchBytes: 7},
			objects: 2, gets: -1, na: "nothing fetched",
		},
		{
			name:    "counter missing",
			before:  counters{metricUploadObjects: 0, metricUploadBytes: 0},
			after:   counters{metricUploadObjects: 1, metricUploadBytes: 1 << 30},
			objects: 1, gets: -1, na: "not exposed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := storeDelta(tt.before, tt.after)
			check := func(what string, got *float64, want float64) {
				switch {
				case want < 0 && got != nil:
					t.Errorf("%s = %v, want n/a", what, *got)
				case want >= 0 && (got == nil || *got != want):
					t.Errorf("%s = %v, want %v", what, got, want)
				}
			}
			check("objects/GiB", s.ObjectsPerGiB, tt.objects)
			check("GETs/GiB", s.GetsPerGiB, tt.gets)
			if !strings.Contains(s.NA, tt.na) || (tt.na == "") != (s.NA == "") {
				t.Errorf("NA %q, want %q", s.NA, tt.na)
			}
		})
	}
}

func TestParseCounters(t *testing.T) {
	// Series of one family are summed; a family named without _total is
	// found; other metrics are ignored.
	text := `# TYPE diskless_upload_objects_total counter
diskless_upload_objects_total{shard="0"} 3
diskless_upload_objects_total{shard="1"} 4
# TYPE diskless_fetch_bytes untyped
diskless_fetch_bytes 1e+06
# TYPE go_goroutines gauge
go_goroutines 12
`
	c, err := parseCounters(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := counters{metricUploadObjects: 7, metricFetchBytes: 1e6}
	if len(c) != len(want) || c[metricUploadObjects] != 7 || c[metricFetchBytes] != 1e6 {
		t.Errorf("counters %v, want %v", c, want)
	}
	if _, err := parseCounters(strings.NewReader("not { metrics")); err == nil {
		t.Error("garbage parsed")
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		ok   bool
	}{
		{"defaults", func(*Config) {}, true},
		{"no partitions", func(c *Config) { c.Partitions = 0 }, false},
		{"no producers", func(c *Config) { c.Producers = 0 }, false},
		{"no consumers", func(c *Config) { c.Consumers = 0 }, true},
		{"record too small for the header", func(c *Config) { c.RecordSize = headerSize - 1 }, false},
		{"record at the header", func(c *Config) { c.RecordSize = headerSize }, true},
		{"record too large", func(c *Config) { c.RecordSize = maxRecordSize + 1 }, false},
		{"unknown codec", func(c *Config) { c.Codec = "brotli" }, false},
		{"every codec", func(c *Config) { c.Codec = "lz4" }, true},
		{"zero duration", func(c *Config) { c.Duration = 0 }, false},
		{"negative rate", func(c *Config) { c.Rate = -1 }, false},
		{"acks 1 idempotent", func(c *Config) { c.Acks = "1" }, false},
		{"acks 1 not idempotent", func(c *Config) { c.Acks = "1"; c.Idempotent = false }, true},
		{"bad acks", func(c *Config) { c.Acks = "2"; c.Idempotent = false }, false},
		{"inflight idempotent", func(c *Config) { c.MaxInflight = 3 }, false},
		{"inflight not idempotent", func(c *Config) { c.MaxInflight = 3; c.Idempotent = false }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaultConfig()
			tt.edit(&cfg)
			if err := cfg.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok %t", err, tt.ok)
			}
		})
	}
}

// TestRunKfakeConsumerDelay: with -consumer-delay the consumers start
// that long after the producers and read from the run's start offsets, so
// the records of the window's start wait about the delay less the time
// the window took to open (the warmup, more on a loaded machine), and
// every record is still consumed in the drain.
func TestRunKfakeConsumerDelay(t *testing.T) {
	target := startTestKfake(t)
	cfg := smallConfig()
	cfg.ConsumerDelay = 1500 * time.Millisecond
	res, err := run(t.Context(), cfg, target)
	if err != nil {
		t.Fatal(err)
	}
	if res.E2ELatency == nil || res.Unconsumed != 0 || res.ErrorCount != 0 {
		t.Fatalf("e2e %+v, unconsumed %d, errors %v", res.E2ELatency, res.Unconsumed, res.Errors)
	}
	// The first records of the window were sent when it opened: at the
	// warmup's end, later on a loaded machine (a run under load saw 926
	// ms against the 1200 the warmup alone gives: a window opened at
	// least 0.15 s late).
	lag := cfg.ConsumerDelay - res.windowOpened
	if lag < 200*time.Millisecond {
		t.Fatalf("the window opened %v into the run, too close to the consumers' %v delay to see it", res.windowOpened, cfg.ConsumerDelay)
	}
	if ms := lag.Seconds() * 1e3; res.E2ELatency.MaxMs < ms*0.9 {
		t.Errorf("e2e max %.0f ms, want ≥ about %.0f ms (the window opened %v into the run): the consumers did not start late",
			res.E2ELatency.MaxMs, ms, res.windowOpened)
	}
}

func TestParseFlags(t *testing.T) {
	var stderr bytes.Buffer
	cfg, o, err := parseFlags([]string{"-brokers", "a:1, b:2", "-kfake", "-partitions", "16", "-codec", "zstd", "-linger", "10ms", "-rate", "5000", "-consumer-delay", "30s"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if got := splitBrokers(o.brokers); len(got) != 2 || got[1] != "b:2" || !o.kfake {
		t.Errorf("brokers %q, kfake %t", got, o.kfake)
	}
	if cfg.Partitions != 16 || cfg.Codec != "zstd" || cfg.Linger != 10*time.Millisecond || cfg.Rate != 5000 || cfg.Producers != 4 || cfg.ConsumerDelay != 30*time.Second {
		t.Errorf("config %+v", cfg)
	}
	if _, _, err := parseFlags([]string{"-codec", "brotli"}, &stderr); err == nil {
		t.Error("bad codec accepted")
	}
	if _, _, err := parseFlags([]string{"-consumer-delay", "-1s"}, &stderr); err == nil {
		t.Error("negative consumer delay accepted")
	}
	_, o, err = parseFlags([]string{"-sidecar-pids", "12", "-kafka-brokers", "k1:9092,k2:9092", "-kafka-pids", "34, 56"}, &stderr)
	if err != nil || len(splitBrokers(o.kafkaBrokers)) != 2 || len(o.sidecarPIDs) != 1 || o.sidecarPIDs[0] != 12 ||
		len(o.kafkaPIDs) != 2 || o.kafkaPIDs[1] != 56 {
		t.Errorf("-kafka-brokers, -sidecar-pids, -kafka-pids: %+v, %v", o, err)
	}
	for _, bad := range [][]string{{"-kafka-brokers", "k:1", "-kfake"}, {"-kafka-pids", "x"}, {"-sidecar-pids", "-3"}} {
		if _, _, err := parseFlags(bad, &stderr); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	stderr.Reset()
	if code := mainCode([]string{"-help"}, &stderr, &stderr); code != exitOK || !strings.Contains(stderr.String(), "-record-size") {
		t.Errorf("-help: exit %d, output %q", code, stderr.String())
	}
	if code := mainCode([]string{"-partitions", "0"}, &stderr, &stderr); code != exitUsage {
		t.Errorf("-partitions 0: exit %d, want %d", code, exitUsage)
	}
}

func TestPayload(t *testing.T) {
	v := make([]byte, 64)
	fillHex(v[headerSize:], rand.NewPCG(1, 2))
	putHeader(v, 123456789, 42)
	if sent, ours := readHeader(v, 42); !ours || sent != 123456789 {
		t.Errorf("readHeader = %d, %t", sent, ours)
	}
	if _, ours := readHeader(v, 43); ours {
		t.Error("another run's record taken as ours")
	}
	if _, ours := readHeader(v[:headerSize-1], 42); ours {
		t.Error("short record taken as ours")
	}
	for _, c := range v[headerSize:] {
		if !strings.ContainsRune(hexDigits, rune(c)) {
			t.Fatalf("filler byte %q is not a hex digit", c)
		}
	}
}

// TestJSON checks that -json's document round-trips and keeps n/a figures
// out rather than writing NaN.
func TestJSON(t *testing.T) {
	var b bytes.Buffer
	res := Result{Target: "kfake", Store: Store{NA: "kfake has no object store"}}
	if err := writeJSON(&b, defaultConfig(), []Result{res}); err != nil {
		t.Fatal(err)
	}
	var back jsonReport
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Results) != 1 || back.Results[0].Store.NA != res.Store.NA || back.Config.Partitions != 8 {
		t.Errorf("round trip: %+v", back)
	}
}

// TestCostDelta: the request bill from two scrapes, with the S3 client's
// counters by operation (DELETEs free, LISTs PUT-class, HEADs GET-class) and
// without them (the file backend: upload attempts and store reads).
func TestCostDelta(t *testing.T) {
	text := `# TYPE diskless_s3_requests_total counter
diskless_s3_requests_total{operation="PutObject",outcome="ok"} 90
diskless_s3_requests_total{operation="PutObject",outcome="throttled"} 10
diskless_s3_requests_total{operation="ListObjectsV2",outcome="ok"} 20
diskless_s3_requests_total{operation="GetObject",outcome="ok"} 500
diskless_s3_requests_total{operation="HeadObject",outcome="ok"} 100
diskless_s3_requests_total{operation="DeleteObject",outcome="ok"} 1000
diskless_upload_attempts_total 100
diskless_upload_bytes_total 2147483648
diskless_produce_received_bytes_total 1073741824
diskless_fetch_bytes_total 2147483648
diskless_cache_store_reads_total 300
diskless_cache_store_read_bytes_total 1073741824
`
	after, err := parseCounters(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	after[scrapeTimeKey] = 100
	before := counters{scrapeTimeKey: 0}
	c := costDelta(before, after)
	if c == nil || c.From != "s3" || c.Puts != 120 || c.Gets != 600 || c.Seconds != 100 {
		t.Fatalf("cost %+v", c)
	}
	// 1.2 PUT/s and 6 GET/s for 2,592,000 s: 3,110,400 PUTs at $0.005 per
	// 1,000 and 15,552,000 GETs at $0.0004 per 1,000.
	if !near(c.MonthlyPutUSD, 15.552) || !near(c.MonthlyGetUSD, 6.2208) || !near(c.MonthlyUSD, 21.7728) {
		t.Errorf("monthly %v + %v = %v", c.MonthlyPutUSD, c.MonthlyGetUSD, c.MonthlyUSD)
	}
	if *c.PutsPerGiB != 120 || *c.GetsPerGiB != 300 || *c.UploadedPerGiB != 2 || *c.ReadPerGiB != 0.5 {
		t.Errorf("per GiB: %v PUTs, %v GETs, %v up, %v read", *c.PutsPerGiB, *c.GetsPerGiB, *c.UploadedPerGiB, *c.ReadPerGiB)
	}
	var report bytes.Buffer
	writeReport(&report, smallConfig(), []Result{{Target: "sidecar", Store: Store{Cost: c}}})
	for _, want := range []string{"S3 requests USD/month", "21.77", "1.20 PUT-class and 6.00 GET-class requests/s (from s3 counters over 1m40s)", "$0.005 per 1,000 PUT-class", pricesSource} {
		if !strings.Contains(report.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, report.String())
		}
	}

	// The file backend: no S3 counters.
	for k := range after {
		if strings.HasPrefix(k, s3OpPrefix) {
			delete(after, k)
		}
	}
	c = costDelta(before, after)
	if c == nil || c.From != "sidecar" || c.Puts != 100 || c.Gets != 300 {
		t.Fatalf("file backend cost %+v", c)
	}
	if c.Hedges != nil || c.HedgePercent != nil {
		t.Errorf("hedges %v (%v%%) from a sidecar that reports none", c.Hedges, c.HedgePercent)
	}
	// Consolidation's GETs and PUTs count in the bill (the file backend:
	// added to the uploads and cache reads; S3: in its request counts)
	// and are reported apart.
	more, err := parseCounters(strings.NewReader(`diskless_consolidation_reads_total 40
diskless_consolidation_read_bytes_total 335544320
diskless_consolidation_segments_uploaded_total 3
diskless_consolidation_segment_bytes_total 335560704
`))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range more {
		after[k] = v
	}
	c = costDelta(before, after)
	if c == nil || c.Puts != 103 || c.Gets != 340 || c.ConsolidationGets != 40 || c.ConsolidationPuts != 3 ||
		c.ConsolidationReadBytes != 335544320 {
		t.Fatalf("cost with consolidation %+v", c)
	}
	if c.FetchGetsPerGiB == nil || c.GetsPerGiB == nil || *c.FetchGetsPerGiB != *c.GetsPerGiB*300/340 {
		t.Errorf("GETs per GiB fetched %v, consolidation's aside %v; want 300 of the 340 GETs", c.GetsPerGiB, c.FetchGetsPerGiB)
	}
	report.Reset()
	writeReport(&report, smallConfig(), []Result{{Target: "sidecar", Store: Store{Cost: c}}})
	if want := "consolidation (sidecar): 40 GETs of WAL objects (320.0 MiB), 3 segment objects put (320.0 MiB)"; !strings.Contains(report.String(), want) {
		t.Errorf("report lacks %q:\n%s", want, report.String())
	}
	if costDelta(counters{}, counters{}) != nil {
		t.Error("a bill without scrape times")
	}

	// Hedged uploads: their share of the objects uploaded.
	after[metricUploadHedges], after[metricUploadObjects] = 4, 80
	c = costDelta(before, after)
	if c.Hedges == nil || *c.Hedges != 4 || c.HedgePercent == nil || *c.HedgePercent != 5 {
		t.Fatalf("hedges %v, %v%%; want 4, 5%%", c.Hedges, c.HedgePercent)
	}
	report.Reset()
	writeReport(&report, smallConfig(), []Result{{Target: "sidecar", Store: Store{Cost: c}}})
	for _, want := range []string{"extra PUTs (hedges) %", "4 of them hedges (5.0% of the objects uploaded)"} {
		if !strings.Contains(report.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, report.String())
		}
	}
}

// TestStageQuantile: a stage's quantiles from the histogram's buckets
// between two scrapes, interpolated inside a bucket.
func TestStageQuantile(t *testing.T) {
	text := `# TYPE diskless_produce_file_stage_duration_seconds histogram
diskless_produce_file_stage_duration_seconds_bucket{stage="upload",le="0.1"} 10
diskless_produce_file_stage_duration_seconds_bucket{stage="upload",le="0.2"} 50
diskless_produce_file_stage_duration_seconds_bucket{stage="upload",le="0.5"} 99
diskless_produce_file_stage_duration_seconds_bucket{stage="upload",le="1"} 100
diskless_produce_file_stage_duration_seconds_bucket{stage="upload",le="+Inf"} 100
diskless_produce_file_stage_duration_seconds_sum{stage="upload"} 25
diskless_produce_file_stage_duration_seconds_count{stage="upload"} 100
`
	after, err := parseCounters(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	before := counters{}
	for _, tt := range []struct{ q, want float64 }{{0.05, 50}, {0.5, 200}, {0.9, 200 + 300*40.0/49}, {0.99, 500}, {0.995, 750}} {
		got := stageQuantile(before, after, "upload", tt.q)
		if got == nil || math.Abs(*got-tt.want) > 1e-6 {
			t.Errorf("q %v: %v ms, want %v", tt.q, got, tt.want)
		}
	}
	s := storeDelta(before, after)
	if s.UploadP50Ms == nil || *s.UploadP50Ms != 200 || s.StageMs["upload"] != 250 {
		t.Errorf("store figures: p50 %v, stage means %v", s.UploadP50Ms, s.StageMs)
	}
	if stageQuantile(before, after, "commit", 0.5) != nil {
		t.Error("a quantile of a stage without buckets")
	}
	// A quantile past the last finite bound (the parser keeps the +Inf
	// bucket) is that bound, not +Inf, which -json could not write.
	slow, err := parseCounters(strings.NewReader(`# TYPE diskless_produce_file_stage_duration_seconds histogram
diskless_produce_file_stage_duration_seconds_bucket{stage="upload",le="0.1"} 10
diskless_produce_file_stage_duration_seconds_bucket{stage="upload",le="10"} 98
diskless_produce_file_stage_duration_seconds_bucket{stage="upload",le="+Inf"} 100
diskless_produce_file_stage_duration_seconds_sum{stage="upload"} 100
diskless_produce_file_stage_duration_seconds_count{stage="upload"} 100
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := stageQuantile(before, slow, "upload", 0.99); got == nil {
		t.Error("no p99 in the +Inf bucket")
	} else if *got != 10_000 {
		t.Errorf("p99 in the +Inf bucket: %v ms, want the last bound, 10000", *got)
	}
	if err := writeJSON(io.Discard, defaultConfig(), []Result{{Target: "sidecar", Store: storeDelta(before, slow)}}); err != nil {
		t.Errorf("-json of a run with uploads past the last bucket: %v", err)
	}
}

// TestEarlyPercent: files committed early as a share of the files sealed,
// only from a sidecar that exports the counter.
func TestEarlyPercent(t *testing.T) {
	before := counters{metricFiles: 100, metricFilesEarly: 5}
	after := counters{metricFiles: 300, metricFilesEarly: 25}
	if s := storeDelta(before, after); s.EarlyPercent == nil || *s.EarlyPercent != 10 {
		t.Fatalf("early %v, want 10%%", s.EarlyPercent)
	}
	delete(after, metricFilesEarly)
	if s := storeDelta(before, after); s.EarlyPercent != nil {
		t.Fatalf("early %v from a sidecar without the counter", *s.EarlyPercent)
	}
}
