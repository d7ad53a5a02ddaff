package telemetry

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/tracing"
	"github.com/diskless-sidecar/sidecar/objstore"
)

// The spans of the stages' wrappers (DESIGN §Observability, Traces). Each
// wrapper is installed by cmd/sidecar only when tracing is on; the stages'
// own spans (produce.validate, fetch.find, ...) are children of these.

// fail marks span failed with err.
func fail(span trace.Span, err error) {
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}

// TracedProducer starts a span per Produce request, "produce", ended when
// its answer is ready (acks=0: when it was accepted); the produce stage's
// spans are its children and the spans of the file carrying its batches
// link to it.
type TracedProducer struct {
	next ProduceHandler
	tr   tracing.Tracer
}

// TraceProducer wraps next with tp's spans.
func TraceProducer(tp trace.TracerProvider, next ProduceHandler) *TracedProducer {
	return &TracedProducer{next: next, tr: tracing.New(tp)}
}

// APIVersions returns the wrapped handler's versions.
func (p *TracedProducer) APIVersions() []kmsg.ApiVersionsResponseApiKey {
	return p.next.APIVersions()
}

// Produce implements server.Producer.
func (p *TracedProducer) Produce(ctx context.Context, req *kmsg.ProduceRequest) func() *kmsg.ProduceResponse {
	if !p.tr.On() {
		return p.next.Produce(ctx, req) // no wait function of its own
	}
	ctx, span := p.tr.Start(ctx, "produce", trace.SpanKindServer)
	if span.IsRecording() {
		var parts int
		var n int64
		for i := range req.Topics {
			parts += len(req.Topics[i].Partitions)
			for j := range req.Topics[i].Partitions {
				n += int64(len(req.Topics[i].Partitions[j].Records))
			}
		}
		span.SetAttributes(attribute.Int("diskless.acks", int(req.Acks)), attribute.Int("diskless.partitions", parts),
			attribute.Int64("diskless.bytes", n), attribute.Int("kafka.api.version", int(req.Version)))
	}
	wait := p.next.Produce(ctx, req)
	return func() *kmsg.ProduceResponse {
		resp := wait()
		if span.IsRecording() && resp != nil {
			n, first := produceErrors(resp)
			endWithErrors(span, n, first)
		}
		span.End()
		return resp
	}
}

func produceErrors(resp *kmsg.ProduceResponse) (n int, first int16) {
	for i := range resp.Topics {
		for _, pr := range resp.Topics[i].Partitions {
			if pr.ErrorCode != 0 {
				if n == 0 {
					first = pr.ErrorCode
				}
				n++
			}
		}
	}
	return n, first
}

// endWithErrors records a request's partition errors on its span: their
// number, and the first one's Kafka name as the span's error status.
func endWithErrors(span trace.Span, n int, first int16) {
	if n == 0 {
		return
	}
	kv := errorAttr(first)
	span.SetAttributes(attribute.Int("diskless.partition.errors", n))
	span.SetStatus(codes.Error, kv.Value.AsString())
}

// TracedFetcher starts a span per Fetch request, "fetch", long-poll
// included; fetch's spans (fetch.find, fetch.long_poll, fetch.read) are
// its children. ListOffsets and OffsetForLeaderEpoch pass untraced.
type TracedFetcher struct {
	FetchHandler
	tr tracing.Tracer
}

// TraceFetcher wraps next with tp's spans.
func TraceFetcher(tp trace.TracerProvider, next FetchHandler) *TracedFetcher {
	return &TracedFetcher{FetchHandler: next, tr: tracing.New(tp)}
}

// Fetch implements server.Fetcher.
func (f *TracedFetcher) Fetch(ctx context.Context, req *kmsg.FetchRequest) *kmsg.FetchResponse {
	ctx, span := f.tr.Start(ctx, "fetch", trace.SpanKindServer)
	defer span.End()
	resp := f.FetchHandler.Fetch(ctx, req)
	if span.IsRecording() && resp != nil {
		var parts, errs int
		var first int16
		var n int64
		for i := range resp.Topics {
			for _, p := range resp.Topics[i].Partitions {
				parts++
				n += int64(len(p.RecordBatches))
				if p.ErrorCode != 0 {
					if errs == 0 {
						first = p.ErrorCode
					}
					errs++
				}
			}
		}
		span.SetAttributes(attribute.Int("diskless.partitions", parts), attribute.Int64("diskless.bytes", n),
			attribute.Int("kafka.api.version", int(req.Version)), attribute.Int("diskless.fetch.max_wait_ms", int(req.MaxWaitMillis)))
		endWithErrors(span, errs, first)
	}
	return resp
}

