package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-sidecar/sidecar/internal/s3fault"
)

// The end-to-end tests of the first issue, with objects in S3 (versitygw
// behind the fault proxy, no faults): the same clients, the same checks,
// on both metadata logs.

func TestS3KgoEndToEnd(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, sets []string) {
		st := StartS3(t)
		sc := StartSidecarS3(t, st, "", sets...)
		runKgoEndToEnd(t, sc, 20_000)
		c := st.Proxy.Counts()
		t.Logf("S3 requests: %v", c)
		if c[s3fault.PutObject] == 0 {
			t.Fatalf("no PutObject reached S3: %v", c)
		}
		sc.Stop()
		st.NoOpenUploads(t)
	})
}

func TestS3KcatEndToEnd(t *testing.T) {
	t.Parallel()
	requireTool(t, "kcat")
	forEachBackend(t, func(t *testing.T, sets []string) {
		st := StartS3(t)
		runKcatEndToEnd(t, StartSidecarS3(t, st, "", sets...))
	})
}

// TestS3DurabilityAfterSIGKILL kills an S3-backed sidecar mid-load: every
// acknowledged record is there after a restart, once, offsets dense.
func TestS3DurabilityAfterSIGKILL(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, sets []string) {
		st := StartS3(t)
		testRestart(t, func(dir string) *Sidecar { return StartSidecarS3(t, st, dir, sets...) }, (*Sidecar).Kill)
	})
}

// everyNth matches every n-th request it is asked about.
func everyNth(n int64) func(*http.Request) bool {
	var c atomic.Int64
	return func(*http.Request) bool { return c.Add(1)%n == 0 }
}

// retriableOrDeliveryErr reports whether a produce error is one a client
// retries on its own or a delivery timeout or shutdown of the producer —
// never a fatal one.
func retriableOrDeliveryErr(msg string) bool {
	for _, ok := range []error{kgo.ErrRecordTimeout, kgo.ErrClientClosed, context.Canceled, context.DeadlineExceeded} {
		if strings.Contains(msg, ok.Error()) {
			return true
		}
	}
	for code := int16(1); code < 120; code++ {
		if e := kerr.ErrorForCode(code); e != nil && kerr.IsRetriable(e) && strings.Contains(msg, e.Error()) {
			return true
		}
	}
	return false
}

// metricOrZero is metricValue, 0 for a metric not exported yet (a counter
// before its first count).
func metricOrZero(t *testing.T, text, name string) float64 {
	t.Helper()
	if !strings.Contains(text, "\n"+name+" ") {
		return 0
	}
	return metricValue(t, text, name)
}

