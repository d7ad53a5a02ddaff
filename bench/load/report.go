package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
)

// describe is a one-line summary of the client settings, printed above the
// results so that a pasted report says what produced it.
func describe(cfg Config) string {
	rate := rateText(cfg.Rate)
	inflight := "kgo default"
	if cfg.MaxInflight > 0 {
		inflight = fmt.Sprint(cfg.MaxInflight)
	}
	buffered := "kgo default"
	if cfg.MaxBufferedRecords > 0 {
		buffered = fmt.Sprint(cfg.MaxBufferedRecords)
	}
	return fmt.Sprintf("%d-byte records, %d partitions, %d producers, %d consumers, codec %s, linger %v, acks %s, idempotent %t, max in flight %s, max buffered %s, rate %s, warmup %v, window %v",
		cfg.RecordSize, cfg.Partitions, cfg.Producers, cfg.Consumers, cfg.Codec, cfg.Linger,
		cfg.Acks, cfg.Idempotent, inflight, buffered, rate, cfg.Warmup, cfg.Duration)
}

// reportRow is one line of the text report: a figure read from each result
// (ok false: not available) and how to print it.
type reportRow struct {
	name    string
	value   func(Result) (float64, bool)
	format  func(float64) string
	noRatio bool // a count whose ratio means nothing (window, errors)
	hideNA  bool // left out when no result has it
}

func count(v float64) string  { return fmt.Sprintf("%.0f", v) }
func oneDec(v float64) string { return fmt.Sprintf("%.1f", v) }
func twoDec(v float64) string { return fmt.Sprintf("%.2f", v) }
func mib(v float64) string    { return fmt.Sprintf("%.2f MiB", v) }

func latencyRows(prefix string, get func(Result) *Latency, p999 bool) []reportRow {
	lat := func(pick func(Latency) float64) func(Result) (float64, bool) {
		return func(r Result) (float64, bool) {
			l := get(r)
			if l == nil || l.Count == 0 {
				return 0, false
			}
			return pick(*l), true
		}
	}
	rows := []reportRow{
		{prefix + " p50", lat(func(l Latency) float64 { return l.P50Ms }), fmtMs, false, false},
		{prefix + " p99", lat(func(l Latency) float64 { return l.P99Ms }), fmtMs, false, false},
	}
	if p999 {
		rows = append(rows, reportRow{prefix + " p999", lat(func(l Latency) float64 { return l.P999Ms }), fmtMs, false, false})
	}
	return append(rows, reportRow{prefix + " max", lat(func(l Latency) float64 { return l.MaxMs }), fmtMs, false, false})
}

func optional(get func(Result) *float64) func(Result) (float64, bool) {
	return func(r Result) (float64, bool) {
		if v := get(r); v != nil {
			return *v, true
		}
		return 0, false
	}
}

// machineCores is this machine's core count, by which the per-core
// throughput rows divide (the targets share the machine with this tool).
var machineCores = runtime.NumCPU()

