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
//
// A new lock file is made and locked under another name, then renamed to
// "lock": made as "lock" and then locked, another worker's start could
// find it in the moment between, take its free lock for a dead worker's,
// and remove the directory being made (two workers started together on
// one spool directory did).
func lockSpoolDir(dir string, create bool) (io.Closer, error) {
	name := filepath.Join(dir, "lock")
	flags := os.O_RDWR
	if create {
		name, flags = filepath.Join(dir, "lock.new"), flags|os.O_CREATE|os.O_EXCL
	}
	f, err := os.OpenFile(name, flags, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	if create {
		if err := os.Rename(name, filepath.Join(dir, "lock")); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}
