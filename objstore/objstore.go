// Package objstore is the object-store boundary: a small interface and its
// backends — a local directory (the default), an in-memory store for tests,
// and S3 (another issue). Every backend passes the conformance suite in
// objstoretest.
//
// Objects are immutable: written once, whole, under a key that is never
// reused (SPEC §7); read by byte range; deleted when no coordinator shard
// references them. A Put is atomic: readers see the whole object or none.
package objstore

import (
	"context"
	"errors"
	"time"
)

// ErrNotExist is returned (wrapped) when the key names no object.
var ErrNotExist = errors.New("objstore: object does not exist")

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key          string
	Size         int64 // bytes
	LastModified time.Time
}

// Store is what every backend implements. Consumers depend on the smaller
// interfaces they need (upload: Put; cache: ReadAt; orphan scan: List and
// Delete), which Store satisfies.
type Store interface {
	// Put stores data under key, atomically: once Put returns nil the object
	// is durable and complete; on error no object, or a previous complete
	// one, is visible under key.
	Put(ctx context.Context, key string, data []byte) error
	// ReadAt reads len(p) bytes of the object starting at byte off, with
	// io.ReaderAt semantics: n < len(p) only with an error, io.EOF when the
	// object ends first. Errors: ErrNotExist (wrapped).
	ReadAt(ctx context.Context, key string, p []byte, off int64) (n int, err error)
	// Delete removes the object; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List calls fn for every object whose key starts with prefix, in
	// lexical key order, stopping at fn's first error.
	List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error
}
