package produce

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/diskless-sidecar/sidecar/internal/batchtest"
	"github.com/diskless-sidecar/sidecar/internal/telemetry"
)

// BenchmarkProduceTracing is BenchmarkProduce's all-valid request (three
// partitions of 1 KiB batches, acks=-1, each request sealing its own file,
// nop upload and commit) with tracing off and on, as cmd/sidecar wires
// it: off, the handler alone with no TracerProvider; noop, the API's noop
// provider given to the handler and to the request span's wrapper
// (telemetry.TraceProducer), which must cost nothing either (allocs/op
// equal to off); sampled-out, the SDK at ratio 0 (every request a root,
// none sampled); sampled, the SDK recording every span into a span
// processor that exports nowhere: the request span, its three steps and
// the file's upload and commit spans.
func BenchmarkProduceTracing(b *testing.B) {
	mk := func() []byte {
		return batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Record{Value: make([]byte, 1<<10)})
	}
	parts := []part{{0, mk()}, {1, mk()}, {2, mk()}}
	sdk := func(s sdktrace.Sampler) trace.TracerProvider {
		return sdktrace.NewTracerProvider(sdktrace.WithSampler(s),
			sdktrace.WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(tracetest.NewNoopExporter())))
	}
	for _, c := range []struct {
		name string
		tp   trace.TracerProvider // nil: off, no wrapper
	}{
		{"off", nil},
		{"noop", noop.NewTracerProvider()},
		{"sampled-out", sdk(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0)))},
		{"sampled", sdk(sdktrace.AlwaysSample())},
	} {
		b.Run(c.name, func(b *testing.B) {
			benchProduce(b, tracedProducer(b, c.tp).Produce, request(9, -1, "ct", parts...), parts)
		})
	}
}

// tracedProducer is a handler (every request sealing its own file, nop
// upload and commit) given tp, behind the request span's wrapper
// (telemetry.TraceProducer) as cmd/sidecar wires it, or alone when tp is
// nil (tracing off).
func tracedProducer(tb testing.TB, tp trace.TracerProvider) telemetry.ProduceHandler {
	h, err := New(Config{BufferMaxBytes: 1, TracerProvider: tp}, newCatalog(), nopUploader{}, nopCommitter{}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Close(context.Background()) })
	if tp == nil {
		return h
	}
	return telemetry.TraceProducer(tp, h)
}

// TestTracingOffAllocatesNothing: with the noop provider the produce
// path, request wrapper included, allocates exactly what it does with no
// provider at all (BenchmarkProduceTracing measures the same).
func TestTracingOffAllocatesNothing(t *testing.T) {
	allocs := func(tp trace.TracerProvider) float64 {
		p := tracedProducer(t, tp)
		req := request(9, -1, "ct", part{0, good(1)}, part{1, good(1)})
		return testing.AllocsPerRun(200, func() { p.Produce(context.Background(), req)() })
	}
	off, noopAllocs := allocs(nil), allocs(noop.NewTracerProvider())
	if noopAllocs != off {
		t.Errorf("allocations per request: %v with the noop provider, %v with none", noopAllocs, off)
	}
}