func reportRows() []reportRow {
	consumed := func(pick func(Throughput) float64) func(Result) (float64, bool) {
		return func(r Result) (float64, bool) {
			if r.Consumed == nil {
				return 0, false
			}
			return pick(*r.Consumed), true
		}
	}
	rows := []reportRow{
		{"window s", func(r Result) (float64, bool) { return r.WindowSeconds, true }, oneDec, true, false},
		{"produced records/s", func(r Result) (float64, bool) { return r.Produced.RecordsPerSec, true }, count, false, false},
		{"produced MB/s", func(r Result) (float64, bool) { return r.Produced.MBPerSec, true }, oneDec, false, false},
		{"consumed records/s", consumed(func(t Throughput) float64 { return t.RecordsPerSec }), count, false, false},
		{"consumed MB/s", consumed(func(t Throughput) float64 { return t.MBPerSec }), oneDec, false, false},
	}
	rows = append(rows, latencyRows("produce", func(r Result) *Latency { return &r.ProduceLatency }, true)...)
	rows = append(rows, latencyRows("e2e", func(r Result) *Latency { return r.E2ELatency }, false)...)
	rows = append(rows,
		reportRow{"errors", func(r Result) (float64, bool) { return float64(r.ErrorCount), true }, count, true, false},
		reportRow{"unacked at end", func(r Result) (float64, bool) { return float64(r.Unacked), true }, count, true, false},
		reportRow{"unconsumed at end", func(r Result) (float64, bool) { return float64(r.Unconsumed), r.Consumed != nil }, count, true, false},
		reportRow{"objects per GiB uploaded", optional(func(r Result) *float64 { return r.Store.ObjectsPerGiB }), oneDec, false, false},
		reportRow{"mean object size", optional(func(r Result) *float64 { return r.Store.AvgObjectMiB }), mib, false, false},
		reportRow{"GETs per GiB fetched", optional(func(r Result) *float64 { return r.Store.GetsPerGiB }), twoDec, false, false},
		stageRow("buffer"), stageRow("upload"), stageRow("wait"), stageRow("commit"),
		reportRow{"file upload p50 (buckets)", optional(func(r Result) *float64 { return r.Store.UploadP50Ms }), fmtMs, false, true},
		reportRow{"file upload p99 (buckets)", optional(func(r Result) *float64 { return r.Store.UploadP99Ms }), fmtMs, false, true},
		reportRow{"files committed early %", optional(func(r Result) *float64 { return r.Store.EarlyPercent }), oneDec, false, true},
		reportRow{"S3 PUTs per GiB produced", optional(func(r Result) *float64 { return costOf(r, func(c *Cost) *float64 { return c.PutsPerGiB }) }), oneDec, false, false},
		reportRow{"extra PUTs (hedges) %", optional(func(r Result) *float64 { return costOf(r, func(c *Cost) *float64 { return c.HedgePercent }) }), oneDec, false, true},
		reportRow{"S3 GETs per GiB fetched", optional(func(r Result) *float64 { return costOf(r, func(c *Cost) *float64 { return c.GetsPerGiB }) }), oneDec, false, false},
		reportRow{"  consolidation's aside", optional(func(r Result) *float64 { return costOf(r, func(c *Cost) *float64 { return c.FetchGetsPerGiB }) }), twoDec, false, true},
		reportRow{"GiB up per GiB produced", optional(func(r Result) *float64 { return costOf(r, func(c *Cost) *float64 { return c.UploadedPerGiB }) }), twoDec, false, false},
		reportRow{"GiB read per GiB fetched", optional(func(r Result) *float64 { return costOf(r, func(c *Cost) *float64 { return c.ReadPerGiB }) }), twoDec, false, false},
		reportRow{"S3 requests USD/month", optional(func(r Result) *float64 {
			return costOf(r, func(c *Cost) *float64 { v := c.MonthlyUSD; return &v })
		}), twoDec, false, false},
		reportRow{"server CPU s", optional(func(r Result) *float64 { return r.CPU.Seconds }), oneDec, false, false},
		reportRow{"CPU s per GiB produced", optional(func(r Result) *float64 { return r.CPU.PerGiB }), twoDec, false, false},
		reportRow{"produced MB/s per core", optional(func(r Result) *float64 { return r.CPU.MBPerCore }), oneDec, false, false},
		reportRow{"peer CPU s per GiB", optional(func(r Result) *float64 {
			if r.PeerCPU == nil {
				return nil
			}
			return r.PeerCPU.PerGiB
		}), twoDec, false, true},
		reportRow{"CPU s per GiB, with peer", optional(func(r Result) *float64 {
			if r.PeerCPU == nil || r.PeerCPU.PerGiB == nil || r.CPU.PerGiB == nil {
				return nil
			}
			v := *r.CPU.PerGiB + *r.PeerCPU.PerGiB
			return &v
		}), twoDec, false, true},
		reportRow{fmt.Sprintf("records/s per core (of %d)", machineCores), func(r Result) (float64, bool) { return r.Produced.RecordsPerSec / float64(machineCores), true }, count, false, false},
		reportRow{fmt.Sprintf("MB/s per core (of %d)", machineCores), func(r Result) (float64, bool) { return r.Produced.MBPerSec / float64(machineCores), true }, oneDec, false, false},
	)
	return rows
}

