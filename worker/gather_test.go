package worker

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// A batch waits for a job whose executor has ended but whose completion
// is not handed over yet: it can still join. A batch that left then (as
// when it counted only running executors) split a keyed drain's rounds in
// two that never joined again.
func TestBatchWaitsForJobsStillHandingOver(t *testing.T) {
	t.Parallel()
	cp := newCompleter(nil, 10, slog.New(slog.NewTextHandler(io.Discard, nil)))
	cp.linger = time.Minute // only the late job's hand-over ends this batch
	done := func(id int64) completion {
		return completion{Completion: queue.Completion{Lease: queue.Lease{JobID: id}}, ctx: t.Context()}
	}
	// Three jobs: one received, one handed over, one whose executor has
	// ended (executing 0) and whose completion is still on its way.
	cp.joining.Store(2)
	cp.in <- done(2)
	got := make(chan []completion, 1)
	go func() { got <- cp.gather([]completion{done(1)}) }()
	select {
	case b := <-got:
		t.Fatalf("the batch left with %d completions while a job could still join it", len(b))
	case <-time.After(50 * time.Millisecond):
	}
	cp.in <- done(3)
	select {
	case b := <-got:
		if len(b) != 3 {
			t.Fatalf("the batch has %d completions, want all 3", len(b))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the batch did not leave once no job could join it")
	}
}
