//go:build !unix && !windows

package dirlock

import "os"

// lockFile locks nothing: this system has neither flock(2) nor
// LockFileEx, so exclusive use of the file is the operator's
// responsibility.
func lockFile(*os.File, bool) error { return nil }
