package telemetry

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/objstore"
	"github.com/diskless-sidecar/sidecar/upload"
)

type fakeProducer struct{ code int16 }

func (f fakeProducer) Produce(_ context.Context, req *kmsg.ProduceRequest) func() *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	resp.Topics = []kmsg.ProduceResponseTopic{{Partitions: []kmsg.ProduceResponseTopicPartition{{ErrorCode: f.code}}}}
	return func() *kmsg.ProduceResponse { return resp }
}

type fakeFetcher struct{}

func (fakeFetcher) Fetch(_ context.Context, req *kmsg.FetchRequest) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.Topics = []kmsg.FetchResponseTopic{{Partitions: []kmsg.FetchResponseTopicPartition{{RecordBatches: make([]byte, 42)}}}}
	return resp
}

func (fakeFetcher) ListOffsets(_ context.Context, req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
	return req.ResponseKind().(*kmsg.ListOffsetsResponse)
}

func (fakeFetcher) OffsetForLeaderEpoch(_ context.Context, req *kmsg.OffsetForLeaderEpochRequest) *kmsg.OffsetForLeaderEpochResponse {
	return req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
}

type fakeShards struct{}

func (fakeShards) ShardFor(diskless.TopicID, int32) int32 { return 3 }
func (fakeShards) CommitFile(context.Context, int32, *diskless.CommitFileRequest) ([]diskless.CommitBatchResult, error) {
	return nil, nil
}

// TestExport defines every instrument, drives the wrappers once and checks
// the Prometheus names the load tool and dashboards rely on.
func TestExport(t *testing.T) {
	p, err := NewPrometheus()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	var us upload.Stats
	us.Uploads.Add(2)
	us.BytesUploaded.Add(1000)
	var cs cache.Stats
	cs.StoreReads.Add(5)
	if err := ObserveUpload(p, &us); err != nil {
		t.Fatal(err)
	}
	if err := ObserveCache(p, &cs); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.Topics = []kmsg.ProduceRequestTopic{{Partitions: []kmsg.ProduceRequestTopicPartition{{Records: make([]byte, 7)}}}}
	NewProducer(p, fakeProducer{code: 2}).Produce(context.Background(), req)()
	for _, acks := range []int16{2, 5, -7} { // Kafka refuses these: one series for all
		bad := *req
		bad.Acks = acks
		NewProducer(p, fakeProducer{code: 2}).Produce(context.Background(), &bad)()
	}
	NewFetcher(p, fakeFetcher{}).Fetch(context.Background(), kmsg.NewPtrFetchRequest())
	NewShards(p, fakeShards{}).CommitFile(context.Background(), 3, &diskless.CommitFileRequest{})

	rec := httptest.NewRecorder()
	p.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		"diskless_upload_objects_total 2",
		"diskless_upload_bytes_total 1000",
		"diskless_cache_store_reads_total 5",
		"diskless_fetch_bytes_total 42",
		"diskless_produce_received_bytes_total 28", // 7 bytes in each of 4 requests
		`diskless_produce_partition_errors_total{error="CORRUPT_MESSAGE"} 4`,
		`diskless_produce_latency_seconds_count{acks="-1"} 1`,
		`diskless_produce_latency_seconds_count{acks="invalid"} 3`,
		`diskless_commit_latency_seconds_count{shard="3"} 1`,
		"go_goroutines",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}

// TestExportS3 checks the S3 request series: diskless_s3_requests_total by
// operation and outcome, every outcome of an operation once it was used
// and none of an unused one, and the attempt duration histogram by
// operation.
func TestExportS3(t *testing.T) {
	p, err := NewPrometheus()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	var st objstore.S3Stats
	st.Requests[objstore.S3OpPutObject][objstore.S3Throttled].Add(3)
	st.Requests[objstore.S3OpPutObject][objstore.S3OK].Add(1)
	st.Requests[objstore.S3OpGetObject][objstore.S3Network].Add(1)
	st.Requests[objstore.S3OpUploadPart][objstore.S3ServerError].Add(2)
	if err := ObserveS3(p, &st); err != nil {
		t.Fatal(err)
	}
	record := S3Durations(p)
	record(objstore.S3Attempt{Op: objstore.S3OpPutObject, Outcome: objstore.S3Throttled, Duration: 3 * time.Millisecond})
	record(objstore.S3Attempt{Op: objstore.S3OpPutObject, Outcome: objstore.S3OK, Duration: 40 * time.Millisecond})
	record(objstore.S3Attempt{Op: objstore.S3OpGetObject, Outcome: objstore.S3Network, Duration: 2 * time.Second})

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
	if n := strings.Count(string(body), "\ndiskless_s3_requests_total{"); n != 3*int(objstore.NumS3Outcomes) {
		t.Errorf("%d diskless_s3_requests_total series, want %d (3 operations × every outcome)", n, 3*objstore.NumS3Outcomes)
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
