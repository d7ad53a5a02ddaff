// Package s3 is the Amazon S3 (or S3-compatible) backend of objstore.Store,
// on aws-sdk-go-v2 (DESIGN §Object storage (S3)): Store, its Config, the
// one classifier of S3 errors (errors.go) and the request metrics, a
// middleware that counts and times every HTTP attempt (metrics.go). It is
// the only package of the sidecar that links the SDK; cmd/sidecar opens it
// when diskless.storage.backend is s3, and every other stage sees only the
// small interface it defines.
package s3

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/logging"

	"github.com/diskless-sidecar/sidecar/internal/backoff"
	"github.com/diskless-sidecar/sidecar/internal/tracing"
	"github.com/diskless-sidecar/sidecar/objstore"
)

// Store is the Amazon S3 (or S3-compatible) backend, on aws-sdk-go-v2.
//
// Put sends objects up to Config.SinglePutMaxBytes (default PartSize) as
// one PutObject and larger ones as a multipart upload (feature/s3/manager, Config.Concurrency
// parts at once), every request with a CRC-32C checksum that the store
// verifies; see Put for how the stored object is checked and how failed
// multipart uploads are aborted. ReadRange is a ranged GetObject, List is
// ListObjectsV2, Delete is DeleteObject.
//
// Retries happen in two layers. The SDK resends one request (a PUT, a part,
// a Complete, a GET range, ...) that failed transiently — throttling (503
// SlowDown), 5xx, resets, timeouts; see classifyS3 — up to
// Config.MaxAttempts times with jittered exponential backoff, each resend
// from the request's first byte. The caller (upload.Uploader) retries a
// whole Put, from the object's first byte, when the SDK gives up or an
// attempt times out. Errors no retry can fix (access denied, no such bucket,
// bad credentials, wrong region) wrap objstore.ErrPermanent, so neither layer
// retries them.
//
// Every HTTP attempt of the client — each SDK retry, each GET of ReadRange's
// loop — is counted by operation and outcome (throttled, server_error,
// timeout, network, ...) in Stats, and each successful one timed, both
// exported through Config.MeterProvider: what S3 itself does, below the
// upload layer's counts.
//
// Key layout: key k is stored as "<Prefix>/k". Keys that are
// "<prefix>/<random hex>" (SPEC §7) spread requests over S3's key-range
// partitions by their leading random characters.
type Store struct {
	cfg    Config
	prefix string // cfg.Prefix + "/", or ""
	client *awss3.Client
	//lint:ignore SA1019 feature/s3/manager stays, deprecated, by the owner's decision (DESIGN §Object storage, Put).
	uploader *manager.Uploader
	http     *http.Client
	log      *slog.Logger
	now      func() time.Time
	pageSize int32 // keys per List page; 0: the store's (1000 on S3); tests
	stats    Stats
	metrics  metrics
	tr       tracing.Tracer // a span per attempt, when tracing is on
	sweep    staleSweep     // SweepStaleUploads' retries
}

var _ objstore.Store = (*Store)(nil)

