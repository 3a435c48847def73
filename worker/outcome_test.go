package worker_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/artifact"
	"github.com/leasehold/leasehold/executor"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web"
	"github.com/leasehold/leasehold/worker"
)

// remote serves the worker API from f's database and returns a Remote
// with a worker token named "remote-worker".
func (f *fixture) remote(t *testing.T) *worker.Remote {
	t.Helper()
	return f.remoteHandover(t, 0)
}

// remoteHandover is remote with the server's hand-over deadline
// (zero: the default).
func (f *fixture) remoteHandover(t *testing.T, handover time.Duration) *worker.Remote {
	t.Helper()
	jobs := queue.NewJobNotifier(f.pool, quiet)
	go jobs.Run(f.ctx)
	tokens := apitoken.NewStore(f.pool)
	// With artifact storage: without it the server answers an upload 503,
	// which the worker retries until the lease ends.
	store, err := artifact.New(t.TempDir(), f.client, artifact.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(web.New(web.Config{Pool: f.pool, Queue: f.client, Tokens: tokens, Jobs: jobs, Artifacts: store, Logger: quiet, Handover: handover}))
	t.Cleanup(srv.Close)
	secret, _, err := tokens.Create(f.ctx, "remote-worker", apitoken.RoleWorker)
	if err != nil {
		t.Fatal(err)
	}
	r, err := worker.NewRemote(srv.URL, secret, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// quiet keeps the logs of in-process servers and workers out of test output.
var quiet = slog.New(slog.DiscardHandler)

// run runs a worker on cfg.Backend until the test ends.
func (f *fixture) run(t *testing.T, cfg worker.Config) {
	t.Helper()
	cfg.Logger = cmp.Or(cfg.Logger, quiet)
	if cfg.Executor == nil {
		cfg.Executor = executor.Sim{}
	}
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { _ = worker.New(cfg).Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// A result the queue refuses, whichever way it travels (not a JSON
// object; a number beyond float64, which the database would store as
// 1,000 digits): both kinds of worker check it with the queue's one rule
// before sending and end the attempt failed with the reason; neither lets
// the lease silently run out.
func TestRefusedResultFailsTheAttempt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, result, reason string
		prefix               bool // reason is how the error begins
	}{
		{"NotAnObject", `42`, "result refused: result: must be a JSON object", false},
		{"BeyondFloat64", `{"score":1e999}`, "result refused: result: holds the number 1e999", true},
	} {
		exec := executorFunc(func(ctx context.Context, job queue.Job, r worker.Reporter) (json.RawMessage, error) {
			return json.RawMessage(tc.result), nil
		})
		for _, kind := range []string{"Direct", "Remote"} {
			t.Run(tc.name+"/"+kind, func(t *testing.T) {
				t.Parallel()
				f := setup(t)
				cfg := worker.Config{ID: "remote-worker", Lease: 2 * time.Second, Executor: exec, Pool: f.pool, Reaper: true,
					Backend: worker.Direct{Client: f.client}}
				if kind == "Remote" {
					cfg.Backend = f.remote(t)
				}
				f.run(t, cfg)
				job := f.submit(t, `{}`, 1)
				d := f.waitState(t, job.ID, queue.StateDead)
				a := d.Attempts[0]
				outcome, reason := deref(a.Outcome), deref(a.Error)
				if len(d.Attempts) != 1 || outcome != "failed" || (reason != tc.reason && !(tc.prefix && strings.HasPrefix(reason, tc.reason))) {
					t.Fatalf("%d attempts, the first %s with %q; want one failed with %q", len(d.Attempts), outcome, reason, tc.reason)
				}
			})
		}
	}
}

// flaky fails its first completion writes as a restarting database does.
type flaky struct {
	worker.Direct
	failures atomic.Int32
}

var errRestarting = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")

func (b *flaky) CompleteMany(ctx context.Context, cs []queue.Completion) ([]error, error) {
	if b.failures.Add(-1) >= 0 {
		return nil, errRestarting
	}
	return b.Direct.CompleteMany(ctx, cs)
}

// CompleteManyThenClaim fails as CompleteMany does: the completions a
// worker writes while its limits are full claim with them.
func (b *flaky) CompleteManyThenClaim(ctx context.Context, cs []queue.Completion, p queue.ClaimParams) ([]error, worker.Claim, error) {
	if b.failures.Add(-1) >= 0 {
		return nil, worker.Claim{}, errRestarting
	}
	return b.Direct.CompleteManyThenClaim(ctx, cs, p)
}

func (b *flaky) Complete(ctx context.Context, l queue.Lease, result json.RawMessage) (queue.Job, error) {
	if b.failures.Add(-1) >= 0 {
		return queue.Job{}, errRestarting
	}
	return b.Direct.Complete(ctx, l, result)
}

// A finished job whose completion meets an outage of a second or two is
// written once the database is back, within its lease: one attempt,
// succeeded, never a lease_expired attempt that runs the work again.
func TestCompletionRidesOutAnOutage(t *testing.T) {
	t.Parallel()
	f := setup(t)
	backend := &flaky{Direct: worker.Direct{Client: f.client}}
	backend.failures.Store(6) // 50+100+200+400+800+1600ms of backoff: about 3s
	f.run(t, worker.Config{ID: "w", Lease: 5 * time.Second, Backend: backend, Pool: f.pool, Reaper: true})
	job := f.submit(t, `{"steps":1,"step_ms":10}`, 3)
	d := f.waitState(t, job.ID, queue.StateSucceeded)
	if len(d.Attempts) != 1 || *d.Attempts[0].Outcome != "succeeded" {
		t.Fatalf("attempts %+v, want the one that finished", d.Attempts)
	}
	if n := backend.failures.Load(); n >= 0 {
		t.Fatalf("the outage was not met (%d failures left)", n)
	}
}

// A remote worker idle on the long poll for longer than its lease gets a
// job late in the poll: it counts the lease from the claim, not from when
// it began to wait, and runs the job in one attempt.
func TestRemoteLeaseCountsFromTheClaimNotTheWait(t *testing.T) {
	t.Parallel()
	f := setup(t)
	remote := f.remote(t)
	remote.ClaimWait = 10 * time.Second
	f.run(t, worker.Config{ID: "remote-worker", Lease: time.Second, Heartbeat: 300 * time.Millisecond, Backend: remote, Poll: time.Hour})
	time.Sleep(2500 * time.Millisecond) // idle on the poll, past a whole lease
	job := f.submit(t, `{"steps":3,"step_ms":300}`, 1)
	d := f.waitState(t, job.ID, queue.StateSucceeded)
	if len(d.Attempts) != 1 {
		t.Fatalf("%d attempts, want 1", len(d.Attempts))
	}
	for _, e := range d.Events {
		if e.Type == "stale_write_refused" {
			t.Fatalf("a write was refused: %s", e.Detail)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// slowNetwork holds each claim on its way to the database, as a network
// can: the worker cannot tell that from a claim that waited nowhere.
type slowNetwork struct {
	worker.Direct
	delay time.Duration
}

func (b slowNetwork) Claim(ctx context.Context, p queue.ClaimParams) (worker.Claim, error) {
	time.Sleep(b.delay)
	return b.Direct.Claim(ctx, p)
}

// A claim whose answer arrives after the worker can no longer count on its
// lease is confirmed by a renewal before the job starts, and runs in that
// attempt: the database, not the worker's guess, says the lease is alive.
func TestLateClaimIsConfirmedBeforeItRuns(t *testing.T) {
	t.Parallel()
	f := setup(t)
	// Held for longer than the lease less the worker's margin (150ms).
	backend := slowNetwork{Direct: worker.Direct{Client: f.client}, delay: 1900 * time.Millisecond}
	f.run(t, worker.Config{ID: "w", Lease: 2 * time.Second, Heartbeat: 300 * time.Millisecond, Backend: backend, Pool: f.pool, Reaper: true})
	job := f.submit(t, `{"steps":2,"step_ms":100}`, 3)
	d := f.waitState(t, job.ID, queue.StateSucceeded)
	if len(d.Attempts) != 1 {
		t.Fatalf("%d attempts (%v), want the one claimed late", len(d.Attempts), eventTypes(d))
	}
}

// A failure whose message is longer than the server takes is still
// recorded as a failure (cut, as the queue cuts it for a direct worker),
// not refused and left to expire.
func TestRemoteLongFailureMessageIsRecorded(t *testing.T) {
	t.Parallel()
	f := setup(t)
	long := strings.Repeat("é", 40<<10) // 80 KiB
	exec := executorFunc(func(ctx context.Context, job queue.Job, r worker.Reporter) (json.RawMessage, error) {
		return nil, errors.New(long)
	})
	f.run(t, worker.Config{ID: "remote-worker", Lease: 2 * time.Second, Executor: exec, Backend: f.remote(t), Pool: f.pool, Reaper: true})
	job := f.submit(t, `{}`, 1)
	d := f.waitState(t, job.ID, queue.StateDead)
	a := d.Attempts[0]
	// Cut with queue.CleanText, which says so with a trailing "…".
	if outcome, msg := deref(a.Outcome), deref(a.Error); outcome != "failed" || !strings.HasSuffix(msg, "…") ||
		!strings.HasPrefix(long, strings.TrimSuffix(msg, "…")) || len(msg) < 60<<10 || len(msg) > 64<<10 {
		t.Fatalf("attempt %s with %d bytes of error, want failed with the message cut to 64 KiB", outcome, len(msg))
	}
}

// cutAnswers commits each claim and then loses its answer if the worker's
// context ends within a moment: the shutdown signal arriving mid-claim.
type cutAnswers struct {
	worker.Direct
	claimed chan struct{}
}

func (b cutAnswers) Claim(ctx context.Context, p queue.ClaimParams) (worker.Claim, error) {
	c, err := b.Direct.Claim(ctx, p)
	if err != nil || len(c.Jobs) == 0 {
		return c, err
	}
	close(b.claimed)
	select {
	case <-ctx.Done():
		return worker.Claim{}, ctx.Err()
	case <-time.After(300 * time.Millisecond):
		return c, nil
	}
}

// A shutdown that comes while a direct claim is in flight does not lose
// the jobs it leased: they are run within the grace period and released,
// not left running for nobody until their leases expire.
func TestShutdownDuringClaimLosesNoJob(t *testing.T) {
	t.Parallel()
	f := setup(t)
	backend := cutAnswers{Direct: worker.Direct{Client: f.client}, claimed: make(chan struct{})}
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() {
		_ = worker.New(worker.Config{ID: "w", Lease: 10 * time.Second, Grace: 100 * time.Millisecond, Backend: backend,
			Executor: executor.Sim{}, Logger: quiet}).Run(ctx)
		close(done)
	}()
	job := f.submit(t, `{"hang":true,"step_ms":20}`, 3)
	<-backend.claimed
	cancel()
	<-done
	d, err := f.client.Detail(f.ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.State != queue.StatePending || len(d.Attempts) != 1 || deref(d.Attempts[0].Outcome) != "released" {
		t.Fatalf("after shutdown the job is %s, attempt %s; want pending, released", d.State, deref(d.Attempts[0].Outcome))
	}
}

// An effect's result is held to the same rule as a job's, before it is
// sent, by both kinds of worker: the executor gets a *queue.ValidationError.
func TestEffectResultIsCheckedBeforeSending(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"Direct", "Remote"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			got := make(chan error, 1)
			exec := executorFunc(func(ctx context.Context, job queue.Job, r worker.Reporter) (json.RawMessage, error) {
				if _, err := r.StartEffect(ctx, "k"); err != nil {
					return nil, err
				}
				got <- r.FinishEffect(ctx, "k", json.RawMessage(`[1]`))
				return nil, nil
			})
			f := setup(t)
			cfg := worker.Config{ID: "remote-worker", Lease: 2 * time.Second, Executor: exec, Backend: worker.Direct{Client: f.client}}
			if kind == "Remote" {
				cfg.Backend = f.remote(t)
			}
			f.run(t, cfg)
			f.submit(t, `{}`, 1)
			var ve *queue.ValidationError
			if err := <-got; !errors.As(err, &ve) || ve.Field != "result" {
				t.Fatalf("FinishEffect([1]) = %v, want a validation error on result", err)
			}
		})
	}
}
