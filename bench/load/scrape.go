package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The sidecar's counters that the store figures come from, as exposed on
// its Prometheus endpoint (config key http.listener).
const (
	metricUploadObjects = "diskless_upload_objects_total"    // objects uploaded
	metricUploadBytes   = "diskless_upload_bytes_total"      // bytes uploaded
	metricStoreReads    = "diskless_cache_store_reads_total" // ranged GETs issued to the object store
	metricFetchBytes    = "diskless_fetch_bytes_total"       // record bytes served to consumers
	// metricFileStages is the histogram of each file's time per pipeline
	// stage (label stage: buffer, upload, commit, …), seconds.
	metricFileStages = "diskless_produce_file_stage_duration_seconds"
	stageSumPrefix   = metricFileStages + "_sum:"
	stageCountPrefix = metricFileStages + "_count:"
	// stageBucketPrefix + stage + ":" + upper bound (seconds) holds a
	// bucket's cumulative count.
	stageBucketPrefix = metricFileStages + "_bucket:"
	metricFiles       = "diskless_produce_files_total"                 // files sealed
	metricFilesEarly  = "diskless_produce_files_committed_early_total" // files committed while an earlier one was unanswered
)

var storeMetrics = []string{metricUploadObjects, metricUploadBytes, metricStoreReads, metricFetchBytes,
	metricUploadAttempts, metricStoreReadBytes, metricProduced, metricUploadHedges, metricHedgeWins,
	metricFiles, metricFilesEarly,
	metricConsolidationReads, metricConsolidationReadBytes, metricSegmentsUploaded, metricSegmentBytes}

// scrapeTimeout bounds one scrape; the endpoint answers from memory.
const scrapeTimeout = 5 * time.Second

const gib = 1 << 30

// counters is one scrape: each wanted counter's value summed over its
// series (label sets). A counter the endpoint does not expose is absent.
type counters map[string]float64

// scrape reads url in the Prometheus text format and returns the counters
// of storeMetrics found there.
func scrape(ctx context.Context, url string) (counters, error) {
	ctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	// Ask for the plain text format: an exporter that also speaks
	// OpenMetrics or protobuf would otherwise pick its own.
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	c, err := parseCounters(resp.Body)
	if err == nil {
		c[scrapeTimeKey] = float64(time.Now().UnixNano()) / 1e9
	}
	return c, err
}

// parseCounters parses the Prometheus text format and sums the samples of
// each of storeMetrics. A family may be named with or without the _total
// suffix (text-format exporters differ), and counter, untyped and gauge
// samples are all taken.
func parseCounters(r io.Reader) (counters, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	out := make(counters)
	for _, name := range storeMetrics {
		for _, fname := range []string{name, trimTotal(name)} {
			f, ok := fams[fname]
			if !ok {
				continue
			}
			out[name] = sumFamily(f)
			break
		}
	}
	// Each file stage's time in seconds and file count (stageSumPrefix,
	// stageCountPrefix + stage), for the stage means.
	for _, fname := range []string{metricFileStages, trimTotal(metricFileStages)} {
		f, ok := fams[fname]
		if !ok {
			continue
		}
		for _, m := range f.GetMetric() {
			stage := "unknown"
			for _, l := range m.GetLabel() {
				if l.GetName() == "stage" {
					stage = l.GetValue()
				}
			}
			if h := m.GetHistogram(); h != nil {
				out[stageSumPrefix+stage] += h.GetSampleSum()
				out[stageCountPrefix+stage] += float64(h.GetSampleCount())
				for _, b := range h.GetBucket() {
					out[stageBucketPrefix+stage+":"+strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)] += float64(b.GetCumulativeCount())
				}
			}
		}
		break
	}
	// The S3 requests by operation (s3OpPrefix + operation), for the cost.
	for _, fname := range []string{metricS3Requests, trimTotal(metricS3Requests)} {
		f, ok := fams[fname]
		if !ok {
			continue
		}
		for _, m := range f.GetMetric() {
			op := "unknown"
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation" {
					op = l.GetValue()
				}
			}
			out[s3OpPrefix+op] += m.GetCounter().GetValue() + m.GetUntyped().GetValue()
		}
		break
	}
	return out, nil
}

func trimTotal(name string) string { return strings.TrimSuffix(name, "_total") }

func sumFamily(f *dto.MetricFamily) float64 {
	var sum float64
	for _, m := range f.GetMetric() {
		switch {
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetUntyped() != nil:
			sum += m.GetUntyped().GetValue()
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		}
	}
	return sum
}