// New returns an S3 store. It reads the SDK's default configuration
// (environment, shared config files) for the region and credentials not
// set in cfg, but makes no request: Check does.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("objstore: s3: %w", err)
	}
	cfg = cfg.withDefaults()
	s := &Store{cfg: cfg, log: cfg.Logger, now: time.Now,
		sweep: staleSweep{attempts: staleSweepAttempts, initial: staleSweepBackoff, maxBackoff: staleSweepBackoffMax}}
	var err error
	s.tr = tracing.New(cfg.TracerProvider)
	if s.metrics, err = newMetrics(cfg.MeterProvider, &s.stats); err != nil {
		return nil, fmt.Errorf("objstore: s3: metrics: %w", err)
	}
	if cfg.Prefix != "" {
		s.prefix = cfg.Prefix + "/"
	}
	// The SDK's buildable client, so that LoadDefaultConfig can apply a
	// custom CA bundle (AWS_CA_BUNDLE, ca_bundle) to it; the store then
	// owns the resulting transport, to close its idle connections.
	base := awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = cfg.ConnectTimeout }).
		WithTransportOptions(func(tr *http.Transport) {
			tr.TLSHandshakeTimeout = cfg.ConnectTimeout
			tr.ResponseHeaderTimeout = cfg.RequestTimeout
			// Parts of several objects and cache loads go to one host.
			tr.MaxIdleConns = 256
			tr.MaxIdleConnsPerHost = 256
		})
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithHTTPClient(base),
		awsconfig.WithRetryer(func() aws.Retryer { return newS3Retryer(cfg) }),
		awsconfig.WithLogger(sdkLogger{cfg.Logger}),
	}
	if cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.Region))
	}
	if cfg.Credentials != nil {
		opts = append(opts, awsconfig.WithCredentialsProvider(cfg.Credentials))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("objstore: s3: loading the AWS configuration: %w", err)
	}
	tr := base.GetTransport()
	if b, ok := awsCfg.HTTPClient.(*awshttp.BuildableClient); ok {
		tr = b.GetTransport()
	}
	s.http = &http.Client{
		Transport: tr,
		// Redirects are S3 errors (PermanentRedirect: wrong region), not
		// something to follow unsigned.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	awsCfg.HTTPClient = s.http
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	s.client = awss3.NewFromConfig(awsCfg, func(o *awss3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
		// Put asks for CRC-32C explicitly; nothing else needs checksums,
		// and ranged GETs cannot be validated against a whole-object one.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		o.DisableLogOutputChecksumValidationSkipped = true
		o.APIOptions = append(o.APIOptions, s.addAttemptMeter)
	})
	//lint:ignore SA1019 as for Store.uploader: the owner's choice of uploader.
	s.uploader = manager.NewUploader(s.client, func(u *manager.Uploader) {
		u.PartSize = cfg.PartSize
		u.Concurrency = cfg.Concurrency
		u.LeavePartsOnError = false // abort on failure (the default, pinned)
	})
	return s, nil
}

// Close stops the background retries of SweepStaleUploads, waiting for
// them, and releases the store's idle connections. Calls in flight are not
// affected; the store must not be used afterwards.
func (s *Store) Close() {
	s.stopSweep()
	s.http.CloseIdleConnections()
}

// Check makes one request (HeadBucket) to find out whether the bucket is
// reachable with the configured credentials. Its error wraps objstore.ErrPermanent
// when retrying cannot help (no such bucket, access denied, wrong region).
func (s *Store) Check(ctx context.Context) error {
	_, err := s.client.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: aws.String(s.cfg.Bucket)})
	if err != nil {
		if c := classifyS3(err); c == s3Permanent || c == s3NotFound {
			return fmt.Errorf("objstore: s3 bucket %s: %w: %w", s.cfg.Bucket, objstore.ErrPermanent, err)
		}
		return fmt.Errorf("objstore: s3 bucket %s: %w", s.cfg.Bucket, err)
	}
	return nil
}

// fullKey validates key and returns it with the configured prefix.
func (s *Store) fullKey(key string) (string, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return "", err
	}
	full := s.prefix + key
	if len(full) > objstore.MaxKeyBytes {
		return "", fmt.Errorf("%w %q: longer than %d bytes with prefix %q", objstore.ErrInvalidKey, key, objstore.MaxKeyBytes, s.cfg.Prefix)
	}
	return full, nil
}

// wrapErr marks err for callers: objstore.ErrPermanent for errors no retry fixes.
func wrapErr(op, key string, err error) error {
	if classifyS3(err) == s3Permanent {
		return fmt.Errorf("objstore: %s %s: %w: %w", op, key, objstore.ErrPermanent, err)
	}
	return fmt.Errorf("objstore: %s %s: %w", op, key, err)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crc32cBase64 is S3's encoding of a CRC-32C checksum: the 4 big-endian
// bytes in standard base64.
func crc32cBase64(sum uint32) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], sum)
	return base64.StdEncoding.EncodeToString(b[:])
}

