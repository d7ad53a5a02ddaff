//go:build unix

package coordinator

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/diskless-sidecar/sidecar/internal/fsutil"
)

// lockDir takes an exclusive advisory lock on dir/LOCK, so that two
// processes never append to the same metadata logs. The lock is released
// when the returned file is closed (or the process exits).
func lockDir(dir string) (*os.File, error) {
	if err := fsutil.MkdirAll(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("coordinator: lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("coordinator: %s is in use by another process", dir)
		}
		return nil, fmt.Errorf("coordinator: lock %s: %w", path, err)
	}
	return f, nil
}
