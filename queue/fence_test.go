package queue_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
)

// A second worker that knows (or guesses) the first one's token must not
// be able to act on its lease: every fenced write checks the owner too, and
// the refusal is on the timeline under the writer's name, not the owner's.
func TestFenceRequiresLeaseOwner(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	job := f.insert(t, jobOpts{})
	held := f.claimOne(t, "w1", time.Minute)
	thief := queue.Lease{JobID: held.ID, Token: held.LeaseToken, WorkerID: "w2"}

	writes := []struct {
		op    string
		write func() error
	}{
		{"heartbeat", func() error { _, err := f.client.Heartbeat(f.ctx, thief); return err }},
		{"progress", func() error { return f.client.Progress(f.ctx, thief, 0.5, "not mine") }},
		{"checkpoint", func() error { return f.client.SaveCheckpoint(f.ctx, thief, 1, json.RawMessage(`{"not":"mine"}`)) }},
		{"effect_start", func() error { _, err := f.client.StartEffect(f.ctx, thief, "charge"); return err }},
		{"effect_finish", func() error { return f.client.FinishEffect(f.ctx, thief, "charge", nil) }},
		{"artifact", func() error {
			_, err := f.client.RecordArtifact(f.ctx, thief, queue.Artifact{
				Kind: queue.ArtifactText, Name: "x.txt", ContentType: "text/plain", SHA256: strings.Repeat("a", 64),
			})
			return err
		}},
		{"fail", func() error { _, err := f.client.Fail(f.ctx, thief, "not mine", false); return err }},
		{"complete", func() error {
			_, err := f.client.Complete(f.ctx, thief, json.RawMessage(`{"stolen":true}`))
			return err
		}},
		{"released", func() error { _, err := f.client.Release(f.ctx, thief); return err }},
		{"cancelled", func() error { _, err := f.client.AckCancel(f.ctx, thief); return err }},
	}
	for _, w := range writes {
		if err := w.write(); !errors.Is(err, queue.ErrLeaseLost) {
			t.Fatalf("%s with w1's token by w2: %v, want ErrLeaseLost", w.op, err)
		}
	}

	d, err := f.client.Detail(f.ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.State != queue.StateRunning || *d.LeaseOwner != "w1" || d.LeaseToken != held.LeaseToken ||
		d.Result != nil || d.LastError != nil || len(d.Effects) != 0 || len(d.Artifacts) != 0 || d.Checkpoint != nil {
		t.Fatalf("w2's writes changed w1's job: %+v", d)
	}
	var refused []string
	for _, e := range d.Events {
		switch e.Type {
		case "progress", "effect_started", "effect_done", "succeeded", "failed", "dead":
			t.Fatalf("w2's write reached the timeline as %s: %s", e.Type, e.Detail)
		case "stale_write_refused":
			var detail struct {
				Op, Worker, Reason string
			}
			if err := json.Unmarshal(e.Detail, &detail); err != nil {
				t.Fatal(err)
			}
			if detail.Worker != "w2" || detail.Reason != "not the lease owner" {
				t.Fatalf("refusal names worker %q, reason %q; want w2, not the lease owner", detail.Worker, detail.Reason)
			}
			refused = append(refused, detail.Op)
		}
	}
	if len(refused) != len(writes) {
		t.Fatalf("refusals recorded for %v, want one per write (%d)", refused, len(writes))
	}

	// The owner's lease is untouched by all of it.
	mine := testutil.LeaseOf(held)
	if _, err := f.client.Heartbeat(f.ctx, mine); err != nil {
		t.Fatalf("owner's heartbeat: %v", err)
	}
	if _, err := f.client.Complete(f.ctx, mine, json.RawMessage(`{"ok":true}`)); err != nil {
		t.Fatalf("owner's complete: %v", err)
	}
}

// Tokens grow, stay JSON-safe numbers, and their low bits are random: the
// next token cannot be had by adding one to a token a worker has seen.
func TestLeaseTokensAreNotGuessable(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	const n = 40
	for range n {
		f.insert(t, jobOpts{})
	}
	jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: "w", Queues: []string{"default"}, Limit: n, Lease: time.Minute})
	if err != nil || len(jobs) != n {
		t.Fatalf("claimed %d jobs (%v), want %d", len(jobs), err, n)
	}
	lows := map[int64]bool{}
	for i, j := range jobs {
		if j.LeaseToken <= 0 || j.LeaseToken >= 1<<53 {
			t.Fatalf("token %d is not a positive JSON-safe integer", j.LeaseToken)
		}
		lows[j.LeaseToken&(1<<20-1)] = true
		for _, k := range jobs[:i] {
			if d := j.LeaseToken - k.LeaseToken; d > -1<<10 && d < 1<<10 {
				t.Fatalf("tokens %d and %d are %d apart: guessable from each other", j.LeaseToken, k.LeaseToken, d)
			}
		}
	}
	// 40 draws of 20 random bits collide with probability about 0.08 %.
	if len(lows) < n-1 {
		t.Fatalf("only %d distinct low parts among %d tokens: not random", len(lows), n)
	}

	// A retry's token is still larger than every earlier one of its job.
	first := jobs[0]
	if _, err := f.client.Fail(f.ctx, testutil.LeaseOf(first), "again", true); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(f.ctx, `UPDATE jobs SET run_at = now() WHERE id = $1`, first.ID); err != nil {
		t.Fatal(err)
	}
	again := f.claimOne(t, "w", time.Minute)
	if again.ID != first.ID || again.LeaseToken <= first.LeaseToken {
		t.Fatalf("retry of job %d got token %d (job %d), want one above %d", first.ID, again.LeaseToken, again.ID, first.LeaseToken)
	}
}

