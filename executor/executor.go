// Package executor holds the built-in executors a worker can run: noop
// for benchmarks and sim, a deterministic simulated investigation.
package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// Options configure the executor New makes.
type Options struct {
	// Exec is the command of the exec executor, split like a shell would.
	Exec string
	// KillGrace is how long an exec command has between SIGTERM and
	// SIGKILL when its attempt must stop.
	KillGrace time.Duration
	Logger    *slog.Logger
}

// New returns the executor called name.
func New(name string, opts Options) (worker.Executor, error) {
	switch name {
	case "noop":
		return Noop{}, nil
	case "sim":
		return Sim{}, nil
	case "exec":
		return NewExec(opts.Exec, opts.KillGrace, opts.Logger)
	default:
		return nil, fmt.Errorf("unknown executor %q (want sim, exec or noop)", name)
	}
}

// Noop succeeds at once.
type Noop struct{}

// Run implements worker.Executor.
func (Noop) Run(context.Context, queue.Job, worker.Reporter) (json.RawMessage, error) {
	return json.RawMessage(`{}`), nil
}
