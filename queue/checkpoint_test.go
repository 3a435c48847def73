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

// events returns the job's timeline entries of type typ.
func (f *fixture) events(t *testing.T, id int64, typ string) []queue.Event {
	t.Helper()
	d, err := f.client.Detail(f.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var out []queue.Event
	for _, e := range d.Events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// A checkpoint saved by one attempt is what the next attempt's claim
// answers, with a resumed event naming its step; the attempt that lost
// its lease can no longer save one (refused as lease lost, on the
// timeline), and a job that never saved one claims as before.
func TestCheckpointResumesNextAttempt(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	job := f.insert(t, jobOpts{})
	// A lease long enough for the saves below on a loaded machine (a
	// 100 ms one expired before them once in .ci/run); reapAt moves the
	// clock an hour on to take it back.
	first := f.claimOne(t, "w1", time.Minute)
	if first.Checkpoint != nil {
		t.Fatalf("first claim answers checkpoint %+v, want none", first.Checkpoint)
	}
	l1 := testutil.LeaseOf(first)
	if err := f.client.SaveCheckpoint(f.ctx, l1, 3, json.RawMessage(`{"cursor":"a"}`)); err != nil {
		t.Fatal(err)
	}
	if err := f.client.SaveCheckpoint(f.ctx, l1, 7, json.RawMessage(` {"cursor":"b","seen":[1,2]} `)); err != nil {
		t.Fatal(err)
	}
	if got := f.events(t, job.ID, "resumed"); len(got) != 0 {
		t.Fatalf("resumed events before any resume: %+v", got)
	}

	later := f.client.At(time.Now().Add(time.Hour))
	reapAt(t, f, later, job.ID)
	second := testutil.ClaimJob(t, f.ctx, later, "w2", "default", time.Minute)
	cp := second.Checkpoint
	if cp == nil || cp.Step != 7 || cp.Attempt != 1 || cp.At.IsZero() {
		t.Fatalf("second claim's checkpoint %+v, want step 7 of attempt 1", cp)
	}
	var state struct {
		Cursor string
		Seen   []int
	}
	if err := json.Unmarshal(cp.State, &state); err != nil || state.Cursor != "b" || len(state.Seen) != 2 {
		t.Fatalf("second claim's state %s (%v), want the last one saved", cp.State, err)
	}

	// The first attempt's worker, not knowing it lost the job, saves on.
	if err := f.client.SaveCheckpoint(f.ctx, l1, 9, json.RawMessage(`{"cursor":"stale"}`)); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("stale attempt's checkpoint: %v, want ErrLeaseLost", err)
	}
	got, err := f.client.Get(f.ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Checkpoint == nil || got.Checkpoint.Step != 7 {
		t.Fatalf("after the stale write the checkpoint is %+v, want step 7 still", got.Checkpoint)
	}
	refused := f.events(t, job.ID, "stale_write_refused")
	if len(refused) != 1 || !strings.Contains(string(refused[0].Detail), `"op": "checkpoint"`) {
		t.Fatalf("refusals %+v, want one for the checkpoint", refused)
	}

	resumed := f.events(t, job.ID, "resumed")
	if len(resumed) != 1 || resumed[0].Attempt == nil || *resumed[0].Attempt != 2 {
		t.Fatalf("resumed events %+v, want one, of attempt 2", resumed)
	}
	var detail struct {
		Step        *int `json:"step"`
		FromAttempt int  `json:"from_attempt"`
	}
	if err := json.Unmarshal(resumed[0].Detail, &detail); err != nil || detail.Step == nil || *detail.Step != 7 || detail.FromAttempt != 1 {
		t.Fatalf("resumed detail %s, want step 7 from attempt 1", resumed[0].Detail)
	}

	// The current attempt saves, and its own checkpoint replaces the one
	// it received.
	l2 := testutil.LeaseOf(second)
	if err := f.client.SaveCheckpoint(f.ctx, l2, 8, json.RawMessage(`{"cursor":"c"}`)); err != nil {
		t.Fatalf("current attempt's checkpoint: %v", err)
	}
	if got, _ := f.client.Get(f.ctx, job.ID); got.Checkpoint == nil || got.Checkpoint.Step != 8 || got.Checkpoint.Attempt != 2 {
		t.Fatalf("checkpoint after attempt 2 saved: %+v", got.Checkpoint)
	}

	// A job without a checkpoint: nothing in its claim, no event.
	plain := f.insert(t, jobOpts{queue: "plain"})
	claimed := testutil.ClaimJob(t, f.ctx, f.client, "w3", "plain", time.Minute)
	if claimed.ID != plain.ID || claimed.Checkpoint != nil {
		t.Fatalf("plain job's claim: id %d checkpoint %+v", claimed.ID, claimed.Checkpoint)
	}
	if got := f.events(t, plain.ID, "resumed"); len(got) != 0 {
		t.Fatalf("plain job has resumed events %+v", got)
	}
}

// The limited claim (a job with a concurrency key) answers the
// checkpoint and writes the resumed event too.
func TestCheckpointLimitedClaim(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	job := f.insertLimited(t, 1, limited{queue: "keyed", key: "phone-1", limit: 1})[0]
	first := testutil.ClaimJob(t, f.ctx, f.client, "w1", "keyed", time.Minute)
	if first.ID != job.ID {
		t.Fatalf("claimed %d, want %d", first.ID, job.ID)
	}
	if err := f.client.SaveCheckpoint(f.ctx, testutil.LeaseOf(first), 4, json.RawMessage(`{"k":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Fail(f.ctx, testutil.LeaseOf(first), "phone went away", true); err != nil {
		t.Fatal(err)
	}
	second := claimWhenDueIn(t, f, "w2", "keyed")
	if second.Checkpoint == nil || second.Checkpoint.Step != 4 || string(second.Checkpoint.State) != `{"k": 1}` {
		t.Fatalf("limited claim's checkpoint %+v, want step 4", second.Checkpoint)
	}
	if got := f.events(t, job.ID, "resumed"); len(got) != 1 || *got[0].Attempt != 2 {
		t.Fatalf("resumed events %+v, want one of attempt 2", got)
	}
}

// claimWhenDueIn claims the job of queueName as soon as one is due.
func claimWhenDueIn(t *testing.T, f *fixture, worker, queueName string) queue.Job {
	t.Helper()
	var job queue.Job
	waitFor(t, "job due", func() bool {
		jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: worker, Queues: []string{queueName}, Limit: 1, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) == 1 {
			job = jobs[0]
		}
		return len(jobs) == 1
	})
	return job
}

// What a checkpoint may be: a step from 0 and a JSON object of at most
// 64 KiB. Everything else is a *queue.ValidationError before anything is
// written, the oversized one wrapping ErrTooLarge (413 at the API).
func TestCheckpointBounds(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	job := f.insert(t, jobOpts{})
	l := testutil.LeaseOf(f.claimOne(t, "w1", time.Minute))

	pad := func(n int) json.RawMessage { // an object of exactly n bytes
		return json.RawMessage(`{"p":"` + strings.Repeat("x", n-8) + `"}`)
	}
	if len(pad(queue.MaxCheckpointBytes)) != queue.MaxCheckpointBytes {
		t.Fatal("pad is wrong")
	}
	cases := []struct {
		name     string
		step     int
		state    json.RawMessage
		tooLarge bool
	}{
		{"negative step", -1, json.RawMessage(`{}`), false},
		{"step past MaxStep", queue.MaxStep + 1, json.RawMessage(`{}`), false},
		{"no state", 1, nil, false},
		{"null", 1, json.RawMessage(`null`), false},
		{"array", 1, json.RawMessage(`[1,2]`), false},
		{"string", 1, json.RawMessage(`"s"`), false},
		{"malformed", 1, json.RawMessage(`{"a":`), false},
		{"NUL escape", 1, json.RawMessage(`{"a":"\u0000"}`), false},
		{"one byte over", 1, pad(queue.MaxCheckpointBytes + 1), true},
		{"a megabyte", 1, pad(1 << 20), true},
	}
	for _, c := range cases {
		err := f.client.SaveCheckpoint(f.ctx, l, c.step, c.state)
		var ve *queue.ValidationError
		if !errors.As(err, &ve) || errors.Is(err, queue.ErrTooLarge) != c.tooLarge {
			t.Errorf("%s: %v, want a validation error (too large: %v)", c.name, err, c.tooLarge)
		}
	}
	if got, _ := f.client.Get(f.ctx, job.ID); got.Checkpoint != nil {
		t.Fatalf("refused checkpoints were stored: %+v", got.Checkpoint)
	}
	if err := f.client.SaveCheckpoint(f.ctx, l, 0, pad(queue.MaxCheckpointBytes)); err != nil {
		t.Fatalf("a checkpoint of exactly %d bytes: %v", queue.MaxCheckpointBytes, err)
	}
	if got, _ := f.client.Get(f.ctx, job.ID); got.Checkpoint == nil || got.Checkpoint.Step != 0 {
		t.Fatalf("the largest checkpoint was not stored: %+v", got.Checkpoint)
	}
}

// A manual retry resumes from the checkpoint by default and says so on
// the timeline; one that starts over clears it, and the next attempt
// receives nothing.
func TestCheckpointRetryResumeOrStartOver(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	job := f.insert(t, jobOpts{maxAttempts: 1})
	kill := func(worker string) queue.Job {
		t.Helper()
		j := f.claimOne(t, worker, time.Minute)
		if err := f.client.SaveCheckpoint(f.ctx, testutil.LeaseOf(j), 5, json.RawMessage(`{"n":5}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := f.client.Fail(f.ctx, testutil.LeaseOf(j), "broken", false); err != nil {
			t.Fatal(err)
		}
		return j
	}
	kill("w1")
	retried, err := f.client.RetryOne(f.ctx, job.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if retried.Checkpoint == nil || retried.Checkpoint.Step != 5 {
		t.Fatalf("retry (resume) kept checkpoint %+v, want step 5", retried.Checkpoint)
	}
	if c := f.claimOne(t, "w2", time.Minute); c.Checkpoint == nil || c.Checkpoint.Step != 5 {
		t.Fatalf("claim after a resuming retry: checkpoint %+v", c.Checkpoint)
	} else if _, err := f.client.Fail(f.ctx, testutil.LeaseOf(c), "broken again", false); err != nil {
		t.Fatal(err)
	}

	restarted, err := f.client.RetryOneStartOver(f.ctx, job.ID, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if restarted.Checkpoint != nil {
		t.Fatalf("retry (start over) left checkpoint %+v", restarted.Checkpoint)
	}
	if c := f.claimOne(t, "w3", time.Minute); c.Checkpoint != nil {
		t.Fatalf("claim after starting over: checkpoint %+v", c.Checkpoint)
	}
	var how []string
	for _, e := range f.events(t, job.ID, "retried") {
		var d struct{ By, Checkpoint string }
		if err := json.Unmarshal(e.Detail, &d); err != nil {
			t.Fatal(err)
		}
		how = append(how, d.By+":"+d.Checkpoint)
	}
	if strings.Join(how, ",") != "alice:resume,bob:start_over" {
		t.Fatalf("retried events say %v, want alice:resume,bob:start_over", how)
	}
	if got := f.events(t, job.ID, "resumed"); len(got) != 1 || *got[0].Attempt != 2 {
		t.Fatalf("resumed events %+v, want only attempt 2's", got)
	}

	// A starting-over retry of a job without a checkpoint says nothing
	// of checkpoints.
	plain := f.insert(t, jobOpts{queue: "plain", maxAttempts: 1})
	pj := testutil.ClaimJob(t, f.ctx, f.client, "w4", "plain", time.Minute)
	if _, err := f.client.Fail(f.ctx, testutil.LeaseOf(pj), "x", false); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.RetryOneStartOver(f.ctx, plain.ID, "carol"); err != nil {
		t.Fatal(err)
	}
	if ev := f.events(t, plain.ID, "retried"); len(ev) != 1 || strings.Contains(string(ev[0].Detail), "checkpoint") {
		t.Fatalf("plain job's retried event %+v mentions a checkpoint", ev)
	}
}
