//go:build unix

package dirlock

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes flock(2)'s exclusive lock on f, failing with ErrLocked
// instead of waiting unless wait.
func lockFile(f *os.File, wait bool) error {
	how := syscall.LOCK_EX
	if !wait {
		how |= syscall.LOCK_NB
	}
	for {
		err := syscall.Flock(int(f.Fd()), how)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return ErrLocked
		default:
			return err
		}
	}
}
