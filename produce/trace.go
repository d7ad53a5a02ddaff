package produce

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// noSpan is the span of a file that carries no sampled request: it
// records nothing.
var noSpan = trace.SpanFromContext(context.Background())

// fileSpan starts f's span named name (produce.file.upload,
// produce.file.commit: DESIGN §Observability, Traces) when f carries a
// sampled request: a child of the first such request's span, so that a
// parent-based sampler keeps it and that request's trace shows its file's
// upload and commit, and linked to every sampled request whose batches f
// carries (up to maxFileLinks). Otherwise it returns ctx and noSpan.
func (h *Handler) fileSpan(ctx context.Context, f *file, name string) (context.Context, trace.Span) {
	if len(f.links) == 0 {
		return ctx, noSpan
	}
	ctx = trace.ContextWithSpanContext(ctx, f.links[0].SpanContext)
	ctx, span := h.tr.Start(ctx, name, trace.SpanKindInternal, f.links...)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int64("diskless.file.seq", int64(f.seq)),
			attribute.Int("diskless.batches", len(f.batches)), attribute.Int("diskless.bytes", f.size),
			attribute.Int("diskless.file.requests", f.requests), attribute.String("diskless.file.seal_reason", f.sealReason))
	}
	return ctx, span
}

// endFileSpan ends a span of fileSpan's: the object's key and size, err
// as its failure, and the batches the coordinators refused.
func endFileSpan(span trace.Span, f *file, err error) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String("diskless.object.key", f.key), attribute.Int("diskless.object.bytes", len(f.object)))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(otelcodes.Error, err.Error())
		}
		if f.results != nil {
			refused := 0
			for i := range f.results {
				if f.results[i].Err != nil {
					refused++
				}
			}
			span.SetAttributes(attribute.Int("diskless.batches.refused", refused))
			if refused > 0 {
				span.SetStatus(otelcodes.Error, "batches refused")
			}
		}
	}
	span.End()
}
