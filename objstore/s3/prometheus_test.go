package s3

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/internal/telemetry"
)

// TestExportS3 checks the S3 request series: diskless_s3_requests_total by
// operation and outcome, every outcome of an operation once it was used
// and none of an unused one, and the attempt duration histogram by
// operation.
func TestExportS3(t *testing.T) {
	p, err := telemetry.NewPrometheus()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	// New makes no request: it defines the store's instruments, and the
	// attempts are recorded here by hand.
	s, err := New(context.Background(), Config{Bucket: "b", Region: "us-east-1", MeterProvider: p})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.record(OpPutObject, OutcomeThrottled, 3*time.Millisecond)
	s.record(OpPutObject, OutcomeThrottled, 3*time.Millisecond)
	s.record(OpPutObject, OutcomeThrottled, 3*time.Millisecond)
	s.record(OpPutObject, OutcomeOK, 40*time.Millisecond)
	s.record(OpGetObject, OutcomeNetwork, 2*time.Second)
	s.record(OpUploadPart, OutcomeServerError, time.Second)
	s.record(OpUploadPart, OutcomeServerError, time.Second)

	rec := httptest.NewRecorder()
	p.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`diskless_s3_requests_total{operation="PutObject",outcome="throttled"} 3`,
		`diskless_s3_requests_total{operation="PutObject",outcome="ok"} 1`,
		`diskless_s3_requests_total{operation="PutObject",outcome="server_error"} 0`,
		`diskless_s3_requests_total{operation="GetObject",outcome="network"} 1`,
		`diskless_s3_requests_total{operation="GetObject",outcome="ok"} 0`,
		`diskless_s3_requests_total{operation="UploadPart",outcome="server_error"} 2`,
		`diskless_s3_requests_total{operation="UploadPart",outcome="timeout"} 0`,
		`diskless_s3_requests_total{operation="UploadPart",outcome="canceled"} 0`,
		// Only the successful attempt is timed.
		`diskless_s3_request_duration_seconds_count{operation="PutObject"} 1`,
		`diskless_s3_request_duration_seconds_bucket{operation="PutObject",le="0.025"} 0`,
		`diskless_s3_request_duration_seconds_bucket{operation="PutObject",le="0.05"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	for _, unwanted := range []string{`diskless_s3_requests_total{operation="HeadBucket"`, `operation="other"`,
		`diskless_s3_request_duration_seconds_count{operation="GetObject"}`} {
		if strings.Contains(string(body), unwanted) {
			t.Errorf("/metrics has %q, an operation never used", unwanted)
		}
	}
	if n := strings.Count(string(body), "\ndiskless_s3_requests_total{"); n != 3*int(NumOutcomes) {
		t.Errorf("%d diskless_s3_requests_total series, want %d (3 operations × every outcome)", n, 3*NumOutcomes)
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
