package objstore

import (
	"context"
	"io"
	"sync/atomic"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
)

// S3Op is an S3 operation that the S3 store's client performs: a label of
// its request counts (S3Stats) and attempts (S3Attempt). The set is fixed,
// so that the metrics have a bounded number of series.
type S3Op uint8

// The operations S3 uses. S3OpOther stands for any operation not listed
// (none today).
const (
	S3OpOther S3Op = iota
	S3OpHeadBucket
	S3OpPutObject
	S3OpCreateMultipartUpload
	S3OpUploadPart
	S3OpCompleteMultipartUpload
	S3OpAbortMultipartUpload
	S3OpListMultipartUploads
	S3OpGetObject
	S3OpHeadObject
	S3OpDeleteObject
	S3OpListObjectsV2
	// NumS3Ops is the number of operations, S3OpOther included.
	NumS3Ops
)

// s3OpNames are the operations' names: the S3 API's (and the SDK's).
var s3OpNames = [NumS3Ops]string{
	S3OpOther:                   "other",
	S3OpHeadBucket:              "HeadBucket",
	S3OpPutObject:               "PutObject",
	S3OpCreateMultipartUpload:   "CreateMultipartUpload",
	S3OpUploadPart:              "UploadPart",
	S3OpCompleteMultipartUpload: "CompleteMultipartUpload",
	S3OpAbortMultipartUpload:    "AbortMultipartUpload",
	S3OpListMultipartUploads:    "ListMultipartUploads",
	S3OpGetObject:               "GetObject",
	S3OpHeadObject:              "HeadObject",
	S3OpDeleteObject:            "DeleteObject",
	S3OpListObjectsV2:           "ListObjectsV2",
}

// String returns the operation's S3 API name ("PutObject"), or "other".
func (op S3Op) String() string {
	if op >= NumS3Ops {
		return s3OpNames[S3OpOther]
	}
	return s3OpNames[op]
}

// s3OpOf returns the operation named name by the SDK, S3OpOther if it is
// not one of the listed.
func s3OpOf(name string) S3Op {
	for op := S3OpOther + 1; op < NumS3Ops; op++ {
		if s3OpNames[op] == name {
			return op
		}
	}
	return S3OpOther
}

// S3Outcome is how one HTTP attempt of the S3 store's client ended, from
// what the store answered or why no answer came; s3errors.go's s3Outcome
// decides, with a comment on each case. The set is fixed and small.
type S3Outcome uint8

// The outcomes.
const (
	// S3OK: a 2xx answer, or a normal "no" about an object — 404 for a
	// missing key (NoSuchKey, a HEAD's bare 404) and 416 for a range at or
	// past the end — which ReadAt and Delete expect and turn into
	// ErrNotExist, io.EOF or success.
	S3OK S3Outcome = iota
	// S3Throttled: 503 (SlowDown; on S3 every 503 means "reduce your
	// request rate"), 429, or a throttling error code in any answer.
	S3Throttled
	// S3ServerError: another 5xx (500 InternalError, 502, 504, ...).
	S3ServerError
	// S3ClientError: another 3xx or 4xx: access denied, a bad signature or
	// checksum (BadDigest), a missing bucket or multipart upload
	// (NoSuchBucket, NoSuchUpload, both 404), a redirect to another region.
	S3ClientError
	// S3Timeout: no answer in time (a dial, TLS or response-header
	// timeout), the attempt's deadline passing mid-request or mid-body,
	// or the store's 400 RequestTimeout (it gave up waiting for our body).
	S3Timeout
	// S3Network: the connection failed: refused, reset, closed where an
	// answer was due, a body cut short.
	S3Network
	// S3Canceled: the caller gave up on the request (its context was
	// cancelled: a Put or a read abandoned).
	S3Canceled
	// S3OtherError: anything else: a credential or signing failure before
	// anything was sent, an answer that did not parse.
	S3OtherError
	// NumS3Outcomes is the number of outcomes.
	NumS3Outcomes
)

var s3OutcomeNames = [NumS3Outcomes]string{
	S3OK:          "ok",
	S3Throttled:   "throttled",
	S3ServerError: "server_error",
	S3ClientError: "client_error",
	S3Timeout:     "timeout",
	S3Network:     "network",
	S3Canceled:    "canceled",
	S3OtherError:  "other",
}

