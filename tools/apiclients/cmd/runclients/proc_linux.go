package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel send the server SIGTERM if this program
// dies without stopping it (SIGKILL, a crash), so no server outlives it.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
