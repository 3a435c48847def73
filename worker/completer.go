package worker

import (
	"context"
	"log/slog"

	"github.com/leasehold/leasehold/queue"
)

// maxCompletionBatch bounds one completion statement.
const maxCompletionBatch = 500

type completion struct {
	queue.Completion
	reply chan error
}

// completer writes successes in batches: whatever finished while the
// previous batch was being written goes out in the next one. An idle
// worker's single completion leaves at once, so batching adds no latency;
// a busy one commits once per batch instead of once per job.
type completer struct {
	client Backend
	in     chan completion
	log    *slog.Logger
}

func newCompleter(client Backend, capacity int, log *slog.Logger) *completer {
	return &completer{client: client, in: make(chan completion, capacity), log: log}
}

// complete hands c to the writer and waits for its outcome.
func (cp *completer) complete(ctx context.Context, c queue.Completion) error {
	reply := make(chan error, 1)
	select {
	case cp.in <- completion{Completion: c, reply: reply}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run writes batches until ctx ends.
func (cp *completer) run(ctx context.Context) {
	for {
		var batch []completion
		select {
		case <-ctx.Done():
			return
		case c := <-cp.in:
			batch = append(batch, c)
		}
	more:
		for len(batch) < maxCompletionBatch {
			select {
			case c := <-cp.in:
				batch = append(batch, c)
			default:
				break more
			}
		}
		cp.write(ctx, batch)
	}
}

func (cp *completer) write(ctx context.Context, batch []completion) {
	cs := make([]queue.Completion, len(batch))
	for i, c := range batch {
		cs[i] = c.Completion
	}
	errs, err := cp.client.CompleteMany(ctx, cs)
	if err != nil {
		// One bad row must not fail the others: write them one by one.
		cp.log.Warn("batch completion failed; completing one by one", "jobs", len(batch), "err", err)
		for _, c := range batch {
			_, err := cp.client.Complete(ctx, c.Lease, c.Result)
			c.reply <- err
		}
		return
	}
	for i, c := range batch {
		c.reply <- errs[i]
	}
}