// Put implements Store.Put.
//
// Objects up to Config.PartSize are one PutObject; larger ones a
// multipart upload of PartSize parts, Concurrency at a time. Either way
// the object is read straight from data (no copy), and each request, when
// the SDK resends it, is sent again from its first byte.
//
// Verification: the PutObject, and every part, carries its CRC-32C, which
// the store checks on receipt (a mismatch is a 400 BadDigest, resent). A
// multipart upload is created with full-object CRC-32C checksums and
// completed with the CRC-32C of all of data and its size
// (x-amz-mp-object-size), which the store checks against the parts it
// holds. The store answers with the CRC-32C of the object it stored, which
// must equal ours; a store that answers without one gets a HeadObject and
// the stored size must equal len(data). A mismatch fails the Put (an
// error the caller retries, overwriting the object).
//
// A multipart upload that fails is aborted (the SDK's uploader does, and
// Put makes sure: the abort runs even when ctx is done, under its own
// timeout), and when a CreateMultipartUpload needed more than one attempt
// — an earlier attempt may have created an upload whose answer was lost —
// Put lists the uploads of the key and aborts those left. An upload can
// still be left open when the process dies mid-upload or the store is
// unreachable for the abort: AbortStaleUploads, and a bucket lifecycle
// rule (AbortIncompleteMultipartUpload), remove those.
//
// As S3 PUTs are atomic, an object is never partly visible; but an error
// does not prove that no object was stored (an answer lost after the store
// committed it).
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	return s.put(ctx, key, data, s.cfg.SinglePutMaxBytes)
}

// PutWhole is Put sending any object of up to MaxPartSize (5 GiB, the
// largest one PutObject may carry) as one PutObject, larger ones as a
// multipart upload of PartSize parts: for objects written in the
// background, where one request is cheaper than parts sent in parallel
// (S3 bills each UploadPart, and the Create and Complete around them, as a
// PUT-class request: a 128 MiB segment object in 8 MiB parts costs 18
// requests instead of 1). Consolidation's segment objects go up this way
// (DESIGN §Consolidation). Errors as Put's.
func (s *Store) PutWhole(ctx context.Context, key string, data []byte) error {
	return s.put(ctx, key, data, MaxPartSize)
}

// put is Put with objects of up to singlePutMax bytes sent as one
// PutObject.
func (s *Store) put(ctx context.Context, key string, data []byte, singlePutMax int64) (err error) {
	full, err := s.fullKey(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: put %s: %w", key, err)
	}
	size := int64(len(data))
	sum := crc32cBase64(crc32.Checksum(data, castagnoli))
	mp := &multipartClient{api: s.client, size: size, timeout: s.cfg.RequestTimeout * time.Duration(s.cfg.MaxAttempts)}
	in := &awss3.PutObjectInput{
		Bucket:            aws.String(s.cfg.Bucket),
		Key:               aws.String(full),
		Body:              bytes.NewReader(data),
		ContentLength:     aws.Int64(size),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c,
		// Sent as the PutObject's checksum, or as the full-object checksum
		// of CompleteMultipartUpload (the uploader copies it there, never
		// to parts, whose checksums the SDK computes).
		ChecksumCRC32C: aws.String(sum),
	}
	//lint:ignore SA1019 as for Store.uploader: the owner's choice of uploader.
	out, err := s.uploader.Upload(ctx, in, func(u *manager.Uploader) {
		u.S3 = mp
		if size > u.PartSize && size <= singlePutMax {
			u.PartSize = size // one part: the uploader sends one PutObject
		}
	})
	defer s.sweepUploads(ctx, key, full, mp)
	if err != nil {
		return wrapErr("put", key, err)
	}
	if got := aws.ToString(out.ChecksumCRC32C); got != "" {
		if got != sum {
			return fmt.Errorf("objstore: put %s: %w: CRC-32C %s stored, %s sent", key, errStoredMismatch, got, sum)
		}
		return nil
	}
	// No checksum in the answer: the store does not do checksums. Check
	// the size at least.
	head, err := s.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(full)})
	if err != nil {
		return wrapErr("put (verify)", key, err)
	}
	if got := aws.ToInt64(head.ContentLength); got != size {
		return fmt.Errorf("objstore: put %s: %w: %d bytes stored, %d sent", key, errStoredMismatch, got, size)
	}
	return nil
}

