// Package tracing starts the OpenTelemetry spans of the hot paths (produce,
// fetch) only when tracing is on, so that with tracing off they cost
// nothing: no context, no span, no attribute is allocated (DESIGN
// §Observability, Traces; bench/RESULTS.md holds the measurement).
//
// A package keeps a Tracer made by New from the trace.TracerProvider of
// its Config. Its zero value, and one made from nil or from the API's noop
// provider, is off: Start returns ctx itself and a span that does nothing.
// Callers set attributes only when the span records (Span.IsRecording),
// since building them allocates whether or not anyone reads them.
//
// The package imports the OpenTelemetry API only, never the SDK:
// cmd/sidecar wires the SDK (internal/telemetry).
package tracing

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Scope is the instrumentation scope of the sidecar's tracers (the same as
// its meters').
const Scope = "github.com/diskless-sidecar/sidecar"

// Tracer starts spans when on; its zero value is off.
type Tracer struct {
	t trace.Tracer
}

// New returns a Tracer of tp's, off when tp is nil or the API's noop
// provider.
func New(tp trace.TracerProvider) Tracer {
	if tp == nil {
		return Tracer{}
	}
	if _, ok := tp.(noop.TracerProvider); ok {
		return Tracer{}
	}
	return Tracer{t: tp.Tracer(Scope)}
}

// On reports whether the Tracer starts spans.
func (t Tracer) On() bool { return t.t != nil }

// off is the span of a Tracer that is off: it records nothing.
var off = trace.SpanFromContext(context.Background())

// Start starts a span named name of kind (trace.SpanKindUnspecified
// means internal), a child of ctx's span if it has one, linked to links,
// and returns ctx with it. When t is off it returns ctx and a span that
// does nothing, allocating nothing: the options are built only when on
// (a caller's variadic options would escape to the heap on every call,
// on or off). Neither does it start a child of a span that was not
// sampled: the sidecar's samplers are parent-based, which would drop it
// (a request sampled out costs its root span only).
func (t Tracer) Start(ctx context.Context, name string, kind trace.SpanKind, links ...trace.Link) (context.Context, trace.Span) {
	if t.t == nil {
		return ctx, off
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && !sc.IsSampled() {
		return ctx, off
	}
	if len(links) == 0 {
		return t.t.Start(ctx, name, trace.WithSpanKind(kind))
	}
	return t.t.Start(ctx, name, trace.WithSpanKind(kind), trace.WithLinks(links...))
}