// Store is what the sidecar's object store did during the measured window
// (from a scrape at the window's start to one after the drain), and the
// cost figures derived from it. A figure that cannot be had is nil, and NA
// says why.
type Store struct {
	ObjectsUploaded *float64 `json:"objects_uploaded,omitempty"`
	BytesUploaded   *float64 `json:"bytes_uploaded,omitempty"`
	StoreReads      *float64 `json:"store_reads,omitempty"`
	FetchBytes      *float64 `json:"fetch_bytes,omitempty"`
	// ObjectsPerGiB is objects uploaded per GiB uploaded (the sidecar's
	// bytes: record batches as produced, after client compression, plus
	// the object format's overhead).
	ObjectsPerGiB *float64 `json:"objects_per_gib,omitempty"`
	// AvgObjectMiB is the mean object size, MiB.
	AvgObjectMiB *float64 `json:"avg_object_mib,omitempty"`
	// GetsPerGiB is ranged GETs issued to the object store per GiB of
	// record bytes served to consumers.
	GetsPerGiB *float64 `json:"gets_per_gib,omitempty"`
	// StageMs is the mean time, ms, the files answered in the window
	// spent in each stage of the sidecar's produce pipeline (buffer,
	// upload, commit, …: diskless.produce.file.stage.duration); nil when
	// not exposed.
	StageMs map[string]float64 `json:"stage_ms,omitempty"`
	// UploadP50Ms and UploadP99Ms are the upload stage's median and 99th
	// percentile over the files answered in the window, ms, interpolated
	// linearly inside the histogram's buckets (bounds 100, 150, 200, 250,
	// 300, 500, 1000 ms …: coarse, for comparing runs); nil when not
	// exposed.
	UploadP50Ms *float64 `json:"upload_p50_ms,omitempty"`
	UploadP99Ms *float64 `json:"upload_p99_ms,omitempty"`
	// EarlyPercent is the share of the files sealed in the window that
	// were committed while a file sealed before them was unanswered
	// (DESIGN §Produce step 6); nil from a sidecar that does not count
	// them, or with no file sealed.
	EarlyPercent *float64 `json:"early_percent,omitempty"`
	// Cost is the request bill at S3 list prices for the rate measured
	// (cost.go); nil when the counters were not there.
	Cost *Cost `json:"cost,omitempty"`
	// NA says why figures are missing; empty when all are there.
	NA string `json:"na,omitempty"`
}

// storeDelta derives the store figures from two scrapes.
func storeDelta(before, after counters) Store {
	var s Store
	var missing []string
	delta := func(name string) *float64 {
		b, okb := before[name]
		a, oka := after[name]
		if !okb || !oka {
			missing = append(missing, name)
			return nil
		}
		d := a - b
		return &d
	}
	s.ObjectsUploaded = delta(metricUploadObjects)
	s.BytesUploaded = delta(metricUploadBytes)
	s.StoreReads = delta(metricStoreReads)
	s.FetchBytes = delta(metricFetchBytes)
	var why []string
	if len(missing) > 0 {
		why = append(why, fmt.Sprintf("not exposed: %v", missing))
	}
	if s.ObjectsUploaded != nil && s.BytesUploaded != nil {
		if *s.BytesUploaded > 0 {
			v := *s.ObjectsUploaded / (*s.BytesUploaded / gib)
			s.ObjectsPerGiB = &v
		} else {
			why = append(why, "nothing uploaded")
		}
		if *s.ObjectsUploaded > 0 {
			v := *s.BytesUploaded / *s.ObjectsUploaded / (1 << 20)
			s.AvgObjectMiB = &v
		}
	}
	if s.StoreReads != nil && s.FetchBytes != nil {
		if *s.FetchBytes > 0 {
			v := *s.StoreReads / (*s.FetchBytes / gib)
			s.GetsPerGiB = &v
		} else {
			why = append(why, "nothing fetched")
		}
	}
	for k, sum := range after {
		stage, ok := strings.CutPrefix(k, stageSumPrefix)
		if !ok {
			continue
		}
		n := after[stageCountPrefix+stage] - before[stageCountPrefix+stage]
		if n > 0 {
			if s.StageMs == nil {
				s.StageMs = make(map[string]float64)
			}
			s.StageMs[stage] = (sum - before[k]) / n * 1e3
		}
	}
	if _, ok := after[metricFiles]; ok {
		_, early := after[metricFilesEarly]
		if files := after[metricFiles] - before[metricFiles]; files > 0 && early {
			v := (after[metricFilesEarly] - before[metricFilesEarly]) / files * 100
			s.EarlyPercent = &v
		}
	}
	s.UploadP50Ms, s.UploadP99Ms = stageQuantile(before, after, "upload", 0.50), stageQuantile(before, after, "upload", 0.99)
	s.Cost = costDelta(before, after)
	if len(why) > 0 {
		s.NA = strings.Join(why, "; ")
	}
	return s
}

// stageQuantile estimates the q quantile (0 < q < 1), ms, of a stage's
// durations between two scrapes from the histogram's cumulative buckets,
// interpolating linearly inside the bucket it falls in (from 0 for the
// first); nil without buckets or files. A quantile in the +Inf bucket is
// the last finite bound.
func stageQuantile(before, after counters, stage string, q float64) *float64 {
	prefix := stageBucketPrefix + stage + ":"
	type bucket struct{ le, n float64 }
	var bs []bucket
	for k, v := range after {
		le, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		bound, err := strconv.ParseFloat(le, 64)
		if err != nil || math.IsInf(bound, 1) {
			continue // the +Inf bucket's count is the stage's count
		}
		bs = append(bs, bucket{bound, v - before[k]})
	}
	if len(bs) == 0 {
		return nil
	}
	slices.SortFunc(bs, func(a, b bucket) int { return cmp.Compare(a.le, b.le) })
	total := bs[len(bs)-1].n
	if n := after[stageCountPrefix+stage] - before[stageCountPrefix+stage]; n > total {
		total = n // the +Inf bucket is not among the buckets
	}
	if total <= 0 {
		return nil
	}
	rank := q * total
	lo, below := 0.0, 0.0
	for _, b := range bs {
		if b.n >= rank {
			v := lo
			if b.n > below {
				v += (b.le - lo) * (rank - below) / (b.n - below)
			}
			v *= 1e3
			return &v
		}
		lo, below = b.le, b.n
	}
	v := lo * 1e3
	return &v
}
