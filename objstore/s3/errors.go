package s3

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// s3Class is what a failed S3 call calls for.
type s3Class int

const (
	// s3RetryRequest: a transient failure of this request (throttling,
	// 5xx, a broken or timed-out connection): send the same request again
	// after a backoff. The SDK's retryer does, up to Config.MaxAttempts.
	s3RetryRequest s3Class = iota + 1
	// s3RetryOperation: this request cannot succeed by being sent again,
	// but the operation started over may (a new multipart upload after
	// NoSuchUpload, the object re-sent after a checksum mismatch), or the
	// cause is unknown. upload.Uploader retries the whole object.
	s3RetryOperation
	// s3Permanent: the configuration or the permissions are wrong (no such
	// bucket, access denied, bad credentials, wrong region): no retry helps.
	// Store methods wrap these errors with objstore.ErrPermanent.
	s3Permanent
	// s3NotFound: no object (or upload) under the key.
	s3NotFound
	// s3Canceled: the request's context ended — the caller's, or the
	// timeout of one attempt; the caller knows which (its own ctx alive
	// means the attempt timed out, which is worth another attempt).
	s3Canceled
)

// throttleCodes are the error codes of throttling answers: S3's SlowDown
// (503) and the codes AWS services and S3-compatible stores use for the same.
var throttleCodes = []string{"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded",
	"TooManyRequestsException", "RequestThrottled", "BandwidthLimitExceeded"}

// errStoredMismatch reports that the store's record of an object just put
// differs from what was sent (size or checksum): the object is re-sent.
var errStoredMismatch = errors.New("objstore: stored object differs from the bytes sent")

// classifyS3 is the one retry classifier of the S3 boundary: the SDK's
// retryer asks it whether to resend a request (s3RetryRequest), the store's
// methods whether to mark an error objstore.ErrPermanent or objstore.ErrNotExist, and
// ReadRange's attempt loop whether to read again. Error codes are S3's
// (https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html).
func classifyS3(err error) s3Class {
	if err == nil {
		return 0
	}
	if errors.Is(err, errStoredMismatch) {
		// The store verified and kept other bytes than ours (or a size
		// that is not ours): putting the object again overwrites it.
		return s3RetryOperation
	}
	var ce interface{ CanceledError() bool }
	if (errors.As(err, &ce) && ce.CanceledError()) || errors.Is(err, context.Canceled) {
		// The request's context ended (the SDK marks these), not the
		// store: resending under the same context fails at once.
		return s3Canceled
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// Any other timeout: net/http's (dial, TLS, response headers) match
		// context.DeadlineExceeded, as does a ReadRange attempt's own deadline
		// passing while the body is read. A fresh request usually succeeds.
		return s3RetryRequest
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		// An answer with fewer bytes than it announced (Content-Length
		// or Content-Range), one stopping short of the range asked, or a
		// connection closed before the answer: a GET again (ReadRange asks
		// for the missing bytes) usually gets them.
		return s3RetryRequest
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code := apiErr.ErrorCode()
		if slices.Contains(throttleCodes, code) {
			// Throttling (503 SlowDown on S3): the request was fine, the
			// rate was not; retry after a backoff with jitter.
			return s3RetryRequest
		}
		switch code {
		case "InternalError", "ServiceUnavailable", "RequestTimeout", "RequestTimeoutException",
			"IncompleteBody", "OperationAborted":
			// The server failed, gave up waiting for our body (a stalled
			// connection), received less than Content-Length, or a
			// conflicting operation was in progress: all transient.
			return s3RetryRequest
		case "BadDigest", "InvalidDigest", "XAmzContentSHA256Mismatch", "InvalidChecksum":
			// The bytes the server received do not match their checksum:
			// corrupted in flight. The SDK rewinds the body and resends.
			return s3RetryRequest
		case "RequestTimeTooSkewed":
			// Our clock is off; the SDK measures the skew from the response
			// and signs the next attempt with the corrected time.
			return s3RetryRequest
		case "NoSuchUpload":
			// The multipart upload is gone (aborted, or completed by an
			// attempt whose answer was lost): resending the part or the
			// Complete cannot help, a new upload can.
			return s3RetryOperation
		case "NoSuchKey", "NotFound":
			return s3NotFound
		case "NoSuchBucket", "AccessDenied", "AllAccessDisabled", "InvalidAccessKeyId",
			"SignatureDoesNotMatch", "InvalidBucketName", "AccountProblem", "PermanentRedirect",
			"AuthorizationHeaderMalformed", "InvalidToken", "ExpiredToken", "MissingSecurityHeader",
			"KeyTooLongError", "EntityTooLarge", "InvalidArgument", "NotImplemented",
			"MethodNotAllowed", "InvalidStorageClass", "InvalidObjectState":
			// Wrong bucket, credentials, region, permissions or request
			// shape: the same request fails the same way every time.
			// (Expired temporary credentials are refreshed by the SDK's
			// credential cache before the next request, not by a resend.)
			return s3Permanent
		}
	}
	if code, ok := httpStatus(err); ok {
		switch {
		case code == http.StatusNotFound:
			// HEAD answers carry no error code, only the status.
			return s3NotFound
		case code == http.StatusTooManyRequests || code >= 500:
			// Throttled or a server failure without a known code.
			return s3RetryRequest
		case code == http.StatusForbidden || code == http.StatusUnauthorized ||
			code == http.StatusMethodNotAllowed || code == http.StatusNotImplemented:
			return s3Permanent
		case code >= 400:
			// Another client error: this request will not succeed as it
			// is, but nothing says the operation cannot.
			return s3RetryOperation
		}
	}
	if retry.IsErrorRetryables(connectionErrors).IsErrorRetryable(err) == aws.TrueTernary {
		// No answer from the server: connection refused or reset, a dial,
		// TLS or response-header timeout, a truncated response. The SDK's
		// own tests for these (RetryableConnectionError, errors marking
		// themselves retryable) are the reference.
		return s3RetryRequest
	}
	// Unknown: not worth resending blindly, but worth an attempt from the
	// first byte, as the upload layer presumes for any backend.
	return s3RetryOperation
}

