package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/diskless-sidecar/sidecar/internal/backoff"
	"github.com/diskless-sidecar/sidecar/objstore"
)

// ReadRange implements objstore.Store.ReadRange with ranged GetObjects.
//
// Each attempt is one GET of the bytes still missing, under
// Config.RequestTimeout from sending it to the last byte; a transient
// failure (see classifyS3), also in the middle of the body, or an attempt
// that timed out is retried up to Config.MaxAttempts attempts in all,
// keeping the bytes already read. An empty p costs a HeadObject (for the
// size, and to report ErrNotExist faithfully).
//
// The object's size, and so where it ends, is learnt only from what the
// store says about the object, never from a body that is shorter than
// asked: the size in the answer's Content-Range ("bytes first-last/size"),
// or, when the store ignores the range and sends the whole object, the
// body's Content-Length or its framed end. An answer that does not say (a
// Content-Range of unknown size "*", a whole object without
// Content-Length read only in part) and a 416 (InvalidRange: the range
// starts at or after the end, or the object is empty; S3 puts the size in
// neither header nor error code the SDK exposes) cost a HeadObject, whose
// Content-Length is the size. An answer may lack Content-Length (chunked,
// or HTTP/2): its length is then unknown, and it is read up to what its
// Content-Range announces. A body shorter than its Content-Range, and a
// range that stops short of both len(p) and the object's end, are
// failures (io.ErrUnexpectedEOF), retried for the missing bytes. No error
// wraps io.EOF.
func (s *Store) ReadRange(ctx context.Context, key string, off int64, p []byte) (int, int64, error) {
	full, err := s.fullKey(key)
	if err != nil {
		return 0, 0, err
	}
	if off < 0 {
		return 0, 0, fmt.Errorf("objstore: read %s: negative offset %d", key, off)
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, fmt.Errorf("objstore: read %s: %w", key, err)
	}
	if len(p) == 0 {
		size, err := s.headSize(ctx, key, full)
		if err != nil {
			return 0, 0, err
		}
		return 0, size, nil
	}
	n := 0
	for attempt := 1; ; attempt++ {
		m, size, err := s.readOnce(ctx, full, p[n:], off+int64(n))
		n += m
		switch {
		case err == nil:
			if size < 0 {
				// The answer did not say how large the object is.
				if size, err = s.headSize(ctx, key, full); err != nil {
					return 0, 0, err
				}
			}
			if want := min(int64(len(p)), max(size-off, 0)); int64(n) != want {
				return 0, 0, fmt.Errorf("objstore: read %s [%d, %d): the store sent %d bytes of an object of %d", key, off, off+int64(len(p)), n, size)
			}
			return n, size, nil
		case classifyS3(err) == s3NotFound:
			return 0, 0, fmt.Errorf("objstore: read %s: %w", key, objstore.ErrNotExist)
		case errors.Is(err, io.EOF):
			// The connection closed where an answer was due (net/http's
			// `Get "…": EOF`): a failure, which must not read as the
			// object's end to callers testing with errors.Is.
			err = fmt.Errorf("%w: %v", io.ErrUnexpectedEOF, err)
		}
		if ctx.Err() != nil || attempt >= s.cfg.MaxAttempts {
			return 0, 0, wrapErr("read", key, err)
		}
		if c := classifyS3(err); c != s3RetryRequest && c != s3Canceled {
			return 0, 0, wrapErr("read", key, err)
		}
		// A transient failure, or the attempt's own timeout (ctx is alive).
		if err := backoff.Sleep(ctx, backoff.Wait(s.cfg.InitialBackoff, s.cfg.MaxBackoff, attempt)); err != nil {
			return 0, 0, fmt.Errorf("objstore: read %s: %w", key, err)
		}
	}
}

// headSize returns the size of the object under full (key with the
// prefix) from a HeadObject's Content-Length.
func (s *Store) headSize(ctx context.Context, key, full string) (int64, error) {
	head, err := s.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(full)})
	switch {
	case classifyS3(err) == s3NotFound:
		return 0, fmt.Errorf("objstore: read %s: %w", key, objstore.ErrNotExist)
	case err != nil:
		return 0, wrapErr("read (size)", key, err)
	case head.ContentLength == nil || *head.ContentLength < 0:
		return 0, fmt.Errorf("objstore: read %s: HeadObject answered without the object's size", key)
	}
	return *head.ContentLength, nil
}

// readOnce makes one GET attempt for len(p) > 0 bytes at off. Its answer
// is complete (err nil) when p is full or the object ends after the n
// bytes read; size is the object's size if the answer said it, else −1.
// A 416 is complete with no bytes and an unknown size. An answer that
// holds fewer bytes than it announces or than p without reaching the end
// is io.ErrUnexpectedEOF (wrapped).
func (s *Store) readOnce(ctx context.Context, full string, p []byte, off int64) (n int, size int64, err error) {
	actx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	out, err := s.client.GetObject(actx, &awss3.GetObjectInput{
		Bucket: aws.String(s.cfg.Bucket),
		Key:    aws.String(full),
		Range:  aws.String(fmt.Sprintf("bytes=%d-%d", off, off+int64(len(p))-1)),
	}, func(o *awss3.Options) {
		// ReadRange's loop is the only retry of a GET: it covers failures
		// in the body too, and keeps what was read.
		o.Retryer = retry.AddWithMaxAttempts(o.Retryer, 1)
	})
	if err != nil {
		if rangeNotSatisfiable(err) {
			return 0, -1, nil // off is at or past the end (or the object is empty)
		}
		return 0, -1, err
	}
	defer out.Body.Close()
	n, size, err = readAnswer(out, p, off)
	if err != nil {
		// An answer this read rejects (short, or with a range it did not
		// ask for) is a failed attempt, however well its HTTP went.
		if f, ok := out.Body.(interface{ fail(error) }); ok {
			f.fail(err)
		}
	}
	return n, size, err
}

