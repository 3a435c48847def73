//go:build !unix

package worker

import (
	"errors"
	"io"
	"os"
	"path/filepath"
)

// lockSpoolDir creates the lock file of a new spool directory; without
// flock nothing tells a dead worker's directory from a live one's, so
// others' directories are never taken (never cleaned at start).
func lockSpoolDir(dir string, create bool) (io.Closer, error) {
	if !create {
		return nil, errors.New("spool locks need flock")
	}
	return os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
}
