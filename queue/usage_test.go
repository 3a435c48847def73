package queue_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// budgetJob inserts a job with the given budget (nil: none) and claims it.
func budgetJob(t *testing.T, f *fixture, maxCost *int64, maxSteps *int32) (queue.Job, queue.Lease) {
	t.Helper()
	base := int32(0)
	job, _, err := f.client.Insert(f.ctx, queue.NewJob{Kind: "app_investigation", Payload: json.RawMessage(`{"app":"com.example.notes"}`),
		BackoffBaseMs: &base, MaxCost: maxCost, MaxSteps: maxSteps})
	if err != nil {
		t.Fatal(err)
	}
	held := f.claimOne(t, "w1", time.Minute)
	if held.ID != job.ID {
		t.Fatalf("claimed job %d, want %d", held.ID, job.ID)
	}
	return held, queue.Lease{JobID: held.ID, Token: held.LeaseToken, WorkerID: "w1"}
}

func ptrTo[T any](v T) *T { return &v }

// Reports add up per attempt, model and currency (one row each, however
// many reports), counters key by key; the job's cost spent is their sum;
// a stale token's report is refused and adds nothing.
func TestUsageSummedPerAttempt(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	job, l := budgetJob(t, f, nil, nil)
	reports := []queue.Usage{
		{Model: "gpt-x", InputTokens: 1200, OutputTokens: 300, CostMicros: 4500, Counters: map[string]int64{"screens": 3}},
		{Model: "gpt-x", InputTokens: 800, OutputTokens: 100, CostMicros: 1500, Counters: map[string]int64{"screens": 2, "taps": 7}},
		{Model: "vision-1", Currency: "EUR", InputTokens: 10, CostMicros: 20},
	}
	for _, u := range reports {
		if err := f.client.Usage(f.ctx, l, u); err != nil {
			t.Fatal(err)
		}
	}
	stale := l
	stale.Token++
	if err := f.client.Usage(f.ctx, stale, queue.Usage{Model: "gpt-x", CostMicros: 1_000_000}); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("stale usage: %v, want ErrLeaseLost", err)
	}
	d, err := f.client.Detail(f.ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Usage) != 2 {
		t.Fatalf("usage rows %+v, want 2 (one per model and currency)", d.Usage)
	}
	gpt, eur := d.Usage[0], d.Usage[1]
	if gpt.Model != "gpt-x" || gpt.Currency != "USD" || gpt.Attempt != 1 || gpt.InputTokens != 2000 || gpt.OutputTokens != 400 ||
		gpt.CostMicros != 6000 || gpt.Reports != 2 || gpt.Counters["screens"] != 5 || gpt.Counters["taps"] != 7 {
		t.Fatalf("gpt-x usage %+v", gpt)
	}
	if eur.Model != "vision-1" || eur.Currency != "EUR" || eur.CostMicros != 20 || eur.Reports != 1 {
		t.Fatalf("vision-1 usage %+v", eur)
	}
	if d.Job.CostSpentMicros != 6020 || d.Job.State != queue.StateRunning {
		t.Fatalf("job spent %d in state %s; want 6020, running", d.Job.CostSpentMicros, d.Job.State)
	}
	if !hasEvent(d.Events, "stale_write_refused") {
		t.Fatal("the stale usage write is not on the timeline")
	}
	totals, err := f.client.UsageTotals(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(totals) != 2 || totals[0].Currency != "EUR" || totals[1].CostMicros != 6000 || totals[1].InputTokens != 2000 || totals[1].Reports != 2 {
		t.Fatalf("totals %+v", totals)
	}
	sum, err := f.client.UsageSummary(f.ctx, queue.UsageQuery{From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour), GroupBy: "app"})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum) != 2 || sum[0].Key != "com.example.notes" || sum[0].CostMicros != 6000 || sum[0].Jobs != 1 {
		t.Fatalf("summary by app %+v", sum)
	}
}

func hasEvent(events []queue.Event, typ string) bool {
	for _, e := range events {
		if e.Type == typ {
			return true
		}
	}
	return false
}

