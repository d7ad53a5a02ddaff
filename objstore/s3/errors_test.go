package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/diskless-sidecar/sidecar/internal/backoff"
)

// apiErr builds the error the SDK returns for an S3 error answer.
func apiErr(status int, code string) error {
	return &smithy.OperationError{ServiceID: "S3", OperationName: "PutObject", Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err:      &smithy.GenericAPIError{Code: code, Message: "test"},
		},
	}}
}

// statusErr builds the error of an answer without a body (HEAD).
func statusErr(status int) error {
	return &smithy.OperationError{ServiceID: "S3", OperationName: "HeadObject", Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err:      errors.New("http response error"),
		},
	}}
}

func sendErr(err error) error {
	return &smithy.OperationError{ServiceID: "S3", OperationName: "UploadPart", Err: &smithyhttp.RequestSendError{Err: err}}
}

func TestClassifyS3(t *testing.T) {
	reset := &url.Error{Op: "Put", URL: "http://s3/x", Err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}}
	refused := &url.Error{Op: "Put", URL: "http://s3/x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	headerTimeout := &url.Error{Op: "Put", URL: "http://s3/x", Err: fmt.Errorf("net/http: timeout awaiting response headers: %w", context.DeadlineExceeded)}
	tests := []struct {
		name string
		err  error
		want s3Class
	}{
		{"503 SlowDown", apiErr(503, "SlowDown"), s3RetryRequest},
		{"500 InternalError", apiErr(500, "InternalError"), s3RetryRequest},
		{"503 without a code", statusErr(503), s3RetryRequest},
		{"502", apiErr(502, "BadGateway"), s3RetryRequest},
		{"429", statusErr(429), s3RetryRequest},
		{"400 RequestTimeout", apiErr(400, "RequestTimeout"), s3RetryRequest},
		{"400 IncompleteBody", apiErr(400, "IncompleteBody"), s3RetryRequest},
		{"400 BadDigest", apiErr(400, "BadDigest"), s3RetryRequest},
		{"403 RequestTimeTooSkewed", apiErr(403, "RequestTimeTooSkewed"), s3RetryRequest},
		{"connection reset", sendErr(reset), s3RetryRequest},
		{"connection refused", sendErr(refused), s3RetryRequest},
		{"response header timeout", sendErr(headerTimeout), s3RetryRequest},
		{"request send failed", sendErr(errors.New("write: broken pipe")), s3RetryRequest},
		{"response body cut short", fmt.Errorf("body ended after 10 of 20 bytes: %w", io.ErrUnexpectedEOF), s3RetryRequest},
		{"attempt deadline while reading a body", fmt.Errorf("read: %w", context.DeadlineExceeded), s3RetryRequest},
		{"404 NoSuchUpload", apiErr(404, "NoSuchUpload"), s3RetryOperation},
		{"stored object differs", fmt.Errorf("put: %w", errStoredMismatch), s3RetryOperation},
		{"400 with an unknown code", apiErr(400, "SomethingNew"), s3RetryOperation},
		{"unknown error", errors.New("something"), s3RetryOperation},
		{"404 NoSuchKey", apiErr(404, "NoSuchKey"), s3NotFound},
		{"404 on HEAD", statusErr(404), s3NotFound},
		{"403 AccessDenied", apiErr(403, "AccessDenied"), s3Permanent},
		{"403 on HEAD", statusErr(403), s3Permanent},
		{"404 NoSuchBucket", apiErr(404, "NoSuchBucket"), s3Permanent},
		{"403 InvalidAccessKeyId", apiErr(403, "InvalidAccessKeyId"), s3Permanent},
		{"403 SignatureDoesNotMatch", apiErr(403, "SignatureDoesNotMatch"), s3Permanent},
		{"301 PermanentRedirect", apiErr(301, "PermanentRedirect"), s3Permanent},
		{"400 AuthorizationHeaderMalformed", apiErr(400, "AuthorizationHeaderMalformed"), s3Permanent},
		{"ctx cancelled (SDK)", &smithy.CanceledError{Err: context.Canceled}, s3Canceled},
		{"ctx deadline (SDK)", &smithy.CanceledError{Err: context.DeadlineExceeded}, s3Canceled},
		{"ctx cancelled in the retry wait", &aws.RequestCanceledError{Err: context.Canceled}, s3Canceled},
		{"ctx cancelled (plain)", fmt.Errorf("x: %w", context.Canceled), s3Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classifyS3(tt.err); got != tt.want {
				t.Fatalf("classifyS3(%v) = %d, want %d", tt.err, got, tt.want)
			}
			sdkRetries := s3Retryables[0].IsErrorRetryable(tt.err) == aws.TrueTernary
			if sdkRetries != (tt.want == s3RetryRequest) {
				t.Fatalf("the SDK retryer resends: %v, want %v", sdkRetries, tt.want == s3RetryRequest)
			}
		})
	}
}

