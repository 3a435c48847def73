package worker_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/leasehold/leasehold/executor"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// An idle direct worker with its standby reaper writes its presence once
// and is kept online by the active reaper, which sees its lock session
// (here its own reaper is the active one).
func TestIdleDirectWorkerWritesPresenceOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	backend := &countingBackend{Direct: worker.Direct{Client: f.client}}
	cfg := worker.Config{ID: "idle-direct", Pool: f.pool, Backend: backend, Reaper: true, Executor: executor.Sim{},
		Lease: time.Second, Poll: time.Hour}
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { _ = worker.New(cfg).Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	// Three presence intervals and a half: long enough for the first
	// write to age out of the online window.
	time.Sleep(35 * time.Second)
	if n := backend.seen.Load(); n != 1 {
		t.Fatalf("the idle direct worker wrote its presence %d times in 35 s, want once", n)
	}
	var online bool
	if err := f.pool.QueryRow(f.ctx, "SELECT last_seen > now() - $1::bigint * interval '1 millisecond' FROM workers WHERE id = 'idle-direct'",
		queue.OnlineWindow.Milliseconds()).Scan(&online); err != nil {
		t.Fatal(err)
	}
	if !online {
		t.Fatal("the idle direct worker fell out of the online window")
	}
	// A job run is no change of presence; but the worker is still there
	// to run it.
	job, _, err := f.client.Insert(f.ctx, queue.NewJob{Kind: "app_investigation",
		Payload: json.RawMessage(`{"app":"com.example.notes","sim":{"steps":1,"step_ms":10}}`)})
	if err != nil {
		t.Fatal(err)
	}
	f.waitState(t, job.ID, queue.StateSucceeded)
}
