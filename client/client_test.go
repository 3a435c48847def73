package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/db/dbtest"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web"
)

type fixture struct {
	ctx    context.Context
	queue  *queue.Client
	client *client.Client
	url    string
}

// setup starts a real server in process on a database of its own and
// returns a client of it with an admin token.
func setup(t *testing.T) *fixture {
	t.Helper()
	pool := dbtest.NewPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	logger := slog.New(slog.DiscardHandler)
	q := queue.NewClient(pool, logger)
	tokens := apitoken.NewStore(pool)
	srv := httptest.NewServer(web.New(web.Config{Pool: pool, Queue: q, Tokens: tokens, Logger: logger, ArtifactsDir: t.TempDir()}))
	t.Cleanup(srv.Close)
	secret, _, err := tokens.Create(ctx, "admin", apitoken.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{ctx: ctx, queue: q, client: client.New(srv.URL+"/", secret), url: srv.URL}
}

// claim leases the next job of queue q as a direct worker would.
func (f *fixture) claim(t *testing.T, q string) queue.Job {
	t.Helper()
	jobs, err := f.queue.Claim(f.ctx, queue.ClaimParams{WorkerID: "w1", Queues: []string{q}, Limit: 1, Lease: time.Minute})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claiming from %s: %v, %d jobs", q, err, len(jobs))
	}
	return jobs[0]
}

func lease(j queue.Job) queue.Lease {
	return queue.Lease{JobID: j.ID, Token: j.LeaseToken, WorkerID: "w1"}
}

func TestSubmitGetAndIdempotency(t *testing.T) {
	t.Parallel()
	f := setup(t)
	runAt := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	prio := int32(3)
	nj := client.NewJob{
		Kind: "app_investigation", Queue: "phones", Priority: prio, IdempotencyKey: new("notes-1"), RunAt: &runAt,
		Payload: json.RawMessage(`{"app":"com.example.notes"}`),
	}
	job, err := f.client.Submit(f.ctx, nj)
	if err != nil {
		t.Fatal(err)
	}
	if job.ID == 0 || job.State != client.StatePending || job.Queue != "phones" || job.Priority != prio || !job.RunAt.Time().Equal(runAt) {
		t.Errorf("submitted %+v", job)
	}
	again, err := f.client.Submit(f.ctx, nj)
	if err != nil || again.ID != job.ID {
		t.Errorf("the same idempotency key gave job %d (%v), want %d", again.ID, err, job.ID)
	}
	nj.Payload = json.RawMessage(`{"app":"com.example.other"}`)
	_, err = f.client.Submit(f.ctx, nj)
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict || apiErr.Field != "idempotency_key" {
		t.Errorf("a key reused for a different job: %v, want a 409 on idempotency_key", err)
	}

	d, err := f.client.Get(f.ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != job.ID || string(d.Payload) != `{"app": "com.example.notes"}` && string(d.Payload) != `{"app":"com.example.notes"}` {
		t.Errorf("got %+v", d.Job)
	}
	if len(d.Events) == 0 {
		t.Error("a submitted job has no events")
	}
	if _, err := f.client.Get(f.ctx, job.ID+1000); !client.IsNotFound(err) {
		t.Errorf("an unknown job: %v, want a 404", err)
	}
}

func TestErrorsCarryTheAPIsFieldAndMessage(t *testing.T) {
	t.Parallel()
	f := setup(t)
	_, err := f.client.Submit(f.ctx, client.NewJob{Kind: "Not A Kind"})
	var apiErr *client.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v (%T), want *client.Error", err, err)
	}
	if apiErr.Status != http.StatusBadRequest || apiErr.Field != "kind" || apiErr.Message == "" {
		t.Errorf("err = %+v, want 400 on field kind with a message", apiErr)
	}
	_, err = f.client.SubmitBatch(f.ctx, []client.NewJob{{Kind: "ok"}, {Kind: "ok", Payload: json.RawMessage(`[1]`)}})
	if !errors.As(err, &apiErr) || apiErr.Field != "jobs[1].payload" {
		t.Errorf("batch err = %v, want field jobs[1].payload", err)
	}
	bad := client.New(f.url, "lh_wrong")
	_, err = bad.Stats(f.ctx)
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnauthorized {
		t.Errorf("a wrong token: %v, want 401", err)
	}
}

