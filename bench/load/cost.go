package main

import (
	"fmt"
	"strings"
	"time"
)

// S3 request list prices the cost report uses: S3 Standard, US East (N.
// Virginia), from the Amazon S3 pricing page (aws.amazon.com/s3/pricing,
// "Requests & data retrievals") as listed in 2025; other regions and
// storage classes differ. PUT, COPY, POST and LIST requests are one class,
// GET, SELECT, HEAD and the others another; DELETE and abort are free.
const (
	pricePutPer1000 = 0.005  // USD per 1,000 PUT, COPY, POST, LIST requests
	priceGetPer1000 = 0.0004 // USD per 1,000 GET, SELECT, HEAD and other requests
	pricesSource    = "S3 Standard, US East (N. Virginia), Amazon S3 pricing page as listed in 2025"
	secondsPerMonth = 30 * 24 * 3600
)

// The counters the cost report adds to storeMetrics.
const (
	metricUploadAttempts = "diskless_upload_attempts_total"        // object uploads attempted, retries included
	metricStoreReadBytes = "diskless_cache_store_read_bytes_total" // bytes read from the object store
	metricProduced       = "diskless_produce_received_bytes_total" // record-batch bytes produced
	metricS3Requests     = "diskless_s3_requests_total"            // every S3 HTTP attempt, by operation (S3 backend only)
	metricUploadHedges   = "diskless_upload_hedges_total"          // hedged uploads' second attempts: extra PUTs
	metricHedgeWins      = "diskless_upload_hedge_wins_total"      // hedged uploads whose second attempt won
	// Consolidation's share (issue 17): ranged GETs of WAL objects and
	// their bytes, segment objects put (one PUT each) and their bytes.
	metricConsolidationReads     = "diskless_consolidation_reads_total"
	metricConsolidationReadBytes = "diskless_consolidation_read_bytes_total"
	metricSegmentsUploaded       = "diskless_consolidation_segments_uploaded_total"
	metricSegmentBytes           = "diskless_consolidation_segment_bytes_total"
	// s3OpPrefix keys the S3 requests of one operation in counters.
	s3OpPrefix = metricS3Requests + ":"
	// scrapeTimeKey holds the scrape's time in counters, Unix seconds.
	scrapeTimeKey = "scrape_time"
)

// putClass reports whether an S3 operation is billed as a PUT-class
// request (PUT, COPY, POST, LIST); DELETE and abort are free.
func s3Class(op string) (put, free bool) {
	switch op {
	case "PutObject", "CopyObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload",
		"ListObjectsV2", "ListObjects", "ListMultipartUploads", "ListParts":
		return true, false
	case "DeleteObject", "DeleteObjects", "AbortMultipartUpload":
		return false, true
	}
	return false, false
}

// Cost is the object store's request bill for the rate measured: request
// counts between the two scrapes (window start, after the drain), per GiB,
// and priced at the list prices above for a month at that rate.
type Cost struct {
	// From says where the counts come from: "s3", every HTTP attempt of
	// the S3 client by operation (diskless_s3_requests_total); "sidecar",
	// the uploader's attempts as PUTs and the cache's store reads as GETs
	// (the file backend: what S3 would be sent, multipart parts and
	// start-up listings aside).
	From    string  `json:"from"`
	Seconds float64 `json:"seconds"` // between the two scrapes
	Puts    float64 `json:"puts"`    // PUT-class requests
	Gets    float64 `json:"gets"`    // GET-class requests
	// PutsPerGiB is PUT-class requests per GiB produced; GetsPerGiB GET-class
	// requests per GiB fetched.
	PutsPerGiB *float64 `json:"puts_per_gib_produced,omitempty"`
	GetsPerGiB *float64 `json:"gets_per_gib_fetched,omitempty"`
	// FetchGetsPerGiB is GetsPerGiB without consolidation's GETs of WAL
	// objects: what reading the fetched bytes cost (a lagging consumer of
	// consolidated data, issue 17's ≤ 8 per GiB); nil when consolidation
	// read nothing in the window (then it equals GetsPerGiB).
	FetchGetsPerGiB *float64 `json:"fetch_gets_per_gib_fetched,omitempty"`
	// UploadedPerGiB is bytes uploaded per byte produced (GiB per GiB);
	// ReadPerGiB bytes read from the store per byte fetched.
	UploadedPerGiB *float64 `json:"uploaded_gib_per_gib_produced,omitempty"`
	ReadPerGiB     *float64 `json:"read_gib_per_gib_fetched,omitempty"`
	// Hedges is the hedged uploads' second attempts in the window, and
	// HedgePercent their share of the objects uploaded: the extra PUTs
	// hedging cost (in Puts already); nil from a sidecar without hedging.
	// HedgeWins is how many of them stored their object first.
	Hedges       *float64 `json:"hedges,omitempty"`
	HedgePercent *float64 `json:"hedge_percent,omitempty"`
	HedgeWins    *float64 `json:"hedge_wins,omitempty"`
	// MonthlyUSD is a 30-day month of requests at the measured rate:
	// PUT-class plus GET-class, at the list prices (Prices).
	MonthlyPutUSD float64 `json:"monthly_put_usd"`
	MonthlyGetUSD float64 `json:"monthly_get_usd"`
	MonthlyUSD    float64 `json:"monthly_usd"`
	Prices        string  `json:"prices"`
	// Consolidation's share of the requests and bytes (already in Puts and
	// Gets): WAL objects read and segment objects put, and their bytes.
	ConsolidationGets      float64 `json:"consolidation_gets"`
	ConsolidationPuts      float64 `json:"consolidation_puts"`
	ConsolidationReadBytes float64 `json:"consolidation_read_bytes"`
	ConsolidationPutBytes  float64 `json:"consolidation_put_bytes"`
}

