package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/shlex"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// Timings of the exec executor that are not worth a flag.
const (
	execDefaultGrace = 10 * time.Second
	// execGroupPoll is how often a stopping process group is checked for
	// having exited on its own before the grace period ends.
	execGroupPoll = 50 * time.Millisecond
	// execKillWait bounds the wait for a SIGKILLed leader to be reaped: only a
	// process stuck in the kernel (uninterruptible sleep) takes longer.
	execKillWait = 5 * time.Second
	// execDrainWait bounds reading the child's output after its group was
	// killed: a process that left the group may still hold the pipes.
	execDrainWait = 2 * time.Second
	// execFlushTimeout bounds the uploads at the end of an attempt that was
	// stopped, so that stopping stays prompt.
	execFlushTimeout = 5 * time.Second
	// execPermanentExit is the exit status that fails a job for good.
	execPermanentExit = 100
)

// Exec runs a command per job: the payload on stdin, progress and the
// result as JSON lines on stdout, screenshots through a directory, the
// side-effect ledger through a local HTTP endpoint (see execEffectsServer).
// Exit status 0 succeeds, 100 fails permanently, anything else retries.
//
// The command runs in a process group of its own, and the whole group is
// stopped when the attempt ends: SIGTERM, then SIGKILL after the grace
// period, so that no orphan keeps driving the phone after its lease is
// gone.
type Exec struct {
	args  []string
	grace time.Duration
	log   *slog.Logger
}

// NewExec returns an Exec running command, split like a shell would. grace
// is how long a stopped command may take to exit after SIGTERM (default
// 10s).
func NewExec(command string, grace time.Duration, logger *slog.Logger) (*Exec, error) {
	args, err := splitCommand("exec", command)
	if err != nil {
		return nil, err
	}
	if grace <= 0 {
		grace = execDefaultGrace
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &Exec{args: args, grace: grace, log: logger}, nil
}

// splitCommand splits a --exec or --device-info command like a shell
// would; what names it in errors.
func splitCommand(what, command string) ([]string, error) {
	args, err := shlex.Split(command)
	if err != nil {
		return nil, fmt.Errorf("splitting %s command: %w", what, err)
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("%s command is empty", what)
	}
	return args, nil
}

// Run implements worker.Executor: it runs the command once for job's
// current attempt and returns after the command and everything it started
// are gone.
func (e *Exec) Run(ctx context.Context, job queue.Job, r worker.Reporter) (json.RawMessage, error) {
	log := e.log.With("job_id", job.ID, "attempt", job.Attempt)
	up := &execUploader{r: r, log: log}

	// A private directory per attempt: 0700, so other local users can
	// neither read the screenshots nor plant files in it.
	dir, err := os.MkdirTemp("", fmt.Sprintf("leasehold-%d-%d-", job.ID, job.Attempt))
	if err != nil {
		return nil, fmt.Errorf("creating artifact dir: %w", err)
	}
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			log.Warn("removing artifact dir", "dir", dir, "err", err)
		}
	}()

	effects, err := startExecEffects(ctx, r, log)
	if err != nil {
		return nil, err
	}
	defer effects.Close()

	out := &execOutput{ctx: ctx, r: r, log: log}
	p, err := e.start(job, dir, effects.URL, out, log)
	if err != nil {
		return nil, err
	}

	shots := newExecArtifactDir(dir, up, log)
	stopPoll := make(chan struct{})
	var polling sync.WaitGroup
	polling.Go(func() { shots.poll(ctx, stopPoll) })

	started := time.Now()
	waitErr := p.wait(ctx, e.grace)
	log.Info("command exited", "status", execExitStatus(waitErr), "took", time.Since(started))
	close(stopPoll)
	polling.Wait()
	p.drain()

	// The attempt has not ended yet (the worker writes its outcome after
	// Run returns): what the command left is still this attempt's. When
	// ctx has ended the lease may still be held (cancel, shutdown), so the
	// uploads get a short life of their own; a lost lease refuses them.
	flushCtx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		flushCtx, cancel = context.WithTimeout(context.WithoutCancel(ctx), execFlushTimeout)
		defer cancel()
	}
	shots.scan(flushCtx, true)
	out.upload(flushCtx, up)

	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	return out.outcome(waitErr)
}

// execProcess is one running command and the pipes to it.
type execProcess struct {
	pid    int // also the process group id
	done   chan struct{}
	err    error // from Wait, once done is closed
	stdin  *os.File
	pipes  []*os.File // read ends of stdout and stderr
	reads  sync.WaitGroup
	log    *slog.Logger
	signal func(sig syscall.Signal)
}

