package s3

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/diskless-sidecar/sidecar/objstore"
)

// Defaults and limits of Config.
const (
	// DefaultPartSize is the multipart part size: objects up to it go up
	// as one PUT, larger ones in parts of this size. It equals the default
	// diskless.append.buffer.max.bytes, so a default file is one PUT.
	DefaultPartSize = 8 << 20
	// MinPartSize is S3's smallest part (except the last).
	MinPartSize = 5 << 20
	// MaxPartSize is S3's largest part.
	MaxPartSize = 5 << 30
	// DefaultConcurrency is how many parts of one object are sent at
	// once. With diskless.upload.max.inflight.files (4) objects in flight
	// that is at most 16 connections, each good for about 93 MB/s on S3
	// Standard (SPEC §13).
	DefaultConcurrency = 4
	// DefaultMaxAttempts bounds the SDK's attempts at one request
	// (PUT, part, Complete, GET range, ...): quick retries of a blip. The
	// upload layer retries whole objects on top (see S3).
	DefaultMaxAttempts = 3
	// DefaultInitialBackoff and DefaultMaxBackoff: the ceiling of the
	// wait before the SDK's n-th retry is InitialBackoff·2^(n−1), capped,
	// and the wait is drawn uniformly below it (full jitter), as in the
	// upload layer and Kafka's retry.backoff.ms / retry.backoff.max.ms.
	DefaultInitialBackoff = 100 * time.Millisecond
	DefaultMaxBackoff     = time.Second
	// DefaultConnectTimeout bounds a TCP connect and a TLS handshake.
	DefaultConnectTimeout = 5 * time.Second
	// DefaultRequestTimeout bounds the wait for response headers after a
	// request was sent (every request), and one GET attempt from sending
	// it to the last byte of its body. A 4 MiB range is ~50 ms at S3's
	// ~93 MB/s per connection, the first byte ~20 ms at p90 and a PUT of
	// 2–8 MiB 200–400 ms at p99 (SPEC §13), so 5 s only cuts off requests
	// that hang; it is half the default upload attempt timeout (10 s), so a
	// hung PUT is resent by the SDK within one upload attempt.
	DefaultRequestTimeout = 5 * time.Second
)

// Config configures an S3 store. A zero field takes its default (the
// Default constants above); Validate reports invalid fields naming their
// configuration keys (the field, for those without one).
type Config struct {
	// Bucket holds the objects. Required. Key diskless.storage.s3.bucket.
	Bucket string
	// Prefix is prepended, with a "/", to every key: the object with key
	// "wal/ab12" is "<Prefix>/wal/ab12" in the bucket. Slash-separated
	// segments; "" puts keys at the bucket's root. Key
	// diskless.storage.s3.prefix.
	Prefix string
	// Region is the bucket's region (also the signing region of
	// S3-compatible stores). "" takes the SDK's default chain (AWS_REGION,
	// the shared config profile), then us-east-1. Key
	// diskless.storage.s3.region.
	Region string
	// Endpoint is the base URL of an S3-compatible store,
	// http(s)://host[:port]; "" means AWS S3. Key
	// diskless.storage.s3.endpoint.
	Endpoint string
	// PathStyle addresses buckets as <endpoint>/<bucket>/<key> instead of
	// <bucket>.<endpoint>/<key>; most S3-compatible stores need it. Key
	// diskless.storage.s3.path.style.
	PathStyle bool
	// PartSize, bytes, in [MinPartSize, MaxPartSize]: objects up to
	// PartSize are one PutObject, larger ones multipart uploads of
	// PartSize parts. Key diskless.upload.part.bytes; default
	// DefaultPartSize.
	PartSize int64
	// SinglePutMaxBytes, bytes, in [PartSize, MaxPartSize]: objects up to
	// it go up as one PutObject even when larger than PartSize — one
	// request instead of at least four (create, two parts, complete). The
	// sidecar sets it to diskless.append.buffer.max.bytes plus PartSize
	// when PartSize is at least the buffer, so that a file sealed with
	// the request that reached the buffer is one PUT. No key; default
	// PartSize.
	SinglePutMaxBytes int64
	// Concurrency is how many parts of one object are uploaded at once,
	// ≥ 1. Key diskless.upload.concurrency; default DefaultConcurrency.
	Concurrency int
	// MaxAttempts bounds the attempts at one S3 request, ≥ 1 (1: no
	// request-level retry). Default DefaultMaxAttempts.
	MaxAttempts int
	// InitialBackoff and MaxBackoff shape the waits between attempts at
	// one request (see DefaultInitialBackoff).
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// ConnectTimeout bounds TCP connects and TLS handshakes. Default
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// RequestTimeout bounds the wait for response headers of every request
	// and each GET attempt as a whole. Key
	// diskless.storage.s3.request.timeout.ms; default
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Credentials, if not nil, replace the SDK's default credential chain
	// (environment AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
	// AWS_SESSION_TOKEN, shared credentials and config files, web
	// identity, container and EC2 instance roles).
	Credentials aws.CredentialsProvider
	// Logger receives warnings: multipart uploads that could not be
	// aborted, the SDK's own warnings. Default slog.Default().
	Logger *slog.Logger
	// MeterProvider receives the store's request metrics (see Stats):
	// diskless.s3.requests{operation, outcome} and
	// diskless.s3.request.duration{operation}, seconds. nil: none.
	MeterProvider metric.MeterProvider
	// TracerProvider receives a span per HTTP attempt ("s3.PutObject",
	// "s3.UploadPart", "s3.GetObject", ...: DESIGN §Observability,
	// Traces), a child of the span in the caller's context. nil, or the
	// noop provider, means none.
	TracerProvider trace.TracerProvider
}

