package s3

import (
	"context"
	"io"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
)

// Op is an S3 operation that the S3 store's client performs: a label of
// its request counts (Stats) and durations. The set is fixed,
// so that the metrics have a bounded number of series.
type Op uint8

// The operations S3 uses. OpOther stands for any operation not listed
// (none today).
const (
	OpOther Op = iota
	OpHeadBucket
	OpPutObject
	OpCreateMultipartUpload
	OpUploadPart
	OpCompleteMultipartUpload
	OpAbortMultipartUpload
	OpListMultipartUploads
	OpGetObject
	OpHeadObject
	OpDeleteObject
	OpListObjectsV2
	// NumOps is the number of operations, OpOther included.
	NumOps
)

// s3OpNames are the operations' names: the S3 API's (and the SDK's).
var s3OpNames = [NumOps]string{
	OpOther:                   "other",
	OpHeadBucket:              "HeadBucket",
	OpPutObject:               "PutObject",
	OpCreateMultipartUpload:   "CreateMultipartUpload",
	OpUploadPart:              "UploadPart",
	OpCompleteMultipartUpload: "CompleteMultipartUpload",
	OpAbortMultipartUpload:    "AbortMultipartUpload",
	OpListMultipartUploads:    "ListMultipartUploads",
	OpGetObject:               "GetObject",
	OpHeadObject:              "HeadObject",
	OpDeleteObject:            "DeleteObject",
	OpListObjectsV2:           "ListObjectsV2",
}

// String returns the operation's S3 API name ("PutObject"), or "other".
func (op Op) String() string {
	if op >= NumOps {
		return s3OpNames[OpOther]
	}
	return s3OpNames[op]
}

// s3OpOf returns the operation named name by the SDK, OpOther if it is
// not one of the listed.
func s3OpOf(name string) Op {
	for op := OpOther + 1; op < NumOps; op++ {
		if s3OpNames[op] == name {
			return op
		}
	}
	return OpOther
}

// Outcome is how one HTTP attempt of the S3 store's client ended, from
// what the store answered or why no answer came; s3errors.go's s3Outcome
// decides, with a comment on each case. The set is fixed and small.
type Outcome uint8

// The outcomes.
const (
	// OutcomeOK: a 2xx answer, or a normal "no" about an object — 404 for a
	// missing key (NoSuchKey, a HEAD's bare 404) and 416 for a range at or
	// past the end — which ReadRange and Delete expect and turn into
	// objstore.ErrNotExist, a read of no bytes or success.
	OutcomeOK Outcome = iota
	// OutcomeThrottled: 503 (SlowDown; on S3 every 503 means "reduce your
	// request rate"), 429, or a throttling error code in any answer.
	OutcomeThrottled
	// OutcomeServerError: another 5xx (500 InternalError, 502, 504, ...).
	OutcomeServerError
	// OutcomeClientError: another 3xx or 4xx: access denied, a bad signature or
	// checksum (BadDigest), a missing bucket or multipart upload
	// (NoSuchBucket, NoSuchUpload, both 404), a redirect to another region.
	OutcomeClientError
	// OutcomeTimeout: no answer in time (a dial, TLS or response-header
	// timeout), the attempt's deadline passing mid-request or mid-body,
	// or the store's 400 RequestTimeout (it gave up waiting for our body).
	OutcomeTimeout
	// OutcomeNetwork: the connection failed: refused, reset, closed where an
	// answer was due, a body cut short.
	OutcomeNetwork
	// OutcomeCanceled: the caller gave up on the request (its context was
	// cancelled: a Put or a read abandoned).
	OutcomeCanceled
	// OutcomeOtherError: anything else: a credential or signing failure before
	// anything was sent, an answer that did not parse.
	OutcomeOtherError
	// NumOutcomes is the number of outcomes.
	NumOutcomes
)

var s3OutcomeNames = [NumOutcomes]string{
	OutcomeOK:          "ok",
	OutcomeThrottled:   "throttled",
	OutcomeServerError: "server_error",
	OutcomeClientError: "client_error",
	OutcomeTimeout:     "timeout",
	OutcomeNetwork:     "network",
	OutcomeCanceled:    "canceled",
	OutcomeOtherError:  "other",
}

