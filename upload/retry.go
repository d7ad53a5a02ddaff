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
	default:
		// Everything else — connection resets, 5xx, throttling, a full disk
		// under a Dir — is presumed transient. The S3 backend will add
		// classes for permanent errors (access denied, no such bucket) that
		// should stop at once.
		return true
	}
}
