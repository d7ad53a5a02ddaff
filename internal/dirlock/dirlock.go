// Package dirlock is the one advisory file lock of the project: the
// sidecar holds one on data.dir/.lock for as long as it runs, so that two
// sidecars never share a data.dir — its metadata logs, its local object
// store, its meta.properties. The lock is taken on an open file
// (flock(2) on unix, LockFileEx on Windows) and released when the file is
// closed, by Release or by the process's exit, however it ends; another
// Lock of the same file in the same process conflicts too.
package dirlock

import (
	"errors"
	"fmt"
	"os"
)

// ErrLocked is returned (wrapped) by TryAcquire when another holder has
// the lock.
var ErrLocked = errors.New("locked by another process")

// Lock is an exclusive lock held on one file.
type Lock struct {
	f *os.File
}

// TryAcquire takes an exclusive lock on the file at path, creating it if
// missing (not its directory), without waiting. Errors: ErrLocked
// (wrapped) when another process, or another Lock in this one, holds it;
// IO errors opening the file.
func TryAcquire(path string) (*Lock, error) { return acquire(path, false) }

// Acquire is TryAcquire that waits until the lock is free.
func Acquire(path string) (*Lock, error) { return acquire(path, true) }

func acquire(path string, wait bool) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := lockFile(f, wait); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Release releases the lock. Release again returns nil.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the file releases the lock
	l.f = nil
	return err
}
