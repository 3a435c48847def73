// Package testutil holds what tests of several packages share: a poll with
// a deadline, a log buffer safe to write from many goroutines, and a job
// factory. Tests import it; nothing else may.
package testutil

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// Eventually calls cond every few milliseconds until it returns true, and
// fails the test naming what it waited for if within passes first. Under
// testing/synctest the wait is on the bubble's clock.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Await calls probe every few milliseconds until it reports done, and
// returns the value it last gave. If within passes first, it fails the
// test with describe of that value, which says where things stood.
func Await[T any](t testing.TB, within time.Duration, probe func() (T, bool), describe func(last T) string) T {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		v, done := probe()
		if done {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v: %s", within, describe(v))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// LockedBuffer is an io.Writer that many goroutines may write at once (a
// logger's handler, a child process's output) while a test reads it.
type LockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Job says what a test's job looks like; zero fields take the queue's
// defaults, except Kind ("test") and Payload ({}).
type Job struct {
	Kind, Queue    string
	Payload        string
	MaxAttempts    int32
	BackoffBaseMs  *int32
	BackoffMaxMs   int32
	IdempotencyKey string
	TimeoutMs      int32
}

// InsertJob inserts the job o describes and fails the test if it cannot.
func InsertJob(t testing.TB, ctx context.Context, c *queue.Client, o Job) queue.Job {
	t.Helper()
	nj := queue.NewJob{Kind: o.Kind, Queue: o.Queue, Payload: json.RawMessage(o.Payload), BackoffBaseMs: o.BackoffBaseMs}
	if nj.Kind == "" {
		nj.Kind = "test"
	}
	if len(nj.Payload) == 0 {
		nj.Payload = json.RawMessage(`{}`)
	}
	if o.MaxAttempts > 0 {
		nj.MaxAttempts = &o.MaxAttempts
	}
	if o.BackoffMaxMs > 0 {
		nj.BackoffMaxMs = &o.BackoffMaxMs
	}
	if o.IdempotencyKey != "" {
		nj.IdempotencyKey = &o.IdempotencyKey
	}
	if o.TimeoutMs > 0 {
		nj.TimeoutMs = &o.TimeoutMs
	}
	job, _, err := c.Insert(ctx, nj)
	if err != nil {
		t.Fatalf("inserting job: %v", err)
	}
	return job
}

// ClaimJob claims one job of queue for worker with lease, and fails the
// test unless exactly one comes.
func ClaimJob(t testing.TB, ctx context.Context, c *queue.Client, worker, queueName string, lease time.Duration) queue.Job {
	t.Helper()
	jobs, err := c.Claim(ctx, queue.ClaimParams{WorkerID: worker, Queues: []string{queueName}, Limit: 1, Lease: lease})
	if err != nil {
		t.Fatalf("claiming: %v", err)
	}
	if len(jobs) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(jobs))
	}
	return jobs[0]
}
