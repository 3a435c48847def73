package executor

import "syscall"

// execSysProcAttr starts the command in a process group of its own
// (Setpgid), so that it and all it starts can be signalled as one group,
// and kills it if the worker itself dies (Pdeathsig; an OOM kill, say),
// so that it does not go on driving the phone unsupervised.
func execSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