// String returns the outcome's label: "ok", "throttled", "server_error",
// "client_error", "timeout", "network", "canceled" or "other".
func (o S3Outcome) String() string {
	if o >= NumS3Outcomes {
		return s3OutcomeNames[S3OtherError]
	}
	return s3OutcomeNames[o]
}

// S3Stats counts the HTTP attempts of an S3 store's client since NewS3:
// every request it sends, each retry of the SDK (parts, PUTs, Completes,
// ...) and each GET of ReadAt's own loop being one attempt. An attempt that
// a context ended before it was sent is not counted; neither is the resend
// that net/http makes by itself of an idempotent request (GET, HEAD) whose
// reused connection broke before any answer, which the SDK never sees.
//
// Counters are updated atomically as attempts end and may be read at any
// time. A GetObject attempt ends with its answer's body: at a read error,
// when ReadAt rejects the answer (short of its Content-Range, or a range
// not asked for), or when the body is closed (ok).
type S3Stats struct {
	// Requests[op][outcome] counts attempts at op that ended with outcome.
	Requests [NumS3Ops][NumS3Outcomes]atomic.Int64
}

// S3Attempt is one finished HTTP attempt, as S3Config.OnAttempt receives
// it.
type S3Attempt struct {
	Op      S3Op
	Outcome S3Outcome
	// Duration is from handing the signed request to the transport until
	// the answer was read and parsed, or the attempt failed; for a
	// GetObject, until its body ended (see S3Stats). Connection set-up is
	// included; signing and the SDK's retry waits are not.
	Duration time.Duration
}

// Stats returns the store's request counts, updated live.
func (s *S3) Stats() *S3Stats { return &s.stats }

// record counts one finished attempt and hands it to S3Config.OnAttempt.
func (s *S3) record(op S3Op, outcome S3Outcome, d time.Duration) {
	s.stats.Requests[op][outcome].Add(1)
	if s.cfg.OnAttempt != nil {
		s.cfg.OnAttempt(S3Attempt{Op: op, Outcome: outcome, Duration: d})
	}
}

// addAttemptMeter puts attemptMeter into an operation's middleware stack:
// first in the Deserialize step. The SDK's retry middleware ("Retry", in
// the Finalize step, before signing) runs the steps after it once per
// attempt, so attemptMeter sees every attempt and its own error, before the
// retryer wraps the last one (retry.MaxAttemptsError), and after the
// deserializers have turned the answer into S3's error.
func (s *S3) addAttemptMeter(stack *middleware.Stack) error {
	return stack.Deserialize.Add(attemptMeter{s}, middleware.Before)
}

// attemptMeter counts and times each HTTP attempt (S3.record).
type attemptMeter struct{ s *S3 }

// ID implements middleware.DeserializeMiddleware.
func (attemptMeter) ID() string { return "DisklessAttemptMeter" }

// HandleDeserialize implements middleware.DeserializeMiddleware.
func (m attemptMeter) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (
	middleware.DeserializeOutput, middleware.Metadata, error,
) {
	op := s3OpOf(awsmiddleware.GetOperationName(ctx))
	start := time.Now()
	out, md, err := next.HandleDeserialize(ctx, in)
	if err == nil && op == S3OpGetObject {
		if res, ok := out.Result.(*s3.GetObjectOutput); ok && res.Body != nil {
			// The answer's body is where a GET mostly fails or waits:
			// the attempt ends with it.
			res.Body = &meteredBody{ReadCloser: res.Body, s: m.s, start: start}
			return out, md, err
		}
	}
	m.s.record(op, s3OutcomeOf(op, err), time.Since(start))
	return out, md, err
}

// meteredBody is a GetObject answer's body that records its attempt when
// it ends: at the first read error (s3Outcome of it), when ReadAt rejects
// the answer (fail), or at Close (ok), whichever comes first.
type meteredBody struct {
	io.ReadCloser
	s     *S3
	start time.Time
	done  atomic.Bool
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.end(err)
	}
	// At the body's end the attempt is not over yet: ReadAt may still
	// reject the answer (fail); otherwise Close ends it ok.
	return n, err
}

func (b *meteredBody) Close() error {
	b.end(nil)
	return b.ReadCloser.Close()
}

// fail ends the attempt with err: ReadAt rejected the answer (a body
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
	b.s.record(S3OpGetObject, s3Outcome(err), time.Since(b.start))
}
