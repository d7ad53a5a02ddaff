package s3_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/diskless-sidecar/sidecar/internal/s3fault"
	"github.com/diskless-sidecar/sidecar/objstore"
	"github.com/diskless-sidecar/sidecar/objstore/s3"
)

// counts is a sparse view of Stats.Requests: "operation/outcome" → n.
type counts map[string]int64

func statsOf(st *s3.Stats) counts {
	c := counts{}
	for op := range s3.NumOps {
		for out := range s3.NumOutcomes {
			if n := st.Requests[op][out].Load(); n != 0 {
				c[op.String()+"/"+out.String()] = n
			}
		}
	}
	return c
}

// durationsOf reads the diskless.s3.request.duration histogram from r:
// "operation/ok" → how many attempts it timed, and the operations with an
// attempt timed at 0 or less.
func durationsOf(t *testing.T, r *sdkmetric.ManualReader) (timed counts, untimed []string) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	timed = counts{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "diskless.s3.request.duration" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				op, _ := dp.Attributes.Value("operation")
				timed[op.AsString()+"/ok"] = int64(dp.Count)
				if lo, ok := dp.Min.Value(); !ok || lo <= 0 {
					untimed = append(untimed, op.AsString())
				}
			}
		}
	}
	return timed, untimed
}

// TestS3RequestMetrics drives the store through versitygw and the fault
// proxy and pins Stats exactly: every HTTP attempt counted once, by
// operation and outcome, SDK retries and ReadRange's own retries included;
// and every successful attempt, and only those, is timed in the duration
// histogram. Each attempt is also one span "s3.<operation>" with its
// outcome, a child of the caller's span (DESIGN §Observability, Traces).
func TestS3RequestMetrics(t *testing.T) {
	const part = s3.MinPartSize
	small := randomBytes(1000)
	large := randomBytes(3*part + 7) // 4 parts
	e := newS3Env(t)
	// The objects read below, put by another store, so that each case's
	// store starts at zero and with no connection open: net/http resends
	// a GET by itself, unseen by the SDK, when a reused connection breaks
	// before the answer.
	const obj = "metrics/obj"
	if err := e.store(t, s3.Config{}).Put(t.Context(), obj, large); err != nil {
		t.Fatal(err)
	}
	put := func(data []byte) func(context.Context, *s3.Store) error {
		return func(ctx context.Context, s *s3.Store) error {
			return s.Put(ctx, "metrics/"+fmt.Sprint(time.Now().UnixNano()), data)
		}
	}
	read := func(ctx context.Context, s *s3.Store) error {
		p := make([]byte, 600_000)
		_, _, err := s.ReadRange(ctx, obj, 300_000, p)
		return err
	}
	tests := []struct {
		name    string
		cfg     s3.Config
		rules   []*s3fault.Rule
		run     func(context.Context, *s3.Store) error
		wantErr bool
		want    counts // every count that is not zero
	}{
		{name: "SlowDown on PutObject 3 times", cfg: s3.Config{MaxAttempts: 4},
			rules: []*s3fault.Rule{{Kind: s3fault.PutObject, Times: 3, Fault: s3fault.SlowDown()}},
			run:   put(small),
			want:  counts{"PutObject/throttled": 3, "PutObject/ok": 1}},
		{name: "multipart upload", run: put(large),
			want: counts{"CreateMultipartUpload/ok": 1, "UploadPart/ok": 4, "CompleteMultipartUpload/ok": 1}},
		{name: "a part fails with 500 once",
			rules: []*s3fault.Rule{{Kind: s3fault.UploadPart, PartNumber: 2, Times: 1, Fault: s3fault.InternalError()}},
			run:   put(large),
			want:  counts{"CreateMultipartUpload/ok": 1, "UploadPart/ok": 4, "UploadPart/server_error": 1, "CompleteMultipartUpload/ok": 1}},
		{name: "a part always fails: aborted", cfg: s3.Config{Concurrency: 1},
			rules:   []*s3fault.Rule{{Kind: s3fault.UploadPart, PartNumber: 3, Fault: s3fault.InternalError()}},
			run:     put(large),
			wantErr: true,
			want:    counts{"CreateMultipartUpload/ok": 1, "UploadPart/ok": 2, "UploadPart/server_error": 3, "AbortMultipartUpload/ok": 1}},
		{name: "access denied",
			rules:   []*s3fault.Rule{{Kind: s3fault.PutObject, Fault: s3fault.Error(403, "AccessDenied")}},
			run:     put(small),
			wantErr: true,
			want:    counts{"PutObject/client_error": 1}},
		{name: "no answer within the request timeout", cfg: s3.Config{RequestTimeout: time.Second},
			rules: []*s3fault.Rule{{Kind: s3fault.PutObject, Times: 1, Fault: s3fault.Stall()}},
			run:   put(small),
			want:  counts{"PutObject/timeout": 1, "PutObject/ok": 1}},
		{name: "connection reset on GET",
			rules: []*s3fault.Rule{{Kind: s3fault.GetObject, Times: 1, Fault: s3fault.Reset()}},
			run:   read,
			want:  counts{"GetObject/network": 1, "GetObject/ok": 1}},
		{name: "GET body cut",
			rules: []*s3fault.Rule{{Kind: s3fault.GetObject, Times: 1, Fault: s3fault.TruncateBody(100_000)}},
			run:   read,
			want:  counts{"GetObject/network": 1, "GetObject/ok": 1}},
		{name: "a well-formed answer shorter than its range", // ReadRange rejects it and asks again
			rules: []*s3fault.Rule{{Kind: s3fault.GetObject, Times: 1, Fault: s3fault.ShortBody(100_000)}},
			run:   read,
			want:  counts{"GetObject/network": 1, "GetObject/ok": 1}},
		{name: "a missing bucket is a client error", // a HEAD's 404 carries no NoSuchBucket code
			rules:   []*s3fault.Rule{{Kind: s3fault.Other, Fault: s3fault.Error(404, "NoSuchBucket")}},
			run:     func(ctx context.Context, s *s3.Store) error { return s.Check(ctx) },
			wantErr: true,
			want:    counts{"HeadBucket/client_error": 1}},
		{name: "GET body slower than the timeout", cfg: s3.Config{RequestTimeout: time.Second},
			rules: []*s3fault.Rule{{Kind: s3fault.GetObject, Times: 1, Fault: s3fault.SlowBody(256 << 10)}},
			run:   read,
			want:  counts{"GetObject/timeout": 1, "GetObject/ok": 1}},
		{name: "SlowDown on every GET", rules: []*s3fault.Rule{{Kind: s3fault.GetObject, Fault: s3fault.SlowDown()}},
			run:     read,
			wantErr: true,
			want:    counts{"GetObject/throttled": 3}},
		{name: "missing key and range past the end are answers",
			run: func(ctx context.Context, s *s3.Store) error {
				p := make([]byte, 10)
				if _, _, err := s.ReadRange(ctx, "metrics/missing", 0, p); err == nil {
					return fmt.Errorf("read of a missing key succeeded")
				}
				if _, _, err := s.ReadRange(ctx, "metrics/missing", 0, nil); err == nil {
					return fmt.Errorf("empty read of a missing key succeeded")
				}
				// A 416, then a HEAD for the size.
				if n, size, err := s.ReadRange(ctx, obj, int64(len(large)), p); n != 0 || size != int64(len(large)) || err != nil {
					return fmt.Errorf("read past the end = %d, size %d, %v", n, size, err)
				}
				return nil
			},
			want: counts{"GetObject/ok": 2, "HeadObject/ok": 2}},
		{name: "the other operations",
			run: func(ctx context.Context, s *s3.Store) error {
				if err := s.Check(ctx); err != nil {
					return err
				}
				if err := s.List(ctx, "metrics/none/", func(objstore.ObjectInfo) error { return nil }); err != nil {
					return err
				}
				if err := s.Delete(ctx, "metrics/none/x"); err != nil {
					return err
				}
				_, err := s.AbortStaleUploads(ctx, "metrics/none/", time.Hour)
				return err
			},
			want: counts{"HeadBucket/ok": 1, "ListObjectsV2/ok": 1, "DeleteObject/ok": 1, "ListMultipartUploads/ok": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reader := sdkmetric.NewManualReader()
			cfg := tt.cfg
			cfg.PartSize = part
			cfg.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			defer tp.Shutdown(context.Background())
			cfg.TracerProvider = tp
			s := e.store(t, quick(cfg))
			e.proxy.Clear()
			for _, r := range tt.rules {
				e.proxy.Add(r)
			}
			ctx, parent := tp.Tracer("test").Start(t.Context(), "caller")
			err := tt.run(ctx, s)
			parent.End()
			e.proxy.Clear()
			if (err != nil) != tt.wantErr {
				t.Fatalf("error: %v, want one: %v", err, tt.wantErr)
			}
			if got := statsOf(s.Stats()); !maps.Equal(got, tt.want) {
				t.Errorf("Stats = %v, want %v", got, tt.want)
			}
			wantTimed := counts{}
			for k, n := range tt.want {
				if strings.HasSuffix(k, "/ok") {
					wantTimed[k] = n
				}
			}
			if timed, untimed := durationsOf(t, reader); !maps.Equal(timed, wantTimed) || len(untimed) > 0 {
				t.Errorf("durations timed %v (without a duration: %v), want %v", timed, untimed, wantTimed)
			}
			spans := counts{}
			for _, sp := range rec.Ended() {
				if sp.Name() == "caller" {
					continue
				}
				var outcome string
				for _, kv := range sp.Attributes() {
					if kv.Key == "diskless.s3.outcome" {
						outcome = kv.Value.AsString()
					}
				}
				spans[strings.TrimPrefix(sp.Name(), "s3.")+"/"+outcome]++
				if sp.Parent().TraceID() != parent.SpanContext().TraceID() {
					t.Errorf("span %s is not in the caller's trace", sp.Name())
				}
				if sp.SpanKind() != trace.SpanKindClient {
					t.Errorf("span %s: kind %v, want client", sp.Name(), sp.SpanKind())
				}
			}
			if !maps.Equal(spans, tt.want) {
				t.Errorf("spans %v, want one per attempt: %v", spans, tt.want)
			}
		})
	}
}