// String returns the outcome's label: "ok", "throttled", "server_error",
// "client_error", "timeout", "network", "canceled" or "other".
func (o Outcome) String() string {
	if o >= NumOutcomes {
		return s3OutcomeNames[OutcomeOtherError]
	}
	return s3OutcomeNames[o]
}

// Stats counts the HTTP attempts of an S3 store's client since New:
// every request it sends, each retry of the SDK (parts, PUTs, Completes,
// ...) and each GET of ReadRange's own loop being one attempt. An attempt that
// a context ended before it was sent is not counted; neither is the resend
// that net/http makes by itself of an idempotent request (GET, HEAD) whose
// reused connection broke before any answer, which the SDK never sees.
//
// Counters are updated atomically as attempts end and may be read at any
// time. A GetObject attempt ends with its answer's body: at a read error,
// when ReadRange rejects the answer (short of its Content-Range, or a range
// not asked for), or when the body is closed (ok).
type Stats struct {
	// Requests[op][outcome] counts attempts at op that ended with outcome.
	Requests [NumOps][NumOutcomes]atomic.Int64
}

// Stats returns the store's request counts, updated live.
func (s *Store) Stats() *Stats { return &s.stats }

// record counts one finished attempt: op ended with outcome after d (from
// handing the signed request to the transport until the answer was read
// and parsed, or the attempt failed; for a GetObject, until its body
// ended, see Stats; connection set-up included, signing and the SDK's
// retry waits not). A successful attempt is also timed.
func (s *Store) record(op Op, outcome Outcome, d time.Duration) {
	s.stats.Requests[op][outcome].Add(1)
	if outcome == OutcomeOK {
		s.metrics.duration.Record(context.Background(), d.Seconds(), s.metrics.ops[op])
	}
}

// metrics are the store's instruments (DESIGN §Observability), from
// Config.MeterProvider; noop by default.
type metrics struct {
	duration metric.Float64Histogram
	ops      [NumOps]metric.RecordOption // the operation attribute of each Op
}

// durationBuckets (s) span one S3 attempt: a HEAD takes ~1 ms and a
// 4 MiB ranged GET ~10 ms against local versitygw, an 8 MiB PUT ~45 ms
// (DESIGN §Object storage, Measured); on S3 a GET's first byte is ~20 ms
// at p90 and a 2–8 MiB PUT 200–400 ms at p99 (SPEC §13). Only successful
// attempts are timed, and they end well before the timeouts that cut a
// hung one (diskless.storage.s3.request.timeout.ms, 5 s, for GETs and
// answer headers; diskless.upload.attempt.timeout.ms, 10 s, for a PUT).
var durationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// newMetrics defines the store's instruments on mp (nil: noop):
//
//   - diskless.s3.requests{operation, outcome}, an observable counter of
//     st: every HTTP attempt of the client, each SDK retry and each GET of
//     ReadRange's loop counted once, under the S3 operation ("PutObject",
//     "UploadPart", "GetObject", ...) and one of the outcomes "ok",
//     "throttled", "server_error", "client_error", "timeout", "network",
//     "canceled", "other" (Outcome says which answers fall where; 404 and
//     416 are "ok"). An operation's series appear with its first attempt,
//     all its outcomes at once (zeros included), so that rate() sees the
//     first throttled attempt: at most NumOps × NumOutcomes series.
//   - diskless.s3.request.duration{operation}, seconds, of each successful
//     attempt (a GetObject: to the end of its body). Failed attempts are
//     only counted: a 1 ms SlowDown or a 10 s timeout would say nothing
//     about how fast the store serves, and would drag the quantiles
//     either way.
func newMetrics(mp metric.MeterProvider, st *Stats) (metrics, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter("github.com/diskless-sidecar/sidecar")
	var ms metrics
	var err error
	if ms.duration, err = m.Float64Histogram("diskless.s3.request.duration", metric.WithUnit("s"),
		metric.WithDescription("duration of each successful HTTP attempt of the S3 client, by S3 operation (GetObject: to the end of the body)"),
		metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		return ms, err
	}
	for op := range NumOps {
		ms.ops[op] = metric.WithAttributeSet(attribute.NewSet(attribute.String("operation", op.String())))
	}
	requests, err := m.Int64ObservableCounter("diskless.s3.requests", metric.WithUnit("{request}"),
		metric.WithDescription("HTTP attempts of the S3 client, retries included, by S3 operation and outcome"))
	if err != nil {
		return ms, err
	}
	var sets [NumOps][NumOutcomes]metric.ObserveOption
	for op := range NumOps {
		for out := range NumOutcomes {
			sets[op][out] = metric.WithAttributeSet(attribute.NewSet(
				attribute.String("operation", op.String()), attribute.String("outcome", out.String())))
		}
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for op := range NumOps {
			var row [NumOutcomes]int64
			used := false
			for out := range NumOutcomes {
				row[out] = st.Requests[op][out].Load()
				used = used || row[out] != 0
			}
			if !used {
				continue
			}
			for out, n := range row {
				o.ObserveInt64(requests, n, sets[op][out])
			}
		}
		return nil
	}, requests)
	return ms, err
}