// costDelta derives the request bill from two scrapes, or nil when the
// counters it needs are missing or no time passed.
func costDelta(before, after counters) *Cost {
	c := &Cost{Prices: fmt.Sprintf("$%g per 1,000 PUT-class, $%g per 1,000 GET-class requests (%s)", pricePutPer1000, priceGetPer1000, pricesSource)}
	c.Seconds = after[scrapeTimeKey] - before[scrapeTimeKey]
	if c.Seconds <= 0 {
		return nil
	}
	d := func(name string) float64 { return after[name] - before[name] }
	s3 := false
	for k := range after {
		op, ok := strings.CutPrefix(k, s3OpPrefix)
		if !ok {
			continue
		}
		s3 = true
		switch put, free := s3Class(op); {
		case free:
		case put:
			c.Puts += d(k)
		default:
			c.Gets += d(k)
		}
	}
	if s3 {
		c.From = "s3"
	} else {
		if _, ok := after[metricUploadAttempts]; !ok {
			return nil
		}
		c.From = "sidecar"
		c.Puts = d(metricUploadAttempts) + d(metricSegmentsUploaded)
		c.Gets = d(metricStoreReads) + d(metricConsolidationReads)
	}
	c.ConsolidationGets, c.ConsolidationPuts = d(metricConsolidationReads), d(metricSegmentsUploaded)
	c.ConsolidationReadBytes, c.ConsolidationPutBytes = d(metricConsolidationReadBytes), d(metricSegmentBytes)
	per := func(n, bytes float64) *float64 {
		if bytes <= 0 {
			return nil
		}
		v := n / (bytes / gib)
		return &v
	}
	if _, ok := after[metricUploadHedges]; ok {
		h := d(metricUploadHedges)
		c.Hedges = &h
		if _, ok := after[metricHedgeWins]; ok {
			w := d(metricHedgeWins)
			c.HedgeWins = &w
		}
		if objs := d(metricUploadObjects); objs > 0 {
			pct := h / objs * 100
			c.HedgePercent = &pct
		}
	}
	produced, fetched := d(metricProduced), d(metricFetchBytes)
	c.PutsPerGiB, c.GetsPerGiB = per(c.Puts, produced), per(c.Gets, fetched)
	if c.ConsolidationGets > 0 {
		c.FetchGetsPerGiB = per(c.Gets-c.ConsolidationGets, fetched)
	}
	c.UploadedPerGiB = per(d(metricUploadBytes)/gib, produced)
	c.ReadPerGiB = per(d(metricStoreReadBytes)/gib, fetched)
	c.MonthlyPutUSD = c.Puts / c.Seconds * secondsPerMonth / 1000 * pricePutPer1000
	c.MonthlyGetUSD = c.Gets / c.Seconds * secondsPerMonth / 1000 * priceGetPer1000
	c.MonthlyUSD = c.MonthlyPutUSD + c.MonthlyGetUSD
	return c
}

// costLine is the report's sentence on the prices and the rate behind the
// monthly figure, and consolidation's share of them.
func costLine(target string, c *Cost) string {
	hedges := ""
	if c.Hedges != nil {
		hedges = fmt.Sprintf(", %.0f of them hedges", *c.Hedges)
		if c.HedgeWins != nil {
			hedges += fmt.Sprintf(", %.0f won", *c.HedgeWins)
		}
		if c.HedgePercent != nil {
			hedges += fmt.Sprintf(" (%.1f%% of the objects uploaded)", *c.HedgePercent)
		}
	}
	line := fmt.Sprintf("cost (%s): %.2f PUT-class and %.2f GET-class requests/s (from %s counters over %s%s), a 30-day month at %s\n",
		target, c.Puts/c.Seconds, c.Gets/c.Seconds, c.From, time.Duration(c.Seconds*float64(time.Second)).Round(100*time.Millisecond), hedges, c.Prices)
	if c.ConsolidationGets > 0 || c.ConsolidationPuts > 0 {
		line += fmt.Sprintf("consolidation (%s): %.0f GETs of WAL objects (%.1f MiB), %.0f segment objects put (%.1f MiB)\n",
			target, c.ConsolidationGets, c.ConsolidationReadBytes/(1<<20), c.ConsolidationPuts, c.ConsolidationPutBytes/(1<<20))
	}
	return line
}