// TestS3FaultsWhileProducing runs an idempotent producer through a series
// of S3 faults injected between the sidecar and versitygw — throttling,
// connection resets, requests without an answer, answers lost after the
// store acted, and an outage longer than the upload retries — and requires
// that the sidecar stays up, that producers only see slower answers or
// retriable errors, that every acknowledged record is readable exactly once
// at its offset, and that no multipart upload is left open.
func TestS3FaultsWhileProducing(t *testing.T) {
	t.Parallel()
	st := StartS3(t)
	sc := StartSidecarS3(t, st, "",
		"diskless.storage.s3.request.timeout.ms=1000",
		"diskless.upload.attempt.timeout.ms=4000",
		"diskless.upload.max.attempts=4",
		"diskless.upload.retry.backoff.ms=50",
		"diskless.upload.retry.backoff.max.ms=200")
	const (
		topic      = "faults"
		partitions = 4
	)
	ctx := testCtx(t, 5*time.Minute)
	createTopic(t, ctx, sc, topic, partitions, nil)

	var acked atomic.Int64
	stop := make(chan struct{})
	type result struct {
		acked map[string]ackedAt
		errs  map[string]int
	}
	done := make(chan result)
	go func() {
		a, e := produceUntilStoppedErrs(ctx, sc, topic, &acked, stop, kgo.RecordDeliveryTimeout(60*time.Second))
		done <- result{a, e}
	}()
	waitAcked := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for acked.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("only %d records acknowledged, waiting for %d", acked.Load(), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitAcked(2000)

	// Each phase lasts until its faults were injected (and, for the
	// outage, until an upload failed after all its retries), not for a
	// fixed time: on a loaded machine the sidecar may upload little in a
	// second or two.
	getMetrics := func() string { _, m := httpGet(t, "http://"+sc.HTTP+"/metrics"); return m }
	failuresBefore := metricOrZero(t, getMetrics(), "diskless_upload_failures_total")
	phases := []struct {
		name  string
		rules []*s3fault.Rule
		until func(fired int64) bool
	}{
		{"503 SlowDown on every other PUT", []*s3fault.Rule{{Kind: s3fault.PutObject, Match: everyNth(2), Fault: s3fault.SlowDown()}},
			func(fired int64) bool { return fired >= 3 }},
		{"connection reset on every third PUT", []*s3fault.Rule{{Kind: s3fault.PutObject, Match: everyNth(3), Fault: s3fault.Reset()}},
			func(fired int64) bool { return fired >= 3 }},
		{"no answer to three PUTs (request timeouts)", []*s3fault.Rule{{Kind: s3fault.PutObject, Times: 3, Fault: s3fault.Stall()}},
			func(fired int64) bool { return fired >= 3 }},
		{"answer lost after every other PUT was stored", []*s3fault.Rule{{Kind: s3fault.PutObject, Match: everyNth(2), Fault: s3fault.LoseAnswer()}},
			func(fired int64) bool { return fired >= 3 }},
		{"500 on every PUT, longer than the upload retries", []*s3fault.Rule{{Kind: s3fault.PutObject, Fault: s3fault.InternalError()}},
			func(int64) bool {
				m := getMetrics()
				return metricOrZero(t, m, "diskless_upload_failures_total") > failuresBefore &&
					strings.Contains(m, `diskless_produce_partition_errors_total{error="KAFKA_STORAGE_ERROR"}`)
			}},
	}
	for _, ph := range phases {
		before := acked.Load()
		for _, r := range ph.rules {
			st.Proxy.Add(r)
		}
		fired := func() int64 {
			n := int64(0)
			for _, r := range ph.rules {
				n += r.Fired()
			}
			return n
		}
		waitUntil(t, 2*time.Minute, ph.name, func() bool { return ph.until(fired()) })
		st.Proxy.Clear()
		// Recovered: acknowledgements continue once the faults stop.
		waitAcked(acked.Load() + 500)
		t.Logf("%s: %d faults injected, %d records acknowledged during the phase and recovery", ph.name, fired(), acked.Load()-before)
		if !sc.Alive() {
			t.Fatalf("the sidecar exited during %q", ph.name)
		}
	}
	close(stop)
	res := <-done

	for msg, n := range res.errs {
		if !retriableOrDeliveryErr(msg) {
			t.Errorf("producer saw a non-retriable error %d times: %s", n, msg)
		}
	}
	t.Logf("producer errors: %v", res.errs)
	metrics := getMetrics()
	retries := metricValue(t, metrics, "diskless_upload_retries_total")
	failures := metricValue(t, metrics, "diskless_upload_failures_total")
	if retries == 0 || failures == 0 {
		t.Errorf("upload retries %v, failures %v; want both > 0", retries, failures)
	}
	if !strings.Contains(metrics, `diskless_produce_partition_errors_total{error="KAFKA_STORAGE_ERROR"}`) {
		t.Errorf("no KAFKA_STORAGE_ERROR answered to producers during the outage")
	}
	// The S3 attempts the faults failed are visible by operation and outcome.
	if ok := metricValue(t, metrics, `diskless_s3_requests_total{operation="PutObject",outcome="ok"}`); ok == 0 {
		t.Errorf("no successful PutObject counted")
	}
	var failed float64
	for _, l := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(l, "diskless_s3_requests_total{") && !strings.Contains(l, `outcome="ok"`) {
			f := strings.Fields(l)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			mustNoErr(t, l, err)
			failed += v
		}
	}
	if failed == 0 {
		t.Errorf("S3 faults were injected but no failed S3 attempt was counted")
	}
	verifyAcked(t, ctx, sc, topic, partitions, res.acked)
	t.Logf("S3 requests: %v", st.Proxy.Counts())
	sc.Stop()
	st.NoOpenUploads(t)
}