// connectionErrors are the SDK's tests for failures without an answer.
var connectionErrors = []retry.IsErrorRetryable{retry.RetryableConnectionError{}, retry.RetryableError{}}

func httpStatus(err error) (int, bool) {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) && re.HTTPStatusCode() != 0 {
		return re.HTTPStatusCode(), true
	}
	return 0, false
}

// s3Retryables is the SDK retryer's only retry check: resend exactly
// what classifyS3 calls s3RetryRequest.
var s3Retryables = []retry.IsErrorRetryable{
	retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
		return aws.BoolTernary(classifyS3(err) == s3RetryRequest)
	}),
}

// s3OutcomeOf is s3Outcome for an attempt at op: a 404 is a normal answer
// only about an object (GetObject, HeadObject, DeleteObject); for any other
// operation — a HeadBucket, whose answer has no error code to say
// NoSuchBucket — it is a client error.
func s3OutcomeOf(op Op, err error) Outcome {
	o := s3Outcome(err)
	if o == OutcomeOK && err != nil && op != OpGetObject && op != OpHeadObject && op != OpDeleteObject {
		return OutcomeClientError
	}
	return o
}

// s3Outcome is the outcome (Stats, Attempt) of one HTTP attempt that
// ended with err, nil for a 2xx answer. Where classifyS3 says what to do
// about an error, s3Outcome says what happened on the wire: what the store
// answered, or why no answer came. Error codes are S3's
// (https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html).
func s3Outcome(err error) Outcome {
	if err == nil {
		return OutcomeOK
	}
	var code string
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code = apiErr.ErrorCode()
	}
	status, answered := httpStatus(err)
	switch {
	case slices.Contains(throttleCodes, code) ||
		(answered && (status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable)):
		// Throttling. On S3 every 503 asks for a lower request rate:
		// SlowDown, ServiceUnavailable, and the 503 of a HEAD, which has no
		// body to carry a code (the SDK derives one from the status text).
		return OutcomeThrottled
	case code == "RequestTimeout" || code == "RequestTimeoutException":
		// The store gave up waiting for the request's body (400): the
		// upload stalled on the way.
		return OutcomeTimeout
	case answered && status >= 500:
		// Other server failures; S3's errors inside a 200 answer (to a
		// CompleteMultipartUpload) too, which the SDK turns into a 500.
		return OutcomeServerError
	case answered && (status == http.StatusNotFound || status == http.StatusRequestedRangeNotSatisfiable) &&
		code != "NoSuchBucket" && code != "NoSuchUpload":
		// Normal answers about an object: there is none under the key
		// (HEAD, GET, DELETE; ReadRange reports objstore.ErrNotExist), or the range
		// starts at or past its end (ReadRange reads no bytes there). A missing
		// bucket or multipart upload is not: those are client errors.
		return OutcomeOK
	case answered && status >= 300:
		// The store refused the request as sent: access denied, bad
		// signature or checksum, a missing bucket or upload, a redirect to
		// another region.
		return OutcomeClientError
	}
	// No answer, or a 2xx answer whose body could not be read or parsed.
	var timeout interface{ Timeout() bool }
	var canceled interface{ CanceledError() bool }
	var sendErr *smithyhttp.RequestSendError
	var opErr *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &timeout) && timeout.Timeout()):
		// A dial, TLS or response-header timeout, the attempt's deadline
		// (a GET attempt's own, an upload attempt's) passing mid-request.
		return OutcomeTimeout
	case errors.Is(err, context.Canceled) || (errors.As(err, &canceled) && canceled.CanceledError()):
		// The caller gave up: its context was cancelled.
		return OutcomeCanceled
	case errors.As(err, &sendErr) || errors.As(err, &opErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		retry.RetryableConnectionError{}.IsErrorRetryable(err) == aws.TrueTernary:
		// The request could not be sent or its answer not read: connection
		// refused or reset, closed where an answer was due (EOF), a body
		// cut short, DNS or TLS failures.
		return OutcomeNetwork
	}
	// Signing or credential failures before anything was sent, an answer
	// that did not parse.
	return OutcomeOtherError
}