// sweepUploads aborts the multipart uploads of full that Put may have
// left: when a CreateMultipartUpload took several attempts or failed, or an
// abort failed. It runs even when ctx is done, bounded by its own timeout.
func (s *Store) sweepUploads(ctx context.Context, key, full string, mp *multipartClient) {
	mp.mu.Lock()
	needed := mp.sweep
	mp.mu.Unlock()
	if !needed {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mp.timeout)
	defer cancel()
	n, err := s.abortUploads(sctx, full, func(u types.MultipartUpload) bool { return aws.ToString(u.Key) == full })
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "multipart uploads of a failed put may be left open",
			slog.String("key", key), slog.Any("error", err))
		return
	}
	if n > 0 {
		s.log.LogAttrs(ctx, slog.LevelInfo, "aborted multipart uploads left by retried requests",
			slog.String("key", key), slog.Int("uploads", n))
	}
}

// abortUploads aborts the multipart uploads under prefix (a full key
// prefix) for which keep returns true, and returns how many it aborted.
func (s *Store) abortUploads(ctx context.Context, prefix string, abort func(types.MultipartUpload) bool) (int, error) {
	in := &awss3.ListMultipartUploadsInput{Bucket: aws.String(s.cfg.Bucket), Prefix: aws.String(prefix)}
	n := 0
	var errs []error
	for {
		page, err := s.client.ListMultipartUploads(ctx, in)
		if err != nil {
			return n, errors.Join(append(errs, err)...)
		}
		for _, u := range page.Uploads {
			if !abort(u) {
				continue
			}
			_, err := s.client.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{
				Bucket: aws.String(s.cfg.Bucket), Key: u.Key, UploadId: u.UploadId})
			if err != nil && classifyS3(err) != s3RetryOperation { // NoSuchUpload: gone already
				errs = append(errs, fmt.Errorf("abort %s (%s): %w", aws.ToString(u.Key), aws.ToString(u.UploadId), err))
				continue
			}
			n++
		}
		if !aws.ToBool(page.IsTruncated) {
			return n, errors.Join(errs...)
		}
		in.KeyMarker, in.UploadIdMarker = page.NextKeyMarker, page.NextUploadIdMarker
	}
}

// AbortStaleUploads aborts the multipart uploads of keys starting with
// prefix (a key prefix, as for List) that were started more than olderThan
// ago, and returns how many. Uploads
// are left open only when a process died mid-upload or the store was
// unreachable for the abort; olderThan must exceed the longest upload
// (the sidecar passes the orphan scan's grace period), so that uploads in
// progress in other processes sharing the bucket are not touched.
func (s *Store) AbortStaleUploads(ctx context.Context, prefix string, olderThan time.Duration) (int, error) {
	cutoff := s.now().Add(-olderThan)
	n, err := s.abortUploads(ctx, s.prefix+prefix, func(u types.MultipartUpload) bool {
		return u.Initiated != nil && u.Initiated.Before(cutoff)
	})
	if err != nil {
		return n, fmt.Errorf("objstore: aborting stale multipart uploads: %w", err)
	}
	return n, nil
}

// multipartClient is the uploader's S3 client for one Put: it makes
// multipart uploads carry full-object checksums and the object size, runs
// aborts even after the Put's ctx is done, and notes when uploads may have
// been left behind.
type multipartClient struct {
	api     manager.UploadAPIClient
	size    int64
	timeout time.Duration // of an abort, all attempts together

	mu    sync.Mutex
	sweep bool // an upload of the key may be left open
}

func (c *multipartClient) needSweep() {
	c.mu.Lock()
	c.sweep = true
	c.mu.Unlock()
}

func (c *multipartClient) PutObject(ctx context.Context, in *awss3.PutObjectInput, opts ...func(*awss3.Options)) (*awss3.PutObjectOutput, error) {
	return c.api.PutObject(ctx, in, opts...)
}

func (c *multipartClient) UploadPart(ctx context.Context, in *awss3.UploadPartInput, opts ...func(*awss3.Options)) (*awss3.UploadPartOutput, error) {
	return c.api.UploadPart(ctx, in, opts...)
}