// bigRecords produces n records of size bytes each (distinct, random,
// incompressible values) to topic and returns the acknowledged ones.
func bigRecords(t *testing.T, ctx context.Context, sc *Sidecar, topic string, first, n, size int) map[string]ackedAt {
	t.Helper()
	// Several producers (one request in flight each, as idempotence
	// requires), so that files fill up to their size limit instead of
	// waiting for their age one request at a time.
	const producers = 8
	var (
		mu    sync.Mutex
		acked = make(map[string]ackedAt, n)
		errs  []error
		wg    sync.WaitGroup
	)
	for c := range producers {
		// Round robin: each request carries a batch for every partition.
		prod := sc.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
			kgo.ProducerLinger(20*time.Millisecond), kgo.RecordDeliveryTimeout(2*time.Minute))
		for i := first + c; i < first+n; i += producers {
			v := make([]byte, size)
			_, _ = rand.NewChaCha8([32]byte{byte(i), byte(i >> 8)}).Read(v)
			copy(v, fmt.Sprintf("big-%06d;", i))
			wg.Add(1)
			prod.Produce(ctx, &kgo.Record{Value: v}, func(r *kgo.Record, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				acked[string(r.Value)] = ackedAt{r.Partition, r.Offset}
			})
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("%d of %d records failed: %v", len(errs), n, errs[0])
	}
	return acked
}

// TestS3MultipartEndToEnd has files larger than the part size go up as
// multipart uploads (counted at the proxy), first cleanly, then with parts,
// Completes and Creates failing or losing their answers; every record comes
// back exactly once and no upload is left open.
func TestS3MultipartEndToEnd(t *testing.T) {
	t.Parallel()
	st := StartS3(t)
	sc := StartSidecarS3(t, st, "",
		"diskless.upload.part.bytes=5242880",
		"diskless.upload.concurrency=2",
		"diskless.append.buffer.max.bytes=6291456",
		"diskless.append.commit.interval.ms=3000",
		// The request counts below are of one attempt per upload: a hedge
		// (a slow multipart upload on a loaded machine) would add its own
		// Create and parts, and an Abort when it loses.
		"diskless.upload.hedge.enable=false")
	const (
		topic      = "multipart"
		partitions = 4
		size       = 200 << 10
		perPhase   = 120 // 24 MiB: about 4 files of 6 MiB
	)
	ctx := testCtx(t, 5*time.Minute)
	createTopic(t, ctx, sc, topic, partitions, nil)

	acked := bigRecords(t, ctx, sc, topic, 0, perPhase, size)
	c := st.Proxy.Counts()
	t.Logf("clean: S3 requests %v", c)
	if c[s3fault.CreateMultipartUpload] < 2 || c[s3fault.CompleteMultipartUpload] != c[s3fault.CreateMultipartUpload] ||
		c[s3fault.UploadPart] < 2*c[s3fault.CompleteMultipartUpload] || c[s3fault.AbortMultipartUpload] != 0 {
		t.Fatalf("want at least 2 multipart uploads of at least 2 parts each, all completed: %v", c)
	}

	st.Proxy.ResetCounts()
	// Every attempt at part 2 of one upload fails: the SDK gives up on the
	// part, the upload is aborted and the object sent again in a new one.
	var firstUpload atomic.Pointer[string]
	oneUpload := func(r *http.Request) bool {
		id := r.URL.Query().Get("uploadId")
		firstUpload.CompareAndSwap(nil, &id)
		return *firstUpload.Load() == id
	}
	rules := []*s3fault.Rule{
		st.Proxy.Add(&s3fault.Rule{Kind: s3fault.UploadPart, PartNumber: 2, Match: oneUpload, Fault: s3fault.InternalError()}),
		st.Proxy.Add(&s3fault.Rule{Kind: s3fault.CompleteMultipartUpload, Times: 1, Fault: s3fault.LoseAnswer()}),
		st.Proxy.Add(&s3fault.Rule{Kind: s3fault.CompleteMultipartUpload, Skip: 2, Times: 3, Fault: s3fault.SlowDown()}),
		st.Proxy.Add(&s3fault.Rule{Kind: s3fault.CreateMultipartUpload, Skip: 3, Times: 1, Fault: s3fault.LoseAnswer()}),
	}
	for k, v := range bigRecords(t, ctx, sc, topic, perPhase, perPhase, size) {
		acked[k] = v
	}
	c = st.Proxy.Counts()
	t.Logf("faults: S3 requests %v", c)
	for i, r := range rules {
		if r.Fired() == 0 {
			t.Errorf("rule %d never fired", i)
		}
	}
	// One abort for the failed part's upload, one for the upload whose
	// Create answer was lost (found by listing the key's uploads).
	if c[s3fault.AbortMultipartUpload] < 2 || c[s3fault.ListMultipartUploads] == 0 {
		t.Errorf("want at least 2 multipart uploads aborted and a listing of uploads: %v", c)
	}
	if !sc.Alive() {
		t.Fatal("the sidecar exited")
	}
	verifyAcked(t, ctx, sc, topic, partitions, acked)
	sc.Stop()
	st.NoOpenUploads(t)
}

