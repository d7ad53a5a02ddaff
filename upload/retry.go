package upload

import (
	"context"
	"errors"

	"github.com/diskless-sidecar/sidecar/objstore"
)

// retryable is the one retry classifier of the upload boundary: it reports
// whether a failed attempt, made under the caller's ctx, is worth another
// try. Upload also stops after Config.MaxAttempts whatever this says.
func retryable(ctx context.Context, err error) bool {
	switch {
	case ctx.Err() != nil:
		// The caller's ctx is done (shutdown, or the produce requests gave
		// up): nobody wants the result, and every further attempt would fail
		// at once anyway.
		return false
	case errors.Is(err, context.DeadlineExceeded):
		// The caller's ctx is alive, so this was the attempt's own timeout: a
		// hung connection or a slow store. A fresh attempt, on a fresh
		// connection, usually succeeds.
		return true
	case errors.Is(err, objstore.ErrInvalidKey):
		// The key is malformed: every attempt with the same key fails the
		// same way. (Config.Validate makes this unreachable; it guards
		// against a backend with stricter rules.)
		return false
	case errors.Is(err, objstore.ErrPermanent):
		// The store refuses the request as such: no such bucket, access
		// denied, bad credentials, wrong region (the S3 store's classifier,
		// s3.classifyS3, decides). Every attempt would fail the same way; the
		// batches fail now with KAFKA_STORAGE_ERROR instead of after
		// MaxAttempts × the backoff.
		return false
	default:
		// Everything else is presumed transient and worth the whole object
		// again, from its first byte: throttling, 5xx, resets and timeouts
		// that outlasted the S3 SDK's own request retries; a multipart
		// upload that failed (and was aborted); a stored object whose
		// checksum or size differs from what was sent (the next attempt
		// overwrites it); a full disk under a Dir.
		return true
	}
}