func TestBatchAndListIterateEveryPage(t *testing.T) {
	t.Parallel()
	f := setup(t)
	njs := make([]client.NewJob, 7)
	for i := range njs {
		njs[i] = client.NewJob{Kind: "listed", Queue: fmt.Sprintf("q%d", i%2)}
	}
	jobs, err := f.client.SubmitBatch(f.ctx, njs)
	if err != nil || len(jobs) != len(njs) {
		t.Fatalf("batch: %d jobs, %v", len(jobs), err)
	}
	var want []int64
	for _, j := range jobs {
		want = append(want, j.ID)
	}
	slices.Reverse(want) // newest first

	var got []int64
	for j, err := range f.client.List(f.ctx, client.ListOptions{Kind: "listed", PageSize: 3}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, j.ID)
	}
	if !slices.Equal(got, want) {
		t.Errorf("List gave %v, want %v", got, want)
	}
	n := 0
	for j, err := range f.client.List(f.ctx, client.ListOptions{Queue: "q1", PageSize: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		if j.Queue != "q1" {
			t.Errorf("job %d of queue %s in a listing of q1", j.ID, j.Queue)
		}
		n++
	}
	if n != 3 {
		t.Errorf("%d jobs in q1, want 3", n)
	}
	for _, err := range f.client.List(f.ctx, client.ListOptions{PageSize: 501}) {
		var apiErr *client.Error
		if !errors.As(err, &apiErr) || apiErr.Field != "limit" {
			t.Errorf("a page of 501: %v, want a 400 on limit", err)
		}
	}
	// Breaking out of the loop stops fetching.
	for range f.client.List(f.ctx, client.ListOptions{PageSize: 1}) {
		break
	}
}

