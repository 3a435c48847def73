package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/queue"
)

func (e *env) submit(payload map[string]any) int64 {
	e.t.Helper()
	raw, err := json.Marshal(payload)
	if err != nil {
		e.t.Fatal(err)
	}
	noBackoff := int32(0)
	job, err := e.client().Submit(e.ctx, client.NewJob{Kind: "app_investigation", BackoffBaseMs: &noBackoff, Payload: raw})
	if err != nil {
		e.t.Fatalf("submit: %v", err)
	}
	return job.ID
}

// A worker frozen past its lease loses the job to another worker; woken,
// it writes nothing for the lost attempt and goes on working.
func TestFrozenWorkerIsFencedAndCarriesOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startServer()
	args := []string{"--lease", "2s", "--heartbeat", "400ms"}
	a := e.startWorker("worker-a", args...)
	id := e.submit(map[string]any{"app": "com.example.notes", "sim": map[string]any{"steps": 3, "step_ms": 700}})
	e.eventually("worker A runs the job", 20*time.Second, func() bool {
		return e.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'running' AND lease_owner = 'worker-a'", id) == 1
	})
	a.signal(t, syscall.SIGSTOP)
	b := e.startWorker("worker-b", args...)
	e.waitFor(id, 30*time.Second, client.StateSucceeded) // worker B finishes the job
	a.signal(t, syscall.SIGCONT)
	time.Sleep(2 * time.Second) // A's timers all fire now

	if n := e.count("SELECT count(*) FROM job_attempts WHERE job_id = $1 AND outcome = 'succeeded'", id); n != 1 {
		t.Fatalf("%d successful attempts, want exactly 1", n)
	}
	if n := e.count(`SELECT count(*) FROM job_attempts WHERE job_id = $1 AND outcome = 'succeeded' AND worker_id = 'worker-b'
		AND lease_token = (SELECT lease_token FROM jobs WHERE id = $1)`, id); n != 1 {
		t.Fatal("the successful attempt is not the new holder's")
	}
	if n := e.count("SELECT count(*) FROM job_attempts WHERE job_id = $1 AND number = 1 AND outcome = 'lease_expired'", id); n != 1 {
		t.Fatal("worker A's attempt did not end lease_expired")
	}
	if !a.alive() {
		t.Fatal("worker A exited after being woken")
	}
	// B leaves; A takes the next job.
	b.signal(t, syscall.SIGTERM)
	if err := b.wait(t, 15*time.Second); err != nil {
		t.Fatalf("worker B exit: %v", err)
	}
	next := e.submit(map[string]any{"app": "com.example.next", "sim": map[string]any{"steps": 1, "step_ms": 10}})
	e.eventually("worker A runs the next job", 20*time.Second, func() bool {
		return e.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'succeeded' AND lease_owner = 'worker-a'", next) == 1
	})
}

func TestSigtermReleasesLeases(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.spawn("worker w", []string{"--id", "w", "--lease", "5s", "--grace", "300ms", "--concurrency", "2"})
	// No server: jobs are submitted straight into the database.
	var ids [2]int64
	for i := range ids {
		if err := e.pool.QueryRow(e.ctx, `INSERT INTO jobs (kind, payload) VALUES ('app_investigation',
			'{"app":"com.example.notes","sim":{"hang":true,"step_ms":50}}') RETURNING id`).Scan(&ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	announce(t, e)
	e.eventually("both jobs running", 20*time.Second, func() bool {
		return e.count("SELECT count(*) FROM jobs WHERE state = 'running'") == 2
	})
	w.signal(t, syscall.SIGTERM)
	if err := w.wait(t, 15*time.Second); err != nil {
		t.Fatalf("worker exit after SIGTERM: %v, want status 0", err)
	}
	if n := e.count(`SELECT count(*) FROM jobs j JOIN job_attempts a ON a.job_id = j.id
		WHERE j.state = 'pending' AND j.counted_attempts = 0 AND a.outcome = 'released'`); n != 2 {
		t.Fatalf("%d jobs released, want 2", n)
	}
}

func TestSecondSignalExitsAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.spawn("worker w", []string{"--id", "w", "--lease", "5s", "--grace", "1m"})
	if _, err := e.pool.Exec(e.ctx, `INSERT INTO jobs (kind, payload) VALUES ('app_investigation',
		'{"app":"com.example.notes","sim":{"hang":true,"step_ms":50}}')`); err != nil {
		t.Fatal(err)
	}
	announce(t, e)
	e.eventually("job running", 20*time.Second, func() bool {
		return e.count("SELECT count(*) FROM jobs WHERE state = 'running'") == 1
	})
	w.signal(t, syscall.SIGTERM)
	time.Sleep(200 * time.Millisecond)
	w.signal(t, syscall.SIGTERM)
	err := w.wait(t, 3*time.Second)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit after a second signal: %v, want status 1", err)
	}
}