// Finishing an effect the attempt never started is the caller's bug, not
// a lost lease: it must not make a worker following the contract stop a
// healthy job, and it leaves no refusal on the timeline. Finishing twice
// (a retry whose first answer was lost) is fine.
func TestFinishEffectNotStarted(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	job := f.insert(t, jobOpts{})
	l := testutil.LeaseOf(f.claimOne(t, "w1", time.Minute))
	if err := f.client.FinishEffect(f.ctx, l, "never-started", nil); !errors.Is(err, queue.ErrEffectNotStarted) {
		t.Fatalf("finishing an effect never started: %v, want ErrEffectNotStarted", err)
	}
	var ve *queue.ValidationError
	if err := f.client.FinishEffect(f.ctx, l, "never-started", nil); !errors.As(err, &ve) || ve.Field != "key" {
		t.Fatalf("ErrEffectNotStarted is not a ValidationError on key: %v", err)
	}
	if _, err := f.client.StartEffect(f.ctx, l, "post"); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := f.client.FinishEffect(f.ctx, l, "post", json.RawMessage(`{"n":1}`)); err != nil {
			t.Fatalf("finish #%d: %v", i+1, err)
		}
	}
	if _, err := f.client.Heartbeat(f.ctx, l); err != nil {
		t.Fatalf("the lease suffered: %v", err)
	}
	d, err := f.client.Detail(f.ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range d.Events {
		if e.Type == "stale_write_refused" {
			t.Fatalf("a healthy lease got a refusal event: %s", e.Detail)
		}
	}
	if len(d.Effects) != 1 || d.Effects[0].State != "done" {
		t.Fatalf("effects %+v, want post done", d.Effects)
	}
}

// The result rule is the queue's, so a direct worker meets it exactly as a
// remote one does; a refused result leaves the attempt running for the
// worker to fail with the reason.
func TestCompleteChecksTheResult(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	deep := strings.Repeat(`{"a":`, 200) + `1` + strings.Repeat(`}`, 200)
	for _, tc := range []struct{ name, result string }{
		{"Number", `42`},
		{"Array", `[1,2]`},
		{"String", `"done"`},
		{"TooDeep", deep},
		{"TooLarge", `{"a":"` + strings.Repeat("x", queue.MaxResultBytes) + `"}`},
		{"NotJSON", `{"a":`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.insert(t, jobOpts{})
			l := testutil.LeaseOf(f.claimOne(t, "w1", time.Minute))
			var ve *queue.ValidationError
			if _, err := f.client.Complete(f.ctx, l, json.RawMessage(tc.result)); !errors.As(err, &ve) || ve.Field != "result" {
				t.Fatalf("Complete: %v, want a ValidationError on result", err)
			}
			errs, err := f.client.CompleteMany(f.ctx, []queue.Completion{{Lease: l, Result: json.RawMessage(tc.result)}})
			if err != nil || !errors.As(errs[0], &ve) {
				t.Fatalf("CompleteMany: %v %v, want a ValidationError", err, errs)
			}
			if err := f.client.FinishEffect(f.ctx, l, "x", json.RawMessage(tc.result)); !errors.As(err, &ve) {
				t.Fatalf("FinishEffect: %v, want a ValidationError", err)
			}
			j, err := f.client.Get(f.ctx, l.JobID)
			if err != nil || j.State != queue.StateRunning {
				t.Fatalf("after a refused result the job is %s (%v), want running", j.State, err)
			}
			if _, err := f.client.Fail(f.ctx, l, "result refused: "+ve.Error(), true); err != nil {
				t.Fatalf("the worker cannot fail the attempt: %v", err)
			}
		})
	}
	f.insert(t, jobOpts{})
	l := testutil.LeaseOf(f.claimOne(t, "w1", time.Minute))
	if _, err := f.client.Complete(f.ctx, l, json.RawMessage(` {"ok":true} `)); err != nil {
		t.Fatalf("an object result: %v", err)
	}
}

// A completion retried after its answer was lost succeeds again (the job,
// unchanged) instead of reading as a stale write on a job that succeeded;
// the same lease with a different result is a conflict, and a different
// lease completing it is still refused.
func TestRepeatedCompletionIsIdempotent(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	job := f.insert(t, jobOpts{})
	l := testutil.LeaseOf(f.claimOne(t, "w1", time.Minute))
	first, err := f.client.Complete(f.ctx, l, json.RawMessage(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.client.Complete(f.ctx, l, json.RawMessage(`{ "n": 1 }`))
	if err != nil || again.State != queue.StateSucceeded || string(again.Result) != string(first.Result) {
		t.Fatalf("repeat completion: %v, job %s result %s; want the first result back", err, again.State, again.Result)
	}
	// The same lease with another result is not a repeat: the first
	// result stands and the caller hears so.
	if _, err := f.client.Complete(f.ctx, l, json.RawMessage(`{"n":2}`)); !errors.Is(err, queue.ErrResultConflict) {
		t.Fatalf("completing again with another result: %v, want ErrResultConflict", err)
	}
	if j, _ := f.client.Get(f.ctx, l.JobID); string(j.Result) != string(first.Result) {
		t.Fatalf("after the conflicting completion the result is %s, want %s", j.Result, first.Result)
	}
	other := queue.Lease{JobID: l.JobID, Token: l.Token, WorkerID: "w2"}
	if _, err := f.client.Complete(f.ctx, other, nil); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("another worker completing it: %v, want ErrLeaseLost", err)
	}
	d, _ := f.client.Detail(f.ctx, job.ID)
	refusals := 0
	for _, e := range d.Events {
		if e.Type == "stale_write_refused" {
			refusals++
		}
	}
	if refusals != 1 {
		t.Fatalf("%d refusals on the timeline, want 1 (w2's)", refusals)
	}
}
