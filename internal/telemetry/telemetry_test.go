package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/upload"
)

type fakeProducer struct{ code int16 }

func (f fakeProducer) Produce(_ context.Context, req *kmsg.ProduceRequest) func() *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	resp.Topics = []kmsg.ProduceResponseTopic{{Partitions: []kmsg.ProduceResponseTopicPartition{{ErrorCode: f.code}}}}
	return func() *kmsg.ProduceResponse { return resp }
}

func (fakeProducer) APIVersions() []kmsg.ApiVersionsResponseApiKey {
	return []kmsg.ApiVersionsResponseApiKey{{ApiKey: 0, MaxVersion: 13}}
}

type fakeFetcher struct{}

func (fakeFetcher) APIVersions() []kmsg.ApiVersionsResponseApiKey {
	return []kmsg.ApiVersionsResponseApiKey{{ApiKey: 1, MinVersion: 4, MaxVersion: 16}}
}

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
	us.Hedges.Add(3)
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
		"diskless_upload_hedges_total 3",
		"diskless_upload_hedge_delay_seconds 0",
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

// TestHealthAndLimits: diskless_coordinator_failed follows the health
// check and diskless_coordinator_shards the shards' states on every
// scrape, every state and role present (0 included); the pending limit
// is the configured value.
func TestHealthAndLimits(t *testing.T) {
	p, err := NewPrometheus()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	var failed error
	var shards []coordinator.ShardHealth
	if err := ObserveHealth(p, func() ([]coordinator.ShardHealth, error) { return shards, failed }); err != nil {
		t.Fatal(err)
	}
	if err := ObserveLimits(p, 1234); err != nil {
		t.Fatal(err)
	}
	scrape := func() string {
		rec := httptest.NewRecorder()
		p.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	serving := coordinator.ShardHealth{Shard: 0, Hosted: true, State: coordinator.ShardServing}
	retrying := coordinator.ShardHealth{Shard: 1, Hosted: true, State: coordinator.ShardRetrying, Err: errors.New("broker gone")}
	replica := coordinator.ShardHealth{Shard: 2, State: coordinator.ShardServing}
	for _, tc := range []struct {
		err    error
		shards []coordinator.ShardHealth
		want   []string
	}{
		{nil, []coordinator.ShardHealth{serving, serving, replica}, []string{"diskless_coordinator_failed 0",
			shardsLine("hosted", "serving", 2), shardsLine("hosted", "retrying", 0), shardsLine("replica", "serving", 1), shardsLine("replica", "failed", 0)}},
		{nil, []coordinator.ShardHealth{serving, retrying, replica}, []string{"diskless_coordinator_failed 0",
			shardsLine("hosted", "serving", 1), shardsLine("hosted", "retrying", 1), shardsLine("replica", "serving", 1)}},
		{errors.New("coordinator: shard failed: shard 1: disk"), []coordinator.ShardHealth{serving, {Shard: 1, Hosted: true, State: coordinator.ShardFailed}},
			[]string{"diskless_coordinator_failed 1", shardsLine("hosted", "failed", 1), shardsLine("hosted", "retrying", 0), shardsLine("replica", "serving", 0)}},
		{nil, nil, []string{"diskless_coordinator_failed 0", shardsLine("hosted", "failed", 0)}},
	} {
		failed, shards = tc.err, tc.shards
		body := scrape()
		for _, want := range append(tc.want, "diskless_produce_pending_limit_bytes 1234") {
			if !strings.Contains(body, want+"\n") {
				t.Fatalf("health %v, shards %v: want %q in:\n%s", tc.err, tc.shards, want, body)
			}
		}
	}
}

// shardsLine is the diskless_coordinator_shards line of role and state.
func shardsLine(role, state string, n int) string {
	return fmt.Sprintf(`diskless_coordinator_shards{role=%q,state=%q} %d`, role, state, n)
}
