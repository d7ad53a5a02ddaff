// Package objstore is the object-store boundary: a small interface and its
// backends — a local directory (Dir, the default, under data.dir) here,
// Amazon S3 or an S3-compatible store in objstore/s3 (on aws-sdk-go-v2,
// which nothing else links), and an in-memory store for tests in
// objstoretest (Memory). Every backend passes the conformance suite in
// objstoretest (S3 against versitygw).
//
// Objects are immutable: written once, whole, under a key that is never
// reused (SPEC §7); read by byte range; deleted when no coordinator shard
// references them. A Put is atomic: readers see the whole object or none.
//
// Keys are slash-separated paths that every backend accepts alike (see
// ValidateKey), so a key that works against the local directory also works
// against S3 and cannot escape a Dir's root.
//
// # Reads
//
// A read is all or an error, and the object's size is part of every
// answer: ReadRange(ctx, key, off, p) returns the n = min(len(p), size−off)
// bytes of the object that [off, off+len(p)) covers, all of them, and size;
// or an error, which never wraps io.EOF. There is no io.ReaderAt-style
// short read with io.EOF to tell "the object ends here" from "the read
// failed midway": a caller that needs all of p checks n == len(p) (the
// block cache, which reads whole blocks, learns from size whether the
// object ends in a block). Callers rely on nothing else; objstoretest
// pins it for every backend.
//
// Consumers depend on the smaller interfaces they need, defined in their own
// packages (upload.Putter, cache.RangeReader); Store is the union a backend
// provides. Cross-cutting concerns (metrics, retries, fault injection) wrap
// a Store rather than growing it.
package objstore

import (
	"context"
	"errors"
	"time"
)

// ErrNotExist is returned (wrapped) when the key names no object.
var ErrNotExist = errors.New("objstore: object does not exist")

// ErrInvalidKey is returned (wrapped) for a key that ValidateKey rejects.
// Retrying with the same key fails the same way.
var ErrInvalidKey = errors.New("objstore: invalid key")

// ErrPermanent is returned (wrapped) for failures that retrying cannot fix:
// the store refuses the request as such (no such bucket, access denied,
// bad credentials, wrong region). Callers that retry stop at it.
var ErrPermanent = errors.New("objstore: permanent failure")

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key          string
	Size         int64 // bytes
	LastModified time.Time
}

// Store is what every backend implements. All methods are safe for
// concurrent use, and all return an error wrapping ctx.Err() when ctx is
// done before the operation completes. Keys are checked with ValidateKey;
// an invalid key returns an error wrapping ErrInvalidKey.
type Store interface {
	// Put stores data under key, atomically: once Put returns nil the object
	// is durable and complete; readers never see part of it. On error no
	// object, or a complete one, is visible under key (with S3 an answer
	// lost after the store committed the object leaves it there; callers
	// treat the key as possibly used). Put does not retain data after it
	// returns.
	// Callers never overwrite a key (SPEC §7), so the outcome of putting an
	// existing key is backend-specific (Dir and Memory replace it).
	Put(ctx context.Context, key string, data []byte) error
	// ReadRange reads the object's bytes from byte off into p and reports
	// the object's size; see "Reads" in the package comment. On success
	// p[:n] holds exactly the object's bytes [off, off+n), n =
	// min(len(p), size−off) (0 when off ≥ size), and size is the
	// object's length in bytes: a read is never short but at the object's
	// end, and size, not a sentinel, says where that is. An empty p reads
	// nothing and still reports size (or ErrNotExist). On error n and size
	// are 0 and p's bytes are unspecified.
	// Errors: ErrNotExist (wrapped) if there is no object under key; a
	// negative off; the backend's failures. No error wraps io.EOF.
	ReadRange(ctx context.Context, key string, off int64, p []byte) (n int, size int64, err error)
	// Delete removes the object; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List calls fn for every object whose key starts with prefix (any
	// string; "" lists everything), in lexical byte order of keys, stopping
	// at fn's first error, which List returns unwrapped. Objects put or
	// deleted while List runs may or may not be reported. fn may call the
	// store, e.g. to Delete the object it was given.
	List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error
}