// The usage report that brings the job's cost to max_cost ends the
// attempt failed, permanently (dead at once though attempts remain), with
// reason "budget spent", and keeps the attempt's screenshots; the worker
// can write nothing more.
func TestBudgetCostSpentEndsAttemptPermanently(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	job, l := budgetJob(t, f, ptrTo[int64](10_000), nil)
	if _, err := f.client.RecordArtifact(f.ctx, l, queue.Artifact{Kind: queue.ArtifactScreenshot, Name: "step1.png", ContentType: "image/png", Size: 1, SHA256: strings.Repeat("ab", 32)}); err != nil {
		t.Fatal(err)
	}
	if err := f.client.Usage(f.ctx, l, queue.Usage{Model: "gpt-x", CostMicros: 6000}); err != nil {
		t.Fatalf("within budget: %v", err)
	}
	if err := f.client.Usage(f.ctx, l, queue.Usage{Model: "gpt-x", CostMicros: 4000}); !errors.Is(err, queue.ErrBudgetSpent) {
		t.Fatalf("spending the budget: %v, want ErrBudgetSpent", err)
	}
	d, err := f.client.Detail(f.ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Job.State != queue.StateDead || d.Job.LastError == nil || *d.Job.LastError != queue.BudgetSpent || d.Job.CostSpentMicros != 10_000 {
		t.Fatalf("job %s, last error %v, spent %d; want dead, %q, 10000", d.Job.State, d.Job.LastError, d.Job.CostSpentMicros, queue.BudgetSpent)
	}
	if len(d.Attempts) != 1 || d.Attempts[0].Outcome == nil || *d.Attempts[0].Outcome != "failed" || *d.Attempts[0].Error != queue.BudgetSpent {
		t.Fatalf("attempts %+v", d.Attempts)
	}
	if len(d.Artifacts) != 1 || d.Artifacts[0].Name != "step1.png" {
		t.Fatalf("artifacts %+v: the screenshot is not kept", d.Artifacts)
	}
	if len(d.Usage) != 1 || d.Usage[0].CostMicros != 10_000 {
		t.Fatalf("usage %+v: the report that spent the budget is not recorded", d.Usage)
	}
	if _, err := f.client.Heartbeat(f.ctx, l); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("heartbeat after the budget is spent: %v, want ErrLeaseLost", err)
	}
	if _, err := f.client.Complete(f.ctx, l, json.RawMessage(`{}`)); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("complete after the budget is spent: %v, want ErrLeaseLost", err)
	}

	// A person who retries the dead job gives it its budget again; what
	// the first attempt used stays on the job's usage.
	retried, err := f.client.RetryOne(f.ctx, job.ID, "user:tester")
	if err != nil {
		t.Fatal(err)
	}
	if retried.CostSpentMicros != 0 || retried.StepsSpent != 0 {
		t.Fatalf("retried job has spent %d micros, %d steps; want a fresh budget", retried.CostSpentMicros, retried.StepsSpent)
	}
	again := f.claimOne(t, "w1", time.Minute)
	l2 := queue.Lease{JobID: again.ID, Token: again.LeaseToken, WorkerID: "w1"}
	if err := f.client.Usage(f.ctx, l2, queue.Usage{Model: "gpt-x", CostMicros: 6000}); err != nil {
		t.Fatalf("the retry's first report, within its fresh budget: %v", err)
	}
	if d, err = f.client.Detail(f.ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, u := range d.Usage {
		total += u.CostMicros
	}
	if d.Job.State != queue.StateRunning || d.Job.CostSpentMicros != 6000 || total != 16_000 {
		t.Fatalf("after the retry's report: %s, spent %d, usage total %d; want running, 6000, 16000", d.Job.State, d.Job.CostSpentMicros, total)
	}
}

