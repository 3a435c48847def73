package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/leasehold/leasehold/db/dbtest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
)

type runFunc func(ctx context.Context, job queue.Job, r Reporter) (json.RawMessage, error)

func (f runFunc) Run(ctx context.Context, job queue.Job, r Reporter) (json.RawMessage, error) {
	return f(ctx, job, r)
}

// Every job leaves completer.joining, whatever its end: succeeded (its
// completion received by the writer), failed, or with a result the queue
// refuses (no completion sent). A job left counted would make every later
// batch linger for company that never comes.
func TestEveryJobLeavesJoining(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := queue.NewClient(pool, nil)
	var batch []queue.NewJob
	for i := range 60 {
		batch = append(batch, queue.NewJob{Kind: "noop", MaxAttempts: new(int32(1)), Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
	}
	if _, err := client.InsertMany(ctx, batch); err != nil {
		t.Fatal(err)
	}
	exec := runFunc(func(ctx context.Context, job queue.Job, r Reporter) (json.RawMessage, error) {
		var p struct{ I int }
		if err := json.Unmarshal(job.Payload, &p); err != nil {
			return nil, err
		}
		switch p.I % 3 {
		case 1:
			return nil, errors.New("the app crashed")
		case 2:
			return json.RawMessage(`42`), nil // not an object: refused, the attempt failed
		}
		return json.RawMessage(`{}`), nil
	})
	w := NewDirect(pool, nil, Config{ID: "joining", Concurrency: 8, Lease: 30 * time.Second, Executor: exec,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = w.Run(runCtx); close(done) }()
	testutil.Await(t, 30*time.Second, func() (queue.QueueInfo, bool) {
		q, err := client.Queue(ctx, "default")
		return q, err == nil && q.Pending == 0 && q.Running == 0
	}, func(q queue.QueueInfo) string {
		return fmt.Sprintf("the queue still has %d pending, %d running", q.Pending, q.Running)
	})
	stop()
	<-done
	if n, e := w.completer.joining.Load(), w.completer.executing.Load(); n != 0 || e != 0 {
		t.Fatalf("after every job ended: %d jobs still joining, %d executing; want 0 and 0", n, e)
	}
}
