package executor

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// Windows has no process groups to signal and no SIGTERM: the command
// runs in a new process group for console control events, and stopping it
// means taskkill on its process tree — without /F first (a polite close,
// which console programs may not act on), with /F when the grace period
// ends — and killing the command's own process should taskkill fail.
// Nothing kills the command when the worker itself dies.

// execNoFollow is 0: Windows has no O_NOFOLLOW, and creating symbolic
// links there needs a privilege that commands rarely hold.
const execNoFollow = 0

// execSysProcAttr starts the command in a new process group.
func execSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}

// execTaskkillWait bounds one taskkill run.
const execTaskkillWait = 10 * time.Second

// execGroupSignaller stops the command's process tree: SIGTERM asks, any
// other signal forces.
func execGroupSignaller(proc *os.Process, log *slog.Logger) func(syscall.Signal) {
	return func(sig syscall.Signal) {
		args := []string{"/T", "/PID", strconv.Itoa(proc.Pid)}
		if sig != syscall.SIGTERM {
			args = append([]string{"/F"}, args...)
		}
		ctx, cancel := context.WithTimeout(context.Background(), execTaskkillWait)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "taskkill", args...).CombinedOutput(); err != nil {
			// Also when the tree has exited already: taskkill then fails.
			log.Debug("taskkill", "pid", proc.Pid, "args", args, "err", err, "output", string(out))
			if sig != syscall.SIGTERM {
				_ = proc.Kill()
			}
		}
	}
}

// execGroupGone is true: Windows has no cheap way to ask whether the
// command's descendants are gone, so the grace period ends when the
// command itself exits.
func execGroupGone(int) bool { return true }