// writeReport prints results side by side, one column per target, and,
// with two targets, a column of ratios first/second; then the errors by
// kind and the reasons for figures shown as n/a.
func writeReport(w io.Writer, cfg Config, results []Result) {
	const nameW, colW = 26, 14
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s\n\n", describe(cfg))
	fmt.Fprintf(&b, "%-*s", nameW, "")
	for _, r := range results {
		name := r.Target
		if r.Interrupted {
			name += "*"
		}
		fmt.Fprintf(&b, "%*s", colW, name)
	}
	if len(results) == 2 {
		fmt.Fprintf(&b, "%*s", colW+2, results[0].Target+"/"+results[1].Target)
	}
	b.WriteByte('\n')
	for _, row := range reportRows() {
		if row.hideNA && !slices.ContainsFunc(results, func(r Result) bool { _, ok := row.value(r); return ok }) {
			continue
		}
		fmt.Fprintf(&b, "%-*s", nameW, row.name)
		var vals []float64
		var oks []bool
		for _, r := range results {
			v, ok := row.value(r)
			vals, oks = append(vals, v), append(oks, ok)
			s := "n/a"
			if ok {
				s = row.format(v)
			}
			fmt.Fprintf(&b, "%*s", colW, s)
		}
		if len(results) == 2 && !row.noRatio && oks[0] && oks[1] && vals[1] != 0 {
			fmt.Fprintf(&b, "%*s", colW+2, fmt.Sprintf("%.2f", vals[0]/vals[1]))
		}
		b.WriteByte('\n')
	}
	for _, r := range results {
		if r.Interrupted {
			fmt.Fprintf(&b, "* %s: interrupted, figures of the window so far\n", r.Target)
		}
		for _, k := range sortedKinds(r.Errors) {
			fmt.Fprintf(&b, "errors (%s): %s × %d\n", r.Target, k, r.Errors[k])
		}
		if r.Foreign > 0 {
			fmt.Fprintf(&b, "note (%s): %d records of another run read and ignored\n", r.Target, r.Foreign)
		}
		if r.Store.Cost != nil {
			b.WriteString(costLine(r.Target, r.Store.Cost))
		}
		if r.Store.NA != "" {
			fmt.Fprintf(&b, "n/a (%s): %s\n", r.Target, r.Store.NA)
		}
		if r.CPU.NA != "" {
			fmt.Fprintf(&b, "n/a (%s CPU): %s\n", r.Target, r.CPU.NA)
		}
		if r.PeerCPU != nil {
			fmt.Fprintf(&b, "peer (%s): %s", r.Target, r.Peer)
			if r.PeerCPU.NA != "" {
				fmt.Fprintf(&b, ": n/a: %s", r.PeerCPU.NA)
			}
			b.WriteByte('\n')
		}
	}
	_, _ = io.WriteString(w, b.String())
}

// jsonReport is what -json prints: the settings and every target's result.
type jsonReport struct {
	Settings string   `json:"settings"`
	Config   jsonCfg  `json:"config"`
	Results  []Result `json:"results"`
}

// jsonCfg is Config in JSON: durations in milliseconds, no writer.
type jsonCfg struct {
	Partitions         int32   `json:"partitions"`
	Producers          int     `json:"producers"`
	Consumers          int     `json:"consumers"`
	RecordSize         int     `json:"record_size"`
	Codec              string  `json:"codec"`
	LingerMs           float64 `json:"linger_ms"`
	Acks               string  `json:"acks"`
	Idempotent         bool    `json:"idempotent"`
	MaxInflight        int     `json:"max_inflight"`
	MaxBufferedRecords int     `json:"max_buffered_records"`
	Rate               float64 `json:"rate"`
	WarmupS            float64 `json:"warmup_s"`
	DurationS          float64 `json:"duration_s"`
}

// writeJSON prints the report as one indented JSON document.
func writeJSON(w io.Writer, cfg Config, results []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(jsonReport{
		Settings: describe(cfg),
		Config: jsonCfg{
			Partitions: cfg.Partitions, Producers: cfg.Producers, Consumers: cfg.Consumers,
			RecordSize: cfg.RecordSize, Codec: cfg.Codec,
			LingerMs: float64(cfg.Linger.Microseconds()) / 1e3, Acks: cfg.Acks,
			Idempotent: cfg.Idempotent, MaxInflight: cfg.MaxInflight,
			MaxBufferedRecords: cfg.MaxBufferedRecords, Rate: cfg.Rate,
			WarmupS: cfg.Warmup.Seconds(), DurationS: cfg.Duration.Seconds(),
		},
		Results: results,
	})
}

// stageRow is the mean time of a file in one stage of the sidecar's
// produce pipeline (Store.StageMs).
func stageRow(stage string) reportRow {
	return reportRow{"file " + stage + " mean", func(r Result) (float64, bool) {
		v, ok := r.Store.StageMs[stage]
		return v, ok
	}, fmtMs, false, true}
}

// costOf returns a figure of r's request bill, nil without one.
func costOf(r Result, f func(*Cost) *float64) *float64 {
	if r.Store.Cost == nil {
		return nil
	}
	return f(r.Store.Cost)
}