func TestRetryAndCancel(t *testing.T) {
	t.Parallel()
	f := setup(t)
	max1 := int32(1)
	dead, err := f.client.Submit(f.ctx, client.NewJob{Kind: "doomed", Queue: "dlq", MaxAttempts: &max1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.queue.Fail(f.ctx, lease(f.claim(t, "dlq")), "boom", false); err != nil {
		t.Fatal(err)
	}
	retried, err := f.client.Retry(f.ctx, dead.ID)
	if err != nil || retried.State != client.StatePending {
		t.Fatalf("retry: %+v, %v", retried, err)
	}
	var apiErr *client.Error
	if _, err := f.client.Retry(f.ctx, dead.ID); !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict {
		t.Errorf("retrying a pending job: %v, want 409", err)
	}
	cancelled, err := f.client.Cancel(f.ctx, dead.ID)
	if err != nil || cancelled.State != client.StateCancelled {
		t.Fatalf("cancel: %+v, %v", cancelled, err)
	}

	a, _ := f.client.Submit(f.ctx, client.NewJob{Kind: "bulk", Queue: "bulk"})
	b, _ := f.client.Submit(f.ctx, client.NewJob{Kind: "bulk", Queue: "bulk"})
	running := f.claim(t, "bulk") // the older one, a
	res, err := f.client.CancelMany(f.ctx, client.Selector{Queue: "bulk"})
	if err != nil || res.Count != 2 || len(res.Jobs) != 2 {
		t.Fatalf("cancel many: %+v, %v", res, err)
	}
	if running.ID != a.ID {
		t.Fatalf("claimed %d, want %d", running.ID, a.ID)
	}
	for _, j := range res.Jobs {
		switch j.ID {
		case a.ID:
			if j.State != client.StateRunning || !j.CancelRequested {
				t.Errorf("the running job after a bulk cancel: %s, cancel_requested %v", j.State, j.CancelRequested)
			}
		case b.ID:
			if j.State != client.StateCancelled {
				t.Errorf("the pending job after a bulk cancel: %s", j.State)
			}
		}
	}
	again, err := f.client.RetryMany(f.ctx, client.Selector{IDs: []int64{dead.ID, b.ID}, State: client.StateCancelled})
	if err != nil || again.Count != 2 || !slices.Contains(again.IDs, dead.ID) || !slices.Contains(again.IDs, b.ID) {
		t.Errorf("retry many: %+v, %v", again, err)
	}
	if _, err := f.client.RetryMany(f.ctx, client.Selector{}); !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest {
		t.Errorf("an empty selector: %v, want 400", err)
	}

	stats, err := f.client.Stats(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Jobs[client.StatePending] != 2 || stats.Jobs[client.StateRunning] != 1 || len(stats.Jobs) != 5 {
		t.Errorf("stats %v, want 2 pending, 1 running, and all five states", stats.Jobs)
	}
}

func TestWaitFor(t *testing.T) {
	t.Parallel()
	f := setup(t)
	job, err := f.client.Submit(f.ctx, client.NewJob{Kind: "waited", Queue: "wait"})
	if err != nil {
		t.Fatal(err)
	}
	seenRunning := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(f.ctx, 10*time.Second)
		defer cancel()
		if _, err := f.client.WaitFor(ctx, job.ID, client.StateRunning); err == nil {
			close(seenRunning)
		}
	}()
	j := f.claim(t, "wait")
	<-seenRunning
	if _, err := f.queue.Complete(f.ctx, lease(j), json.RawMessage(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(f.ctx, 10*time.Second)
	defer cancel()
	done, err := f.client.WaitFor(ctx, job.ID, client.StateSucceeded, client.StateDead)
	if err != nil || done.State != client.StateSucceeded || string(done.Result) != `{"ok": true}` && string(done.Result) != `{"ok":true}` {
		t.Fatalf("WaitFor: %s %s, %v", done.State, done.Result, err)
	}
	if len(done.Attempts) != 1 || done.Attempts[0].Outcome == nil || *done.Attempts[0].Outcome != "succeeded" {
		t.Errorf("attempts %+v", done.Attempts)
	}

	short, cancel := context.WithTimeout(f.ctx, 300*time.Millisecond)
	defer cancel()
	_, err = f.client.WaitFor(short, job.ID, client.StateDead)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting for a state the job never reaches: %v, want the deadline", err)
	}
	if _, err := f.client.WaitFor(f.ctx, job.ID+1000, client.StateSucceeded); !client.IsNotFound(err) {
		t.Errorf("waiting for an unknown job: %v, want a 404 at once", err)
	}
}

// A script finds the causes of its dead letters, lists one cause's
// letters and retries them, all through the client.
func TestFailureGroupsThroughTheClient(t *testing.T) {
	t.Parallel()
	f := setup(t)
	max1 := int32(1)
	var ids []int64
	for _, msg := range []string{"timed out after 30 s on emulator-5554", "timed out after 45 s on emulator-5556", "the app crashed"} {
		j, err := f.client.Submit(f.ctx, client.NewJob{Kind: "doomed", Queue: "dlq", MaxAttempts: &max1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.queue.Fail(f.ctx, lease(f.claim(t, "dlq")), msg, false); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	groups, err := f.client.FailureGroups(f.ctx, time.Time{}, 10)
	if err != nil || len(groups) != 2 {
		t.Fatalf("groups: %+v, %v", groups, err)
	}
	timeouts := groups[1] // the crash failed last
	if timeouts.Signature != "timed out after # s on emulator-#" || timeouts.Dead != 2 {
		t.Fatalf("the timeouts' group: %+v", timeouts)
	}
	recent, err := f.client.FailureGroups(f.ctx, time.Now().Add(-time.Minute), 10)
	if err != nil || len(recent) != 2 {
		t.Errorf("groups of the last minute: %d, %v", len(recent), err)
	}
	var letters []int64
	for j, err := range f.client.List(f.ctx, client.ListOptions{FailureGroup: timeouts.ID, PageSize: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		letters = append(letters, j.ID)
	}
	if !slices.Equal(letters, []int64{ids[1], ids[0]}) {
		t.Errorf("the group's letters: %v, want %d and %d", letters, ids[1], ids[0])
	}
	res, err := f.client.RetryMany(f.ctx, client.Selector{FailureGroup: timeouts.ID, State: client.StateDead})
	if err != nil || res.Count != 2 {
		t.Errorf("retrying the group: %+v, %v", res, err)
	}
	var apiErr *client.Error
	if _, err := f.client.FailureGroups(f.ctx, time.Time{}, 0); !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest {
		t.Errorf("limit 0: %v, want 400", err)
	}
}
