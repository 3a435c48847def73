package executor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os/exec"
	"strings"
	"sync"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

const (
	// execMaxLine is the longest stdout or stderr line kept whole: a result
	// can be big, but one line must not hold the worker's memory hostage.
	execMaxLine = 1 << 20
	// execMaxTail is how much of the command's output output.log keeps.
	execMaxTail = 256 << 10
	// execMaxLogged bounds a line copied into the worker's own log; output.log
	// has it whole.
	execMaxLogged = 8 << 10
	// execMaxReason bounds the stderr line quoted in a failure.
	execMaxReason = 1 << 10
)

// execOutput turns the command's stdout and stderr into progress events, the
// result, log lines and output.log. stdout and stderr are read by two
// goroutines at once.
type execOutput struct {
	ctx context.Context
	r   worker.Reporter
	log *slog.Logger

	mu         sync.Mutex
	tail       []byte // the end of the output, at most 2·execMaxTail
	dropped    bool   // whether tail lost its beginning
	lastStderr string
	result     json.RawMessage
	fraction   float64 // the last progress, for events that carry only a message
}

// execEvent is a stdout line that is a JSON object with at least one of these.
type execEvent struct {
	Progress *float64        `json:"progress"`
	Message  *string         `json:"message"`
	Result   json.RawMessage `json:"result"`
	// Step names the step of the attempt a progress line reports (an
	// integer from 1 to queue.MaxStep; anything else names none).
	Step *float64 `json:"step"`
	// Checkpoint saves the attempt's checkpoint:
	// {"checkpoint":{"step":7,"state":{...}}}.
	Checkpoint *execCheckpointLine `json:"checkpoint"`
	// Usage is a usage report (api.Usage: model, input_tokens,
	// output_tokens, cost_micros, currency, counters).
	Usage json.RawMessage `json:"usage"`
}

// execCheckpointLine is the checkpoint of a stdout line. Step is a
// float so that a line like {"step":7.5} is refused, not cut to 7.
type execCheckpointLine struct {
	Step  *float64        `json:"step"`
	State json.RawMessage `json:"state"`
}

func (o *execOutput) stdout(line []byte, truncated bool) {
	if trimmed := bytes.TrimSpace(line); !truncated && len(trimmed) > 0 && trimmed[0] == '{' {
		var ev execEvent
		if json.Unmarshal(trimmed, &ev) == nil && (ev.Progress != nil || ev.Message != nil || ev.Result != nil || ev.Checkpoint != nil || ev.Usage != nil) {
			o.event(line, ev)
			return
		}
	}
	// Anything else, an object without those fields included (a script's
	// own structured log), is log.
	o.logLine("stdout", line, truncated)
}

func (o *execOutput) event(line []byte, ev execEvent) {
	o.mu.Lock()
	if len(ev.Result) > 0 && string(ev.Result) != "null" {
		o.result = ev.Result // the last one wins
	}
	if ev.Progress != nil {
		o.fraction = min(max(*ev.Progress, 0), 1)
	}
	fraction := o.fraction
	if ev.Progress != nil || ev.Message != nil || ev.Usage != nil {
		// The result is the job's result, not log: keeping it out lets
		// output.log keep more of what explains a failure.
		o.keep(line)
	}
	o.mu.Unlock()

	if ev.Checkpoint != nil {
		o.checkpoint(*ev.Checkpoint)
	}
	if ev.Usage != nil && o.ctx.Err() == nil {
		o.usage(ev.Usage)
	}
	if ev.Progress == nil && ev.Message == nil {
		return
	}
	var message string
	if ev.Message != nil {
		message = *ev.Message
	}
	// Once the attempt is stopping a write would only be refused; and a
	// refused one (lease lost) is not this reader's to act on: the
	// heartbeat stops the job.
	if o.ctx.Err() != nil {
		return
	}
	step := 0
	if s := ev.Step; s != nil && *s >= 1 && *s <= queue.MaxStep && *s == math.Trunc(*s) {
		step = int(*s)
	}
	if err := worker.ProgressStep(o.ctx, o.r, step, fraction, message); err != nil {
		o.log.Warn("recording progress", "err", err)
	}
}

// checkpoint saves the checkpoint of a stdout line. One the queue would
// refuse (no step, a step that is not a whole number from 0, a state
// that is not a JSON object or is over 64 KiB) is logged and dropped: the
// attempt goes on, as for a malformed progress line.
func (o *execOutput) checkpoint(cp execCheckpointLine) {
	if o.ctx.Err() != nil {
		return
	}
	if cp.Step == nil || *cp.Step != math.Trunc(*cp.Step) || *cp.Step < 0 || *cp.Step > queue.MaxStep {
		o.log.Warn("ignoring a checkpoint line: step must be a whole number from 0 to " + fmt.Sprint(queue.MaxStep))
		return
	}
	if err := o.r.Checkpoint(o.ctx, int(*cp.Step), cp.State); err != nil {
		o.log.Warn("saving the checkpoint", "step", int(*cp.Step), "err", err)
	}
}