// readAnswer reads p at off from a GET's answer (see readOnce).
func readAnswer(out *awss3.GetObjectOutput, p []byte, off int64) (int, int64, error) {
	if cr := aws.ToString(out.ContentRange); cr != "" {
		return readRange(out.Body, cr, out.ContentLength, p, off)
	}
	// The store ignored the range and sends the whole object.
	framed := false
	if raw, ok := awsmiddleware.GetRawResponse(out.ResultMetadata).(*smithyhttp.Response); ok {
		// Chunked coding and HTTP/2 streams mark their end; a body that
		// runs until the connection closes (HTTP/1 without a length) does
		// not tell its end from a broken connection.
		framed = raw.ProtoMajor >= 2 || slices.Contains(raw.TransferEncoding, "chunked")
	}
	return readWhole(out.Body, out.ContentLength, framed, p, off)
}

// rangeNotSatisfiable reports a 416 answer: S3's InvalidRange, for a range
// that starts at or after the object's end.
func rangeNotSatisfiable(err error) bool {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode() == "InvalidRange" {
		return true
	}
	code, ok := httpStatus(err)
	return ok && code == http.StatusRequestedRangeNotSatisfiable
}

// readRange reads a ranged answer (206) for p at off: Content-Range cr,
// Content-Length length (nil when absent). size is the one cr states, −1
// for "*".
func readRange(body io.Reader, cr string, length *int64, p []byte, off int64) (n int, size int64, err error) {
	first, last, size, err := parseContentRange(cr)
	if err != nil {
		return 0, -1, err
	}
	if first != off {
		return 0, -1, fmt.Errorf("response range %q does not start at %d", cr, off)
	}
	sent := last - first + 1
	if length != nil && *length != sent {
		return 0, -1, fmt.Errorf("response of %d bytes for range %q: %w", *length, cr, io.ErrUnexpectedEOF)
	}
	n, err = readFull(body, p[:min(sent, int64(len(p)))])
	if err != nil {
		return n, -1, bodyError(err, n, cr)
	}
	if n == len(p) || (size >= 0 && off+int64(n) == size) {
		return n, size, nil
	}
	// The store sent less than asked, but not up to the object's end (or
	// without saying where that is): ask again for the rest.
	return n, -1, fmt.Errorf("response range %q stops short of the %d bytes asked: %w", cr, len(p), io.ErrUnexpectedEOF)
}

// readWhole reads p at off from an answer that is the whole object: its
// Content-Length (nil when absent) is the object's size; without one, the
// object ends where a framed body does, and its size is known only if the
// body ends before p is full.
func readWhole(body io.Reader, length *int64, framed bool, p []byte, off int64) (n int, size int64, err error) {
	if length != nil && off >= *length {
		return 0, *length, nil
	}
	if length == nil && !framed {
		return 0, -1, fmt.Errorf("whole-object response without Content-Length or framing: %w", io.ErrUnexpectedEOF)
	}
	if skipped, err := io.CopyN(io.Discard, body, off); err != nil {
		if err == io.EOF && length == nil {
			return 0, skipped, nil // the framed body ended, the object before off
		}
		return 0, -1, bodyError(err, int(skipped), "whole object")
	}
	want := int64(len(p))
	if length != nil {
		want = min(want, *length-off)
	}
	n, err = readFull(body, p[:want])
	switch {
	case err == io.EOF && length == nil:
		return n, off + int64(n), nil // the framed body ended: so does the object
	case err != nil:
		return n, -1, bodyError(err, n, "whole object")
	case length != nil:
		return n, *length, nil
	}
	return n, -1, nil
}

// readFull is io.ReadFull that keeps a body's own end apart from a broken
// body: it returns io.EOF when the body ended properly (its framing said
// so) before p was full, and the body's error otherwise (net/http reports
// a connection that broke mid-body as io.ErrUnexpectedEOF).
func readFull(body io.Reader, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := body.Read(p[n:])
		n += m
		if err != nil {
			if n == len(p) {
				break
			}
			return n, err
		}
	}
	return n, nil
}

// bodyError describes a body that failed after n bytes of what: its end
// before the bytes announced, clean or not, is io.ErrUnexpectedEOF.
func bodyError(err error, n int, what string) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("response body of %s ended after %d bytes: %w", what, n, io.ErrUnexpectedEOF)
	}
	return err
}

// parseContentRange parses "bytes first-last/size" (RFC 9110 §14.4); size
// is -1 for "*" (unknown).
func parseContentRange(v string) (first, last, size int64, err error) {
	bad := fmt.Errorf("bad Content-Range %q", v)
	rest, ok := strings.CutPrefix(v, "bytes ")
	if !ok {
		return 0, 0, 0, bad
	}
	rng, total, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, 0, bad
	}
	a, b, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, 0, bad
	}
	first, err1 := strconv.ParseInt(a, 10, 64)
	last, err2 := strconv.ParseInt(b, 10, 64)
	size = -1
	var err3 error
	if total != "*" {
		size, err3 = strconv.ParseInt(total, 10, 64)
	}
	if err1 != nil || err2 != nil || err3 != nil || first < 0 || last < first || (size >= 0 && last >= size) {
		return 0, 0, 0, bad
	}
	return first, last, size, nil
}