// With no server, the workers' own reapers recover expired leases; a
// reaper frozen while holding the lock loses it (idle_session_timeout), so
// a frozen worker cannot block recovery either.
func TestFrozenReaperHandsOverWithoutServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	args := []string{"--lease", "1s", "--heartbeat", "300ms"}
	a := e.startWorker("worker-a", args...)
	// The lock session of a direct worker's reaper is named after the
	// worker; pg_locks shows every database's, so this one's are counted.
	e.eventually("worker A's reaper holds the lock", 20*time.Second, func() bool {
		return e.count(`SELECT count(*) FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid
			WHERE l.locktype = 'advisory' AND l.granted AND s.datname = current_database()
			AND s.application_name = $1`, queue.PresenceSessionName("worker-a")) == 1
	})
	// No server runs: the job goes in through package queue, which
	// announces it as the server would.
	job, _, err := queue.NewClient(e.pool, nil).Insert(e.ctx, queue.NewJob{Kind: "app_investigation",
		Payload: json.RawMessage(`{"app":"com.example.notes","sim":{"steps":2,"step_ms":500}}`)})
	if err != nil {
		t.Fatal(err)
	}
	id := job.ID
	e.eventually("worker A runs the job", 20*time.Second, func() bool {
		return e.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'running' AND lease_owner = 'worker-a'", id) == 1
	})
	a.signal(t, syscall.SIGSTOP)
	e.startWorker("worker-b", args...)
	e.eventually("worker B finishes the job after A's reaper lost the lock", 30*time.Second, func() bool {
		return e.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'succeeded' AND lease_owner = 'worker-b'", id) == 1
	})
	if n := e.count("SELECT count(*) FROM job_attempts WHERE job_id = $1 AND number = 1 AND outcome = 'lease_expired'", id); n != 1 {
		t.Fatal("worker A's attempt did not end lease_expired")
	}
	a.signal(t, syscall.SIGCONT)
}

// Exactly once across processes: four worker processes with four slots
// each drain 2,000 jobs; every job runs one attempt and succeeds once.
func TestManyWorkerProcessesRunEachJobOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.pool.Exec(e.ctx, `INSERT INTO jobs (kind) SELECT 'noop' FROM generate_series(1, 2000)`); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		e.startWorker(fmt.Sprintf("w%d", i), "--executor", "noop", "--concurrency", "4", "--lease", "30s")
	}
	e.eventually("all jobs succeeded", 60*time.Second, func() bool {
		return e.count("SELECT count(*) FROM jobs WHERE state = 'succeeded'") == 2000
	})
	if n := e.count("SELECT count(*) FROM job_attempts"); n != 2000 {
		t.Fatalf("%d attempts for 2000 jobs, want one each", n)
	}
	if n := e.count("SELECT count(DISTINCT worker_id) FROM job_attempts"); n < 2 {
		t.Fatalf("only %d worker process took jobs", n)
	}
}

// announce wakes idle workers of the default queue as a submit does
// (queue.Client.Insert notifies; a job inserted straight into the table
// does not). Without it, a worker whose first claim ran before the insert
// finds the job only at a poll it does not skip: up to 5 minutes later
// (.ci/run failed that way once, TestSecondSignalExitsAtOnce).
func announce(t *testing.T, e *env) {
	t.Helper()
	if _, err := e.pool.Exec(e.ctx, "SELECT pg_notify('leasehold_jobs', 'default')"); err != nil {
		t.Fatal(err)
	}
}