// start starts the command in a process group of its own, with its output
// read by out.
func (e *Exec) start(job queue.Job, dir, effectsURL string, out *execOutput, log *slog.Logger) (*execProcess, error) {
	// os.Pipe rather than cmd.StdoutPipe and friends: Wait then returns as
	// soon as the command exits, instead of waiting for every grandchild
	// that inherited the pipes, and the read ends can be closed by us.
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating stdin pipe: %w", err)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		execCloseAll(stdinR, stdinW)
		return nil, fmt.Errorf("creating stdout pipe: %w", err)
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		execCloseAll(stdinR, stdinW, stdoutR, stdoutW)
		return nil, fmt.Errorf("creating stderr pipe: %w", err)
	}

	cmd := exec.Command(e.args[0], e.args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, stderrW
	cmd.Env = append(execChildEnv(os.Environ()),
		"LEASEHOLD_JOB_ID="+strconv.FormatInt(job.ID, 10),
		"LEASEHOLD_JOB_KIND="+job.Kind,
		"LEASEHOLD_ATTEMPT="+strconv.Itoa(int(job.Attempt)),
		"LEASEHOLD_LEASE_TOKEN="+strconv.FormatInt(job.LeaseToken, 10),
		"LEASEHOLD_ARTIFACT_DIR="+dir,
		"LEASEHOLD_EFFECTS_URL="+effectsURL,
	)
	if cp := execCheckpoint(job); cp != "" {
		cmd.Env = append(cmd.Env, execCheckpointEnv+"="+cp)
	}
	// A process group of its own, and on Linux death with the worker:
	// see execSysProcAttr in exec_linux.go, exec_unix.go, exec_windows.go.
	cmd.SysProcAttr = execSysProcAttr()

	p := &execProcess{done: make(chan struct{}), stdin: stdinW, pipes: []*os.File{stdoutR, stderrR}, log: log}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that forked the child exits, not
		// the process: keep this goroutine on its thread until the child is
		// reaped, so the runtime never retires that thread under it.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	err = <-started
	// The child holds its own copies now; ours would keep the pipes open.
	execCloseAll(stdinR, stdoutW, stderrW)
	if err != nil {
		execCloseAll(stdinW, stdoutR, stderrR)
		return nil, fmt.Errorf("starting %s: %w", e.args[0], err)
	}
	p.pid = cmd.Process.Pid
	p.signal = execGroupSignaller(cmd.Process, log)
	log.Info("command started", "pid", p.pid, "command", e.args[0])

	payload := job.Payload
	if len(payload) == 0 {
		payload = json.RawMessage(`{}`)
	}
	go func() {
		// A command that never reads stdin makes this fail with EPIPE when
		// it exits, or with ErrClosed when drain closes the pipe: both fine.
		_, _ = stdinW.Write(payload)
		_ = stdinW.Close()
	}()
	p.reads.Go(func() { execReadLines(stdoutR, out.stdout) })
	p.reads.Go(func() { execReadLines(stderrR, out.stderr) })
	return p, nil
}

// wait waits for the command to exit, or stops its group when ctx ends,
// and returns the command's exit error. Either way nothing of the group
// survives: what the command left running is SIGKILLed.
func (p *execProcess) wait(ctx context.Context, grace time.Duration) error {
	select {
	case <-p.done:
	case <-ctx.Done():
		p.log.Info("stopping command", "cause", context.Cause(ctx), "grace", grace)
		p.stop(grace)
	}
	p.signal(syscall.SIGKILL)
	if !p.exited() {
		return errors.New("command did not exit after SIGKILL")
	}
	return p.err
}

// stop sends SIGTERM to the group and SIGKILL after grace, or earlier once
// every process of the group has exited.
func (p *execProcess) stop(grace time.Duration) {
	p.signal(syscall.SIGTERM)
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(execGroupPoll)
	defer tick.Stop()
wait:
	for {
		select {
		case <-deadline.C:
			break wait
		case <-tick.C:
			if p.exited() && execGroupGone(p.pid) {
				return
			}
		}
	}
	p.log.Warn("process group still running after the grace period: killing it", "pgid", p.pid)
	p.signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(execKillWait):
		p.log.Error("command did not exit after SIGKILL", "pid", p.pid)
	}
}

func (p *execProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// drain waits for the output readers, closing the pipes after execDrainWait:
// a process that escaped the group (setsid) could otherwise hold them
// open forever.
func (p *execProcess) drain() {
	read := make(chan struct{})
	go func() {
		p.reads.Wait()
		close(read)
	}()
	select {
	case <-read:
	case <-time.After(execDrainWait):
		p.log.Warn("output still open after the command exited: closing it")
		execCloseAll(p.pipes...)
		<-read
	}
	execCloseAll(p.pipes...)
	_ = p.stdin.Close()
}

// execExitStatus describes how a command ended, for the log.
func execExitStatus(waitErr error) string {
	if waitErr == nil {
		return "exit status 0"
	}
	return waitErr.Error()
}

func execCloseAll(files ...*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// execSecrets are the worker's own credentials: the command is an agent's
// script and gets the ledger and the artifact folder, not the database or
// the server's tokens.
var execSecrets = []string{"DATABASE_URL", "LEASEHOLD_DATABASE_URL", "LEASEHOLD_TOKEN", "LEASEHOLD_API_TOKEN", "PGPASSWORD"}

// execChildEnv is the worker's environment without its secrets.
// execCheckpointEnv names the variable that gives the command of a
// resumed attempt the job's last checkpoint.
const execCheckpointEnv = "LEASEHOLD_CHECKPOINT"

// execCheckpoint is the value of LEASEHOLD_CHECKPOINT for job's attempt,
// {"step":n,"state":{...}}, or "" when the job has no checkpoint.
func execCheckpoint(job queue.Job) string {
	if job.Checkpoint == nil {
		return ""
	}
	b, err := json.Marshal(struct {
		Step  int32           `json:"step"`
		State json.RawMessage `json:"state"`
	}{job.Checkpoint.Step, job.Checkpoint.State})
	if err != nil {
		return "" // a state the queue stored is valid JSON
	}
	return string(b)
}

func execChildEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		// LEASEHOLD_CHECKPOINT is the attempt's own or none: never one the
		// worker itself was started with.
		if !slices.Contains(execSecrets, name) && name != execCheckpointEnv {
			out = append(out, kv)
		}
	}
	return out
}
