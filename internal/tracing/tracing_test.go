package tracing

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

func TestOff(t *testing.T) {
	for name, tr := range map[string]Tracer{"zero": {}, "nil": New(nil), "noop": New(noop.NewTracerProvider())} {
		if tr.On() {
			t.Errorf("%s: On", name)
		}
		ctx := context.Background()
		got, span := tr.Start(ctx, "x", trace.SpanKindServer)
		if got != ctx {
			t.Errorf("%s: Start returned another context", name)
		}
		if span.IsRecording() || span.SpanContext().IsValid() {
			t.Errorf("%s: the span records", name)
		}
		span.End()
		if n := testing.AllocsPerRun(100, func() {
			_, s := tr.Start(ctx, "x", trace.SpanKindServer)
			s.End()
		}); n != 0 {
			t.Errorf("%s: %v allocations per span, want 0", name, n)
		}
	}
}

func TestOn(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	tr := New(tp)
	if !tr.On() {
		t.Fatal("off with an SDK provider")
	}
	ctx, parent := tr.Start(context.Background(), "parent", trace.SpanKindServer)
	_, child := tr.Start(ctx, "child", 0, trace.Link{SpanContext: parent.SpanContext()})
	child.End()
	parent.End()
	// A child of a span not sampled is not started.
	unsampled := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}}))
	if got, span := tr.Start(unsampled, "orphan", 0); got != unsampled || span.IsRecording() {
		t.Error("started a child of a span not sampled")
	}
	ended := rec.Ended()
	if len(ended) != 2 || ended[0].Name() != "child" || ended[0].Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("spans %v: want child under parent", ended)
	}
	if ended[1].InstrumentationScope().Name != Scope {
		t.Errorf("scope %q", ended[1].InstrumentationScope().Name)
	}
}
