//go:build unix

package worker

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// lockSpoolDir takes the lock of a spool directory (its file "lock"),
// creating it when create is set; the lock is held until the returned
// file is closed, and lapses with the process.
func lockSpoolDir(dir string, create bool) (io.Closer, error) {
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(filepath.Join(dir, "lock"), flags, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
