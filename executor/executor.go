// Package executor holds the built-in executors a worker can run: noop
// for benchmarks and sim, a deterministic simulated investigation.
package executor

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// New returns the executor called name.
func New(name string) (worker.Executor, error) {
	switch name {
	case "noop":
		return Noop{}, nil
	case "sim":
		return Sim{}, nil
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