// addAttemptMeter puts attemptMeter into an operation's middleware stack:
// first in the Deserialize step. The SDK's retry middleware ("Retry", in
// the Finalize step, before signing) runs the steps after it once per
// attempt, so attemptMeter sees every attempt and its own error, before the
// retryer wraps the last one (retry.MaxAttemptsError), and after the
// deserializers have turned the answer into S3's error.
func (s *Store) addAttemptMeter(stack *middleware.Stack) error {
	return stack.Deserialize.Add(attemptMeter{s}, middleware.Before)
}

// attemptMeter counts and times each HTTP attempt (Store.record).
type attemptMeter struct{ s *Store }

// ID implements middleware.DeserializeMiddleware.
func (attemptMeter) ID() string { return "DisklessAttemptMeter" }

// HandleDeserialize implements middleware.DeserializeMiddleware.
func (m attemptMeter) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (
	middleware.DeserializeOutput, middleware.Metadata, error,
) {
	op := s3OpOf(awsmiddleware.GetOperationName(ctx))
	ctx, span := m.s.tr.Start(ctx, s3SpanNames[op], trace.SpanKindClient)
	start := time.Now()
	out, md, err := next.HandleDeserialize(ctx, in)
	if err == nil && op == OpGetObject {
		if res, ok := out.Result.(*awss3.GetObjectOutput); ok && res.Body != nil {
			// The answer's body is where a GET mostly fails or waits:
			// the attempt ends with it.
			res.Body = &meteredBody{ReadCloser: res.Body, s: m.s, start: start, span: span}
			return out, md, err
		}
	}
	outcome := s3OutcomeOf(op, err)
	m.s.record(op, outcome, time.Since(start))
	endAttemptSpan(span, m.s.cfg.Bucket, outcome, err)
	return out, md, err
}

// s3SpanNames are the attempt spans' names: "s3." and the operation.
var s3SpanNames = func() (names [NumOps]string) {
	for op := range NumOps {
		names[op] = "s3." + op.String()
	}
	return names
}()

// endAttemptSpan ends an attempt's span with its outcome (and error, if
// the outcome is not ok).
func endAttemptSpan(span trace.Span, bucket string, outcome Outcome, err error) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String("rpc.system", "aws-api"), attribute.String("rpc.service", "S3"),
			attribute.String("aws.s3.bucket", bucket), attribute.String("diskless.s3.outcome", outcome.String()))
		if outcome != OutcomeOK && err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, outcome.String())
		}
	}
	span.End()
}

// meteredBody is a GetObject answer's body that records its attempt when
// it ends: at the first read error (s3Outcome of it), when ReadRange rejects
// the answer (fail), or at Close (ok), whichever comes first.
type meteredBody struct {
	io.ReadCloser
	s     *Store
	start time.Time
	span  trace.Span // the attempt's
	done  atomic.Bool
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.end(err)
	}
	// At the body's end the attempt is not over yet: ReadRange may still
	// reject the answer (fail); otherwise Close ends it ok.
	return n, err
}

func (b *meteredBody) Close() error {
	b.end(nil)
	return b.ReadCloser.Close()
}

// fail ends the attempt with err: ReadRange rejected the answer (a body
// shorter than announced, a range it did not ask for) although the body
// itself read without error.
func (b *meteredBody) fail(err error) { b.end(err) }

func (b *meteredBody) end(err error) {
	if !b.done.CompareAndSwap(false, true) {
		return
	}
	if err == io.EOF {
		err = nil
	}
	outcome := s3Outcome(err)
	b.s.record(OpGetObject, outcome, time.Since(b.start))
	endAttemptSpan(b.span, b.s.cfg.Bucket, outcome, err)
}