// TestS3Outcome: every attempt's error falls in exactly one outcome, as
// Stats documents.
func TestS3Outcome(t *testing.T) {
	reset := &url.Error{Op: "Get", URL: "http://s3/x", Err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}}
	refused := &url.Error{Op: "Put", URL: "http://s3/x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	closed := &url.Error{Op: "Get", URL: "http://s3/x", Err: io.EOF}
	headerTimeout := &url.Error{Op: "Put", URL: "http://s3/x", Err: fmt.Errorf("net/http: timeout awaiting response headers: %w", context.DeadlineExceeded)}
	dialTimeout := &url.Error{Op: "Put", URL: "http://s3/x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: timeoutErr{}}}
	tests := []struct {
		name string
		err  error
		want Outcome
	}{
		{"success", nil, OutcomeOK},
		{"404 NoSuchKey", apiErr(404, "NoSuchKey"), OutcomeOK},
		{"404 on HEAD", apiErr(404, "NotFound"), OutcomeOK},
		{"404 without a code", statusErr(404), OutcomeOK},
		{"416 InvalidRange", apiErr(416, "InvalidRange"), OutcomeOK},
		{"503 SlowDown", apiErr(503, "SlowDown"), OutcomeThrottled},
		{"503 ServiceUnavailable", apiErr(503, "ServiceUnavailable"), OutcomeThrottled},
		{"503 without a code", statusErr(503), OutcomeThrottled},
		{"429", statusErr(429), OutcomeThrottled},
		{"400 Throttling", apiErr(400, "Throttling"), OutcomeThrottled},
		{"500 InternalError", apiErr(500, "InternalError"), OutcomeServerError},
		{"502", apiErr(502, "BadGateway"), OutcomeServerError},
		{"504 without a code", statusErr(504), OutcomeServerError},
		{"400 RequestTimeout", apiErr(400, "RequestTimeout"), OutcomeTimeout},
		{"400 BadDigest", apiErr(400, "BadDigest"), OutcomeClientError},
		{"403 AccessDenied", apiErr(403, "AccessDenied"), OutcomeClientError},
		{"403 on HEAD", statusErr(403), OutcomeClientError},
		{"404 NoSuchBucket", apiErr(404, "NoSuchBucket"), OutcomeClientError},
		{"404 NoSuchUpload", apiErr(404, "NoSuchUpload"), OutcomeClientError},
		{"301 PermanentRedirect", apiErr(301, "PermanentRedirect"), OutcomeClientError},
		{"response header timeout", sendErr(headerTimeout), OutcomeTimeout},
		{"dial timeout", sendErr(dialTimeout), OutcomeTimeout},
		{"attempt deadline (SDK)", &smithy.CanceledError{Err: context.DeadlineExceeded}, OutcomeTimeout},
		{"attempt deadline while reading a body", fmt.Errorf("read: %w", context.DeadlineExceeded), OutcomeTimeout},
		{"ctx cancelled (SDK)", &smithy.CanceledError{Err: context.Canceled}, OutcomeCanceled},
		{"ctx cancelled (plain)", fmt.Errorf("x: %w", context.Canceled), OutcomeCanceled},
		{"connection reset", sendErr(reset), OutcomeNetwork},
		{"connection refused", sendErr(refused), OutcomeNetwork},
		{"closed before the answer", sendErr(closed), OutcomeNetwork},
		{"request send failed", sendErr(errors.New("write: broken pipe")), OutcomeNetwork},
		{"body reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, OutcomeNetwork},
		{"body cut short", io.ErrUnexpectedEOF, OutcomeNetwork},
		{"credentials", errors.New("failed to refresh cached credentials"), OutcomeOtherError},
		{"answer that does not parse", &smithy.DeserializationError{Err: errors.New("bad XML")}, OutcomeOtherError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s3Outcome(tt.err); got != tt.want {
				t.Fatalf("s3Outcome(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// timeoutErr is a net.Error that timed out (a dial timeout).
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestBackoffCeiling(t *testing.T) {
	ms := 100 * 1e6
	for attempt, want := range map[int]float64{1: 1 * ms, 2: 2 * ms, 3: 4 * ms, 4: 8 * ms, 5: 10 * ms, 50: 10 * ms} {
		if got := backoff.Ceiling(100e6, 1e9, attempt); float64(got) != want {
			t.Errorf("attempt %d: %v, want %v", attempt, got, want)
		}
	}
}
