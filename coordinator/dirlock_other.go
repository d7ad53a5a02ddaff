//go:build !unix

package coordinator

import (
	"os"
	"path/filepath"

	"github.com/diskless-sidecar/sidecar/internal/fsutil"
)

// lockDir creates dir/LOCK; without flock, exclusive use of dir is the
// operator's responsibility.
func lockDir(dir string) (*os.File, error) {
	if err := fsutil.MkdirAll(dir); err != nil {
		return nil, err
	}
	return os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o644)
}
