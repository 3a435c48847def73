//go:build unix

package executor

import (
	"errors"
	"log/slog"
	"os"
	"syscall"
)

// execNoFollow makes opening an artifact fail on a symbolic link, so a
// command cannot have the worker upload a file outside its directory.
const execNoFollow = syscall.O_NOFOLLOW

// execGroupSignaller signals the process group the command leads (its
// pgid is its pid, from Setpgid): the command and everything it started.
func execGroupSignaller(proc *os.Process, log *slog.Logger) func(syscall.Signal) {
	pgid := proc.Pid
	return func(sig syscall.Signal) {
		if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			log.Warn("signalling process group", "pgid", pgid, "signal", sig, "err", err)
		}
	}
}

// execGroupGone reports whether no process of the group is left.
func execGroupGone(pgid int) bool {
	return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}
