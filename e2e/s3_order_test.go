package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-sidecar/sidecar/internal/history"
	"github.com/diskless-sidecar/sidecar/internal/s3fault"
)

// TestS3CommitOrder runs producers through a store whose PUTs take 1–5 ms
// or 300–600 ms (half each, s3fault's latency model) with hedging off, so
// that later files are often uploaded before earlier ones and committed
// ahead of them (diskless.produce.files.committed.early counts it). Four
// idempotent producers and one without idempotence (5 requests in flight)
// write the same partitions; internal/history checks that nothing
// acknowledged is lost, moved or duplicated, no offset is assigned twice,
// each producer's records are in send order in every partition, and the
// logs are dense; and no partition is answered an error (an idempotent
// producer's batch decided before its earlier one would be refused
// OUT_OF_ORDER_SEQUENCE_NUMBER, which the client's retry hides from the
// history).
func TestS3CommitOrder(t *testing.T) {
	t.Parallel()
	st := StartS3(t)
	m, err := s3fault.ParseLatency("put=1:1-5,1:300-600", 7)
	mustNoErr(t, "latency model", err)
	st.Proxy.SetLatency(m)
	sc := StartSidecarS3(t, st, "",
		"diskless.upload.hedge.enable=false",
		"diskless.append.commit.interval.ms=50",
		"diskless.upload.max.inflight.files=8")
	const (
		topic      = "order"
		partitions = 4
	)
	ctx := testCtx(t, 4*time.Minute)
	createTopic(t, ctx, sc, topic, partitions, nil)
	h := history.New()
	var ps []*hproducer
	// A small buffer per producer keeps the records few (the closed loop
	// would send millions).
	opts := []kgo.Opt{kgo.RecordDeliveryTimeout(time.Minute), kgo.MaxBufferedRecords(2_000)}
	for _, name := range []string{"i1", "i2", "i3", "i4"} {
		ps = append(ps, startProducer(ctx, sc, h, name, topic, partitions, opts...))
	}
	ps = append(ps, startProducer(ctx, sc, h, "plain", topic, partitions, append(opts,
		kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(5))...))
	waitUntil(t, 3*time.Minute, "files committed ahead of earlier ones", func() bool {
		return metricOrZero(t, metricsText(t, sc), "diskless_produce_files_committed_early_total") >= 5
	})
	for _, p := range ps {
		p.waitAcked(t, ctx, 1_000)
	}
	for _, p := range ps {
		p.stopProducing()
		// Stopping fails what the client still buffers ("client
		// closed"); nothing else may fail.
		for msg := range p.failures() {
			if !strings.Contains(msg, "client closed") && !strings.Contains(msg, "context canceled") {
				t.Errorf("%s: a record failed: %s", p.name, msg)
			}
		}
	}
	mt := metricsText(t, sc)
	t.Logf("files committed ahead of an earlier one: %v of %v sealed", metricValue(t, mt, "diskless_produce_files_committed_early_total"),
		metricSum(t, mt, "diskless_produce_files_total"))
	// Nothing fails here, so no partition is answered an error: in
	// particular no OUT_OF_ORDER_SEQUENCE_NUMBER, which an idempotent
	// producer's later batch decided before its earlier one would get (and
	// the client's retry would hide from the history check).
	if n := metricSum(t, mt, "diskless_produce_partition_errors_total"); n != 0 {
		t.Errorf("%v produce partitions answered with an error: %v", n, metricLines(mt, "diskless_produce_partition_errors_total"))
	}
	finalRead(t, ctx, sc, topic, partitions, h)
	sc.Stop()
	st.NoOpenUploads(t)
}

// metricLines returns the samples of family name in Prometheus text.
func metricLines(text, name string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, name+"{") || strings.HasPrefix(l, name+" ") {
			out = append(out, l)
		}
	}
	return out
}

// metricSum sums every sample of family name (all label sets) in
// Prometheus text.
func metricSum(t *testing.T, text, name string) float64 {
	t.Helper()
	var sum float64
	for _, l := range metricLines(text, name) {
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		mustNoErr(t, l, err)
		sum += v
	}
	return sum
}
