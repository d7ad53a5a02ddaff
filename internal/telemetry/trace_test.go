package telemetry

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/objstore"
	"github.com/diskless-sidecar/sidecar/objstore/objstoretest"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// TestNewTracing: tracing is off without an endpoint, with
// OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none; on with the key or the
// standard endpoint variables, over http/protobuf unless the protocol
// variables say grpc; other exporters or protocols are refused naming the
// variable, and a bad endpoint naming the key.
func TestNewTracing(t *testing.T) {
	const ep = "http://127.0.0.1:4318"
	tests := []struct {
		name     string
		endpoint string
		vars     map[string]string
		protocol string // "" when off
		err      string // a part of the error, "" for none
	}{
		{name: "off by default"},
		{name: "the key", endpoint: ep, protocol: "http/protobuf"},
		{name: "OTEL_EXPORTER_OTLP_ENDPOINT", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep}, protocol: "http/protobuf"},
		{name: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", vars: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ep + "/v1/traces"}, protocol: "http/protobuf"},
		{name: "grpc", endpoint: "http://127.0.0.1:4317", vars: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, protocol: "grpc"},
		{name: "the traces protocol wins", endpoint: ep,
			vars: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, protocol: "http/protobuf"},
		{name: "OTEL_SDK_DISABLED", endpoint: ep, vars: map[string]string{"OTEL_SDK_DISABLED": "true"}},
		{name: "OTEL_TRACES_EXPORTER=none", endpoint: ep, vars: map[string]string{"OTEL_TRACES_EXPORTER": "none"}},
		{name: "OTEL_TRACES_EXPORTER=otlp", endpoint: ep, vars: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, protocol: "http/protobuf"},
		{name: "OTEL_TRACES_EXPORTER=zipkin", endpoint: ep, vars: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTEL_TRACES_EXPORTER"},
		{name: "http/json", endpoint: ep, vars: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{name: "not a URL", endpoint: "127.0.0.1:4318", err: "otel.exporter.otlp.endpoint"},
		{name: "no host", endpoint: "http:///v1", err: "otel.exporter.otlp.endpoint"},
		{name: "a query", endpoint: ep + "?a=b", err: "otel.exporter.otlp.endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := NewTracing(t.Context(), TraceConfig{Endpoint: tt.endpoint, SampleRatio: -1, Getenv: env(tt.vars)})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one naming %s", err, tt.err)
				}
				if strings.HasPrefix(tt.err, "OTEL_") && !errors.Is(err, ErrTraceEnv) {
					t.Errorf("error %v is not ErrTraceEnv", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.protocol == "" {
				if tr != nil {
					tr.Shutdown(t.Context())
					t.Fatal("tracing on, want off")
				}
				return
			}
			if tr == nil {
				t.Fatal("tracing off, want on")
			}
			defer tr.Shutdown(context.Background())
			if tr.Protocol != tt.protocol {
				t.Errorf("protocol %s, want %s", tr.Protocol, tt.protocol)
			}
		})
	}
}

// TestSampleRatio: the ratio samples roots (0: none, 1: all) and children
// as their parent.
func TestSampleRatio(t *testing.T) {
	for _, ratio := range []float64{0, 1} {
		tr, err := NewTracing(t.Context(), TraceConfig{Endpoint: "http://127.0.0.1:1", SampleRatio: ratio, Getenv: env(nil)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, root := tr.Tracer("test").Start(t.Context(), "root")
		_, child := tr.Tracer("test").Start(ctx, "child")
		if want := ratio == 1; root.SpanContext().IsSampled() != want || child.SpanContext().IsSampled() != want {
			t.Errorf("ratio %v: root sampled %v, child %v", ratio, root.SpanContext().IsSampled(), child.SpanContext().IsSampled())
		}
		child.End()
		root.End()
		ctx, cancel := context.WithCancel(t.Context())
		cancel() // no receiver: do not wait for the export
		tr.Shutdown(ctx)
	}
}

func recorder(t *testing.T) (*tracetest.SpanRecorder, trace.TracerProvider) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return rec, tp
}

// TestTracedStore: the traced store passes the store conformance suite,
// and each call is one client span named for it, a child of the caller's,
// failures marked.
func TestTracedStore(t *testing.T) {
	_, tp := recorder(t)
	objstoretest.Run(t, func(*testing.T) objstore.Store { return TraceStore(tp, objstoretest.NewMemory()) })

	rec, tp := recorder(t)
	s := TraceStore(tp, objstoretest.NewMemory())
	ctx, parent := tp.Tracer("test").Start(t.Context(), "caller")
	if err := s.Put(ctx, "a/b", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ReadRange(ctx, "a/b", 1, make([]byte, 2)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ReadRange(ctx, "a/missing", 0, make([]byte, 2)); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatal(err)
	}
	if err := s.List(ctx, "a/", func(objstore.ObjectInfo) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "a/b"); err != nil {
		t.Fatal(err)
	}
	parent.End()
	var got []string
	for _, sp := range rec.Ended() {
		if sp.Name() == "caller" {
			continue
		}
		if sp.Parent().SpanID() != parent.SpanContext().SpanID() || sp.SpanKind() != trace.SpanKindClient {
			t.Errorf("%s: parent %v kind %v, want a client child of the caller", sp.Name(), sp.Parent().SpanID(), sp.SpanKind())
		}
		got = append(got, sp.Name()+":"+sp.Status().Code.String())
	}
	want := "objstore.Put:Unset objstore.ReadRange:Unset objstore.ReadRange:Error objstore.List:Unset objstore.Delete:Unset"
	if strings.Join(got, " ") != want {
		t.Errorf("spans %v, want %s", got, want)
	}
}

// TestTracedWrappers: a Produce, a Fetch and a commit through the
// wrappers are one span each; partition errors mark the span failed.
func TestTracedWrappers(t *testing.T) {
	rec, tp := recorder(t)
	p := TraceProducer(tp, fakeProducer{code: 6})
	preq := kmsg.NewPtrProduceRequest()
	preq.Acks = -1
	p.Produce(t.Context(), preq)()
	f := TraceFetcher(tp, fakeFetcher{})
	f.Fetch(t.Context(), kmsg.NewPtrFetchRequest())
	sh := TraceShards(tp, fakeShards{})
	if _, err := sh.CommitFile(t.Context(), 3, &diskless.CommitFileRequest{ObjectKey: "k"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, sp := range rec.Ended() {
		got = append(got, sp.Name()+":"+sp.Status().Code.String()+":"+sp.SpanKind().String())
	}
	want := "produce:Error:server fetch:Unset:server coordinator.commit:Unset:internal"
	if strings.Join(got, " ") != want {
		t.Errorf("spans %v, want %s", got, want)
	}
}