// usage reports a usage line's report. One the queue refuses (a
// negative count, a model name it does not take) is logged and dropped:
// the command's other lines still count. One that spends the job's
// budget stops the attempt (the worker's reporter does).
func (o *execOutput) usage(raw json.RawMessage) {
	var u api.Usage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&u); err != nil {
		o.log.Warn("usage line refused", "err", err)
		return
	}
	if err := worker.ReportUsage(o.ctx, o.r, queue.UsageFromAPI(u)); err != nil && !errors.Is(err, queue.ErrBudgetSpent) {
		o.log.Warn("recording usage", "err", err)
	}
}

func (o *execOutput) stderr(line []byte, truncated bool) {
	if s := strings.TrimSpace(string(line)); s != "" {
		if len(s) > execMaxReason {
			s = strings.ToValidUTF8(s[:execMaxReason], "") + "…"
		}
		o.mu.Lock()
		o.lastStderr = s
		o.mu.Unlock()
	}
	o.logLine("stderr", line, truncated)
}

func (o *execOutput) logLine(stream string, line []byte, truncated bool) {
	o.mu.Lock()
	o.keep(line)
	o.mu.Unlock()
	logged := line
	if len(logged) > execMaxLogged {
		logged, truncated = logged[:execMaxLogged], true
	}
	attrs := []any{"stream", stream, "line", string(logged)}
	if truncated {
		attrs = append(attrs, "truncated", true)
	}
	o.log.Info("command output", attrs...)
}

// keep appends line to the tail; o.mu must be held.
func (o *execOutput) keep(line []byte) {
	o.tail = append(o.tail, line...)
	o.tail = append(o.tail, '\n')
	if len(o.tail) > 2*execMaxTail {
		o.tail = append(o.tail[:0], o.tail[len(o.tail)-execMaxTail:]...)
		o.dropped = true
	}
}

// upload stores the tail of the output as output.log.
func (o *execOutput) upload(ctx context.Context, up *execUploader) {
	o.mu.Lock()
	tail := o.tail
	dropped := o.dropped || len(tail) > execMaxTail
	if len(tail) > execMaxTail {
		tail = tail[len(tail)-execMaxTail:]
	}
	if dropped {
		// Start at a line, and say that something came before.
		if i := bytes.IndexByte(tail, '\n'); i >= 0 {
			tail = tail[i+1:]
		}
		tail = append([]byte("[earlier output dropped]\n"), tail...)
	}
	o.mu.Unlock()
	if len(tail) == 0 {
		return
	}
	// Text artifacts must be UTF-8; a command may print anything.
	text := strings.ToValidUTF8(string(tail), "\uFFFD")
	up.upload(ctx, "output.log", strings.NewReader(text))
}

// outcome is what Run returns for a command that exited with waitErr.
func (o *execOutput) outcome(waitErr error) (json.RawMessage, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if waitErr == nil {
		if len(o.result) == 0 {
			return json.RawMessage(`{}`), nil
		}
		return o.result, nil
	}
	var exitErr *exec.ExitError
	if !errors.As(waitErr, &exitErr) {
		return nil, fmt.Errorf("waiting for command: %w", waitErr)
	}
	err := error(exitErr) // "exit status 3" or "signal: killed"
	if o.lastStderr != "" {
		err = fmt.Errorf("%w: %s", exitErr, o.lastStderr)
	}
	if exitErr.ExitCode() == execPermanentExit {
		return nil, worker.Permanent(err)
	}
	return nil, err
}

// execReadLines calls fn with every line of r, without its line ending. A
// line longer than execMaxLine is cut there (truncated) and the rest of it
// skipped.
func execReadLines(r io.Reader, fn func(line []byte, truncated bool)) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	truncated := false
	for {
		chunk, err := br.ReadSlice('\n')
		complete := err == nil
		chunk = bytes.TrimSuffix(chunk, []byte("\n"))
		if room := execMaxLine - len(line); len(chunk) > room {
			chunk, truncated = chunk[:room], true
		}
		line = append(line, chunk...)
		ended := err != nil && !errors.Is(err, bufio.ErrBufferFull)
		if complete || (ended && (len(line) > 0 || truncated)) {
			fn(bytes.TrimSuffix(line, []byte("\r")), truncated)
			line, truncated = line[:0], false
		}
		if ended {
			// io.EOF, or os.ErrClosed when drain gave up waiting.
			return
		}
	}
}

// execUploader uploads the attempt's artifacts; after a refusal for a lost
// lease it stops trying, since every later upload would be refused too.
type execUploader struct {
	r    worker.Reporter
	log  *slog.Logger
	mu   sync.Mutex
	lost bool
}

func (u *execUploader) upload(ctx context.Context, name string, body io.Reader) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.lost {
		return
	}
	a, err := u.r.Artifact(ctx, name, body)
	if err != nil {
		u.lost = errors.Is(err, queue.ErrLeaseLost)
		// A refused file (a .png that is no image, too big) is the
		// script's problem, never the job's failure.
		u.log.Warn("uploading artifact", "name", name, "err", err)
		return
	}
	u.log.Info("artifact uploaded", "name", name, "kind", a.Kind, "size", a.Size)
}
