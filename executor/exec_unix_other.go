//go:build unix && !linux

package executor

import "syscall"

// execSysProcAttr starts the command in a process group of its own, so
// that it and all it starts can be signalled as one group. macOS and the
// BSDs have no Pdeathsig: a command outlives a worker that is killed
// outright (SIGKILL, OOM); a worker that stops normally still stops it.
func execSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