// TestS3FetchFaults reads through a sidecar whose cache is empty (restarted
// on the same data.dir) while GETs fail: each fetch answers the partition
// KAFKA_STORAGE_ERROR, and once the faults stop the same fetches return the
// records. A slow GET body only makes the answer slower.
func TestS3FetchFaults(t *testing.T) {
	t.Parallel()
	st := StartS3(t)
	dir := t.TempDir()
	sc := StartSidecarS3(t, st, dir)
	const topic = "reads"
	ctx := testCtx(t, 3*time.Minute)
	createTopic(t, ctx, sc, topic, 2, nil)
	prod := sc.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := range 2000 {
		recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "read-%d", i), Partition: int32(i % 2)})
	}
	mustNoErr(t, "produce", prod.ProduceSync(ctx, recs...).FirstErr())
	sc.Stop()

	sc = StartSidecarS3(t, st, dir, "diskless.storage.s3.request.timeout.ms=500")
	rc := sc.DialRaw()
	for _, f := range []struct {
		name  string
		fault s3fault.Fault
	}{
		{"503 SlowDown", s3fault.SlowDown()},
		{"connection reset", s3fault.Reset()},
		{"body cut short", s3fault.TruncateBody(10)},
		{"no answer", s3fault.Stall()},
	} {
		rule := st.Proxy.Add(&s3fault.Rule{Kind: s3fault.GetObject, Fault: f.fault})
		for p := range int32(2) {
			got := fetchRaw(t, rc, topic, p, 0, 1<<20, 100*time.Millisecond)
			if got.ErrorCode != kerr.KafkaStorageError.Code {
				t.Fatalf("%s: fetch of partition %d answered error %d, want KAFKA_STORAGE_ERROR", f.name, p, got.ErrorCode)
			}
		}
		st.Proxy.Clear()
		if rule.Fired() == 0 {
			t.Fatalf("%s: no GET was faulted", f.name)
		}
		if !sc.Alive() {
			t.Fatalf("the sidecar exited after %s", f.name)
		}
	}
	st.Proxy.Add(&s3fault.Rule{Kind: s3fault.GetObject, Times: 1, Fault: s3fault.SlowBody(256 << 10)})
	for p := range int32(2) {
		got := fetchRaw(t, rc, topic, p, 0, 1<<20, 100*time.Millisecond)
		if got.ErrorCode != 0 || len(got.RecordBatches) == 0 {
			t.Fatalf("fetch of partition %d after the faults: error %d, %d bytes", p, got.ErrorCode, len(got.RecordBatches))
		}
	}
	st.Proxy.Clear()
	n := 0
	for _, part := range consumeAll(t, ctx, sc, topic, 2, len(recs)) {
		n += len(part)
	}
	if n != len(recs) {
		t.Fatalf("consumed %d records, produced %d", n, len(recs))
	}
}