func (c Config) withDefaults() Config {
	if c.PartSize == 0 {
		c.PartSize = DefaultPartSize
	}
	if c.SinglePutMaxBytes == 0 {
		c.SinglePutMaxBytes = c.PartSize
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.InitialBackoff == 0 {
		c.InitialBackoff = DefaultInitialBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = max(DefaultMaxBackoff, c.InitialBackoff)
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Prefix = strings.TrimSuffix(c.Prefix, "/")
	return c
}

// Validate reports every invalid field of c (zero fields count as their
// defaults), each error naming the configuration key.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Bucket == "" {
		errs = append(errs, errors.New("diskless.storage.s3.bucket: required with diskless.storage.backend=s3"))
	} else if strings.ContainsAny(c.Bucket, "/ \\") {
		errs = append(errs, fmt.Errorf("diskless.storage.s3.bucket %q: a bucket name, without / or spaces", c.Bucket))
	}
	if c.Prefix != "" {
		if err := objstore.ValidateKey(c.Prefix + "/x"); err != nil {
			errs = append(errs, fmt.Errorf("diskless.storage.s3.prefix %q: must be slash-separated segments without empty, . or .. segments: %w", c.Prefix, err))
		}
	}
	if c.Endpoint != "" && !strings.HasPrefix(c.Endpoint, "http://") && !strings.HasPrefix(c.Endpoint, "https://") {
		errs = append(errs, fmt.Errorf("diskless.storage.s3.endpoint %q: must start with http:// or https://", c.Endpoint))
	}
	if c.PartSize < MinPartSize || c.PartSize > MaxPartSize {
		errs = append(errs, fmt.Errorf("diskless.upload.part.bytes %d: must be in [%d, %d] (S3's part sizes)", c.PartSize, MinPartSize, MaxPartSize))
	}
	if c.SinglePutMaxBytes < c.PartSize || c.SinglePutMaxBytes > MaxPartSize {
		errs = append(errs, fmt.Errorf("s3: SinglePutMaxBytes %d: must be in [PartSize (%d), %d] (S3's largest PutObject)", c.SinglePutMaxBytes, c.PartSize, MaxPartSize))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("diskless.upload.concurrency %d: must be at least 1", c.Concurrency))
	}
	if c.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("s3: MaxAttempts %d: must be at least 1", c.MaxAttempts))
	}
	if c.InitialBackoff < 0 || c.MaxBackoff < c.InitialBackoff {
		errs = append(errs, fmt.Errorf("s3: InitialBackoff %v, MaxBackoff %v: must be 0 ≤ InitialBackoff ≤ MaxBackoff", c.InitialBackoff, c.MaxBackoff))
	}
	if c.ConnectTimeout < 0 {
		errs = append(errs, fmt.Errorf("s3: ConnectTimeout %v: must not be negative", c.ConnectTimeout))
	}
	if c.RequestTimeout < 0 {
		errs = append(errs, fmt.Errorf("diskless.storage.s3.request.timeout.ms %v: must not be negative", c.RequestTimeout))
	}
	return errors.Join(errs...)
}