// max_steps counts the progress reports that name a step, over every
// attempt of the job: the one that reaches it ends the attempt as for
// max_cost. Progress without a step does not count.
func TestBudgetStepsSpentOverAttempts(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	job, l := budgetJob(t, f, nil, ptrTo[int32](3))
	for step := range int32(2) {
		if err := f.client.ProgressStep(f.ctx, l, step+1, 0.5, "step"); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.client.Progress(f.ctx, l, 0.9, "no step"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Fail(f.ctx, l, "flaky", true); err != nil {
		t.Fatal(err)
	}
	held := f.claimOne(t, "w1", time.Minute)
	l2 := queue.Lease{JobID: held.ID, Token: held.LeaseToken, WorkerID: "w1"}
	if held.ID != job.ID || held.StepsSpent != 2 {
		t.Fatalf("second attempt of job %d has %d steps spent; want job %d, 2", held.ID, held.StepsSpent, job.ID)
	}
	if err := f.client.ProgressStep(f.ctx, l2, 1, 0.1, "again"); !errors.Is(err, queue.ErrBudgetSpent) {
		t.Fatalf("third step: %v, want ErrBudgetSpent", err)
	}
	got, err := f.client.Get(f.ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != queue.StateDead || *got.LastError != queue.BudgetSpent || got.StepsSpent != 3 || got.Attempt != 2 {
		t.Fatalf("job %+v; want dead after 3 steps in attempt 2, %q", got, queue.BudgetSpent)
	}
}

// A job without a budget reports as much as it likes and runs on; its
// steps are not even counted.
func TestNoBudgetUntouched(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	job, l := budgetJob(t, f, nil, nil)
	for step := range int32(20) {
		if err := f.client.ProgressStep(f.ctx, l, step+1, 0.5, "step"); err != nil {
			t.Fatal(err)
		}
		if err := f.client.Usage(f.ctx, l, queue.Usage{Model: "gpt-x", CostMicros: 1_000_000_000}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := f.client.Get(f.ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != queue.StateRunning || got.StepsSpent != 0 || got.CostSpentMicros != 20_000_000_000 || got.MaxCost != nil {
		t.Fatalf("job %+v; want running, no steps counted, 2e10 spent", got)
	}
	if _, err := f.client.Complete(f.ctx, l, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
}

// Bad reports and budgets are *ValidationErrors naming their field.
func TestUsageAndBudgetValidation(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		u     queue.Usage
		field string
	}{
		"NegativeTokens":  {queue.Usage{Model: "m", InputTokens: -1}, "input_tokens"},
		"HugeCost":        {queue.Usage{Model: "m", CostMicros: 1 << 62}, "cost_micros"},
		"ModelWithSpaces": {queue.Usage{Model: "a b"}, "model"},
		"LongModel":       {queue.Usage{Model: strings.Repeat("m", 129)}, "model"},
		"Currency":        {queue.Usage{Model: "m", Currency: "usd"}, "currency"},
		"CounterName":     {queue.Usage{Model: "m", Counters: map[string]int64{"Bad Name": 1}}, "counters"},
		"CounterValue":    {queue.Usage{Model: "m", Counters: map[string]int64{"screens": -3}}, "counters.screens"},
	} {
		t.Run(name, func(t *testing.T) {
			var ve *queue.ValidationError
			if err := queue.CheckUsage(&tc.u); !errors.As(err, &ve) || ve.Field != tc.field {
				t.Fatalf("CheckUsage(%+v) = %v, want a ValidationError of %s", tc.u, err, tc.field)
			}
		})
	}
	u := queue.Usage{}
	if err := queue.CheckUsage(&u); err != nil || u.Model != "unknown" || u.Currency != "USD" {
		t.Fatalf("empty report: %v, %+v", err, u)
	}
	for name, nj := range map[string]queue.NewJob{
		"max_cost":  {Kind: "k", MaxCost: ptrTo[int64](0)},
		"max_steps": {Kind: "k", MaxSteps: ptrTo[int32](-1)},
	} {
		var ve *queue.ValidationError
		if err := nj.Normalize(); !errors.As(err, &ve) || ve.Field != name {
			t.Fatalf("%s: %v", name, err)
		}
	}
	big := queue.NewJob{Kind: "k", MaxCost: ptrTo[int64](queue.MaxCostLimit + 1)}
	if err := big.Normalize(); err == nil {
		t.Fatal("a max_cost over the limit was taken")
	}
}

// Retention deletes a job's usage with it.
func TestUsagePrunedWithJob(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	job, l := budgetJob(t, f, ptrTo[int64](5), nil)
	if err := f.client.Usage(f.ctx, l, queue.Usage{Model: "m", CostMicros: 5}); !errors.Is(err, queue.ErrBudgetSpent) {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // finished strictly before the cutoff
	if _, err := f.client.PruneBatch(f.ctx, queue.StateDead, time.Millisecond, 0, 100, false); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM attempt_usage WHERE job_id = $1`, job.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Get(f.ctx, job.ID); !errors.Is(err, queue.ErrNotFound) || n != 0 {
		t.Fatalf("after pruning: job %v, %d usage rows left", err, n)
	}
}