// TracedShards starts a span per coordinator commit, "coordinator.commit":
// one CommitFile call on one shard, a child of the file's commit span.
type TracedShards struct {
	ShardCommitter
	tr tracing.Tracer
}

// TraceShards wraps next with tp's spans.
func TraceShards(tp trace.TracerProvider, next ShardCommitter) *TracedShards {
	return &TracedShards{ShardCommitter: next, tr: tracing.New(tp)}
}

// CommitFile implements commit.Shards.
func (s *TracedShards) CommitFile(ctx context.Context, shard int32, req *diskless.CommitFileRequest) ([]diskless.CommitBatchResult, error) {
	ctx, span := s.tr.Start(ctx, "coordinator.commit", trace.SpanKindInternal)
	defer span.End()
	rs, err := s.ShardCommitter.CommitFile(ctx, shard, req)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("diskless.shard", int(shard)), attribute.Int("diskless.batches", len(req.Batches)),
			attribute.String("diskless.object.key", req.ObjectKey))
		if err != nil {
			fail(span, err)
		} else {
			refused := 0
			for i := range rs {
				if rs[i].Err != nil {
					refused++
				}
			}
			span.SetAttributes(attribute.Int("diskless.batches.refused", refused))
		}
	}
	return rs, err
}

// TracedStore starts a span per object-store call — "objstore.Put",
// "objstore.ReadRange", "objstore.Delete", "objstore.List" — as a client
// of the store; the S3 store's spans of its HTTP requests (one per
// attempt: PutObject, or CreateMultipartUpload, UploadPart… and
// CompleteMultipartUpload; GetObject; DeleteObject; ListObjectsV2) are
// their children.
type TracedStore struct {
	next objstore.Store
	tr   tracing.Tracer
}

var _ objstore.Store = (*TracedStore)(nil)

// TraceStore wraps next with tp's spans.
func TraceStore(tp trace.TracerProvider, next objstore.Store) *TracedStore {
	return &TracedStore{next: next, tr: tracing.New(tp)}
}

// Put implements objstore.Store.
func (s *TracedStore) Put(ctx context.Context, key string, data []byte) error {
	ctx, span := s.tr.Start(ctx, "objstore.Put", trace.SpanKindClient)
	defer span.End()
	err := s.next.Put(ctx, key, data)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("diskless.object.key", key), attribute.Int("diskless.bytes", len(data)))
		if err != nil {
			fail(span, err)
		}
	}
	return err
}

// ReadRange implements objstore.Store.
func (s *TracedStore) ReadRange(ctx context.Context, key string, off int64, p []byte) (int, int64, error) {
	ctx, span := s.tr.Start(ctx, "objstore.ReadRange", trace.SpanKindClient)
	defer span.End()
	n, size, err := s.next.ReadRange(ctx, key, off, p)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("diskless.object.key", key), attribute.Int64("diskless.offset", off),
			attribute.Int("diskless.bytes", n))
		if err != nil {
			fail(span, err)
		}
	}
	return n, size, err
}

// Delete implements objstore.Store.
func (s *TracedStore) Delete(ctx context.Context, key string) error {
	ctx, span := s.tr.Start(ctx, "objstore.Delete", trace.SpanKindClient)
	defer span.End()
	err := s.next.Delete(ctx, key)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("diskless.object.key", key))
		if err != nil {
			fail(span, err)
		}
	}
	return err
}

// List implements objstore.Store.
func (s *TracedStore) List(ctx context.Context, prefix string, fn func(objstore.ObjectInfo) error) error {
	ctx, span := s.tr.Start(ctx, "objstore.List", trace.SpanKindClient)
	defer span.End()
	n := 0
	err := s.next.List(ctx, prefix, func(o objstore.ObjectInfo) error {
		n++
		return fn(o)
	})
	if span.IsRecording() {
		span.SetAttributes(attribute.String("diskless.prefix", prefix), attribute.Int("diskless.objects", n))
		if err != nil {
			fail(span, err)
		}
	}
	return err
}