func (c *multipartClient) CreateMultipartUpload(ctx context.Context, in *awss3.CreateMultipartUploadInput, opts ...func(*awss3.Options)) (*awss3.CreateMultipartUploadOutput, error) {
	in.ChecksumType = types.ChecksumTypeFullObject
	out, err := c.api.CreateMultipartUpload(ctx, in, opts...)
	if err != nil {
		c.needSweep() // an attempt may have created one, its answer lost
		return out, err
	}
	if res, ok := retry.GetAttemptResults(out.ResultMetadata); ok && len(res.Results) > 1 {
		c.needSweep()
	}
	return out, nil
}

func (c *multipartClient) CompleteMultipartUpload(ctx context.Context, in *awss3.CompleteMultipartUploadInput, opts ...func(*awss3.Options)) (*awss3.CompleteMultipartUploadOutput, error) {
	in.ChecksumType = types.ChecksumTypeFullObject
	in.MpuObjectSize = aws.Int64(c.size)
	return c.api.CompleteMultipartUpload(ctx, in, opts...)
}

func (c *multipartClient) AbortMultipartUpload(ctx context.Context, in *awss3.AbortMultipartUploadInput, opts ...func(*awss3.Options)) (*awss3.AbortMultipartUploadOutput, error) {
	// The uploader aborts with the Put's ctx, which is often what ended
	// the upload (cancelled, or the attempt's timeout): abort regardless.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
	defer cancel()
	out, err := c.api.AbortMultipartUpload(actx, in, opts...)
	if err != nil && classifyS3(err) != s3RetryOperation { // NoSuchUpload: nothing left
		c.needSweep()
	}
	return out, err
}

// Delete implements Store.Delete (DeleteObject; S3 answers success for a
// missing key, and a 404 from another store counts as success too).
func (s *Store) Delete(ctx context.Context, key string) error {
	full, err := s.fullKey(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: delete %s: %w", key, err)
	}
	_, err = s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(full)})
	if err != nil && classifyS3(err) != s3NotFound {
		return wrapErr("delete", key, err)
	}
	return nil
}

// List implements Store.List with ListObjectsV2, one page (up to 1000
// keys) at a time, in S3's order: lexical by the UTF-8 bytes of the key.
func (s *Store) List(ctx context.Context, prefix string, fn func(objstore.ObjectInfo) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: list %q: %w", prefix, err)
	}
	p := awss3.NewListObjectsV2Paginator(s.client, &awss3.ListObjectsV2Input{
		Bucket: aws.String(s.cfg.Bucket),
		Prefix: aws.String(s.prefix + prefix),
	}, func(o *awss3.ListObjectsV2PaginatorOptions) { o.Limit = s.pageSize })
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return wrapErr("list", strconv.Quote(prefix), err)
		}
		for _, o := range page.Contents {
			k, ok := strings.CutPrefix(aws.ToString(o.Key), s.prefix)
			if !ok || strings.HasSuffix(k, "/") {
				continue // a "directory" marker, not an object
			}
			if err := fn(objstore.ObjectInfo{Key: k, Size: aws.ToInt64(o.Size), LastModified: aws.ToTime(o.LastModified)}); err != nil {
				return err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: list %q: %w", prefix, err)
	}
	return nil
}

// newS3Retryer is the SDK's standard retryer made explicit: Config's
// attempts and backoff, classifyS3's verdict as the only retry test, and no
// retry quota (the token bucket that stops retries after a burst of
// failures), since attempts are bounded per request and the upload layer
// backs off on top.
func newS3Retryer(cfg Config) aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = cfg.MaxAttempts
		o.MaxBackoff = cfg.MaxBackoff
		o.Retryables = s3Retryables
		o.RateLimiter = ratelimit.None
		o.Backoff = retry.BackoffDelayerFunc(func(attempt int, _ error) (time.Duration, error) {
			return backoff.Wait(cfg.InitialBackoff, cfg.MaxBackoff, attempt), nil
		})
	})
}

// sdkLogger sends the SDK's log lines to slog: warnings as warnings, the
// rest at debug.
type sdkLogger struct{ l *slog.Logger }

func (s sdkLogger) Logf(c logging.Classification, format string, v ...any) {
	level := slog.LevelDebug
	if c == logging.Warn {
		level = slog.LevelWarn
	}
	s.l.Log(context.Background(), level, "aws sdk: "+fmt.Sprintf(format, v...))
}
