package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// DefaultDeviceInfoTimeout is how long a device-info command may run
// before its process group is killed.
const DefaultDeviceInfoTimeout = 10 * time.Second

// deviceInfoStderr is how much of a failing command's stderr its error
// quotes.
const deviceInfoStderr = 512

// DeviceInfo runs a worker's --device-info command, which prints one JSON
// object describing the phone (queue.ParseDeviceInfo). The command runs in
// a process group of its own with no stdin and the worker's environment
// without its secrets; its output is read up to queue.MaxDeviceInfoBytes
// and it may run for the timeout: past either, the whole group is killed
// and the run is an error. A run never takes much longer than the timeout,
// whatever the command does.
type DeviceInfo struct {
	args    []string
	timeout time.Duration
	log     *slog.Logger
	// name is the flag errors name ("device-info" when empty); env is
	// added to the command's environment.
	name string
	env  []string
}

// NewDeviceInfo returns a DeviceInfo running command, split like a shell
// would (as --exec is). timeout 0 is DefaultDeviceInfoTimeout.
func NewDeviceInfo(command string, timeout time.Duration, logger *slog.Logger) (*DeviceInfo, error) {
	args, err := splitCommand("device-info", command)
	if err != nil {
		return nil, err
	}
	if timeout <= 0 {
		timeout = DefaultDeviceInfoTimeout
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &DeviceInfo{args: args, timeout: timeout, log: logger}, nil
}

// Run runs the command once and returns the facts it printed.
func (d *DeviceInfo) Run(ctx context.Context) (queue.DeviceInfo, error) {
	out, err := d.output(ctx)
	if err != nil {
		return queue.DeviceInfo{}, err
	}
	return queue.ParseDeviceInfo(out)
}

// output runs the command and returns its stdout, bounded in size and time.
func (d *DeviceInfo) output(ctx context.Context) ([]byte, error) {
	out, err := d.run(ctx)
	if err != nil && d.name != "" {
		return out, errors.New(strings.Replace(err.Error(), "device-info: ", d.name+": ", 1))
	}
	return out, err
}

func (d *DeviceInfo) run(ctx context.Context) ([]byte, error) {
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("device-info: creating pipe: %w", err)
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		execCloseAll(stdoutR, stdoutW)
		return nil, fmt.Errorf("device-info: creating pipe: %w", err)
	}
	cmd := exec.Command(d.args[0], d.args[1:]...)
	cmd.Stdout, cmd.Stderr = stdoutW, stderrW // stdin: the null device
	cmd.Env = append(execChildEnv(os.Environ()), d.env...)
	cmd.SysProcAttr = execSysProcAttr()

	done := make(chan struct{})
	var waitErr error
	started := make(chan error, 1)
	go func() {
		// As in Exec.start: Pdeathsig needs the forking thread to live.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waitErr = cmd.Wait()
		close(done)
	}()
	err = <-started
	execCloseAll(stdoutW, stderrW)
	if err != nil {
		execCloseAll(stdoutR, stderrR)
		return nil, fmt.Errorf("device-info: starting %s: %w", d.args[0], err)
	}
	kill := execGroupSignaller(cmd.Process, d.log)

	type read struct {
		b   []byte
		err error
	}
	stdout := make(chan read, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(stdoutR, queue.MaxDeviceInfoBytes+1))
		stdout <- read{b, err}
	}()
	stderr := make(chan []byte, 1)
	go func() {
		var tail bytes.Buffer
		buf := make([]byte, 4096)
		for {
			n, err := stderrR.Read(buf)
			tail.Write(buf[:n])
			if tail.Len() > 4*deviceInfoStderr {
				tail.Next(tail.Len() - deviceInfoStderr)
			}
			if err != nil {
				stderr <- tail.Bytes()
				return
			}
		}
	}()

	timer := time.NewTimer(d.timeout)
	defer timer.Stop()
	var out read
	var failure error
	select {
	case out = <-stdout:
		if len(out.b) > queue.MaxDeviceInfoBytes {
			failure = fmt.Errorf("device-info: output over %d bytes", queue.MaxDeviceInfoBytes)
		}
	case <-timer.C:
		failure = fmt.Errorf("device-info: no answer within %v: killed", d.timeout)
	case <-ctx.Done():
		failure = fmt.Errorf("device-info: %w", context.Cause(ctx))
	}
	if failure == nil {
		// Output closed: the command is ending; give it what is left of
		// the timeout to exit.
		select {
		case <-done:
		case <-timer.C:
			failure = fmt.Errorf("device-info: did not exit within %v: killed", d.timeout)
		case <-ctx.Done():
			failure = fmt.Errorf("device-info: %w", context.Cause(ctx))
		}
	}
	// Nothing of the group outlives the run.
	kill(syscall.SIGKILL)
	exited := true
	select {
	case <-done:
	case <-time.After(execKillWait):
		exited = false
		d.log.Error("device-info command did not exit after SIGKILL", "pid", cmd.Process.Pid)
	}
	// Read stderr to its end before closing it, but only for so long: a
	// process that left the group may hold the pipes open.
	var tail []byte
	select {
	case tail = <-stderr:
	case <-time.After(execDrainWait):
		execCloseAll(stdoutR, stderrR)
		tail = <-stderr
	}
	execCloseAll(stdoutR, stderrR)
	switch {
	case failure != nil:
		return nil, failure
	case !exited:
		return nil, errors.New("device-info: command did not exit after SIGKILL")
	}
	if waitErr != nil {
		msg := strings.TrimSpace(strings.ToValidUTF8(string(tail), "?"))
		if len(msg) > deviceInfoStderr {
			msg = "…" + strings.ToValidUTF8(msg[len(msg)-deviceInfoStderr:], "")
		}
		// What it printed goes with the error (a check's output is kept).
		if msg != "" {
			return out.b, fmt.Errorf("device-info: %s: %v: %s", d.args[0], waitErr, msg)
		}
		return out.b, fmt.Errorf("device-info: %s: %v", d.args[0], waitErr)
	}
	if out.err != nil {
		return nil, fmt.Errorf("device-info: reading output: %w", out.err)
	}
	return out.b, nil
}
