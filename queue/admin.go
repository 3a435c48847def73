package queue

import (
	"context"
	"fmt"
	"strconv"

	"github.com/leasehold/leasehold/audit"
	"github.com/leasehold/leasehold/db"
)

// Selection picks the jobs of a bulk retry or cancel: by IDs, or by
// state, kind, queue and failure group (all that are set must match). It has no App: the
// bulk statements do not select by it, so a field that were here would be
// silently ignored. An empty selection is refused rather than taken as
// every job.
type Selection struct {
	IDs   []int64
	State State
	Kind  string
	Queue string
	// FailureGroup selects the jobs whose last failure is in that group:
	// a retry takes its dead letters (and cancelled jobs), a cancel the
	// jobs still retrying after such a failure.
	FailureGroup int64
	// StartOver, for a retry only, clears each job's checkpoint: its next
	// attempt starts from the beginning instead of resuming.
	StartOver bool
	// one marks the selection of CancelOne and RetryOne: its audit row
	// names the job rather than a bulk selection.
	one bool
}

func (s Selection) check() error {
	if len(s.IDs) == 0 && s.State == "" && s.Kind == "" && s.Queue == "" && s.FailureGroup == 0 {
		return invalid("", "select jobs by ids or by state, kind, queue or failure group")
	}
	return nil
}

// Cancel cancels the pending jobs that f selects and asks the running ones
// to stop. A running job whose worker will never hear the request (its
// token is revoked, or it has been offline for OnlineWindow and has not
// heartbeated the job either) ends cancelled at once, its lease with it,
// so that nothing waits for a lease nobody renews. It returns the jobs it
// changed.
func (c *Client) Cancel(ctx context.Context, f Selection, actor string) ([]Job, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	p := db.JobCancelParams{Ids: f.IDs, Kind: nonEmpty(f.Kind), Queue: nonEmpty(f.Queue), Actor: actor,
		OnlineMs: OnlineWindow.Milliseconds(), FailureGroup: nonZero(f.FailureGroup)}
	if f.State != "" {
		p.State = ptr(db.JobState(f.State))
	}
	var jobs []Job
	err := audit.Change(ctx, c.pool, c.q, func(q *db.Queries) (audit.Entry, error) {
		rows, err := q.JobCancel(ctx, p)
		if err != nil {
			return audit.Entry{}, fmt.Errorf("cancelling jobs: %w", inputRefused(err, ""))
		}
		jobs = toJobs(rows)
		return f.auditEntry("cancel", jobs), nil
	})
	return jobs, err
}

// Retry moves the dead or cancelled jobs that f selects back to pending,
// due now, with a fresh budget of attempts.
func (c *Client) Retry(ctx context.Context, f Selection, actor string) ([]Job, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	p := db.JobRetryParams{Ids: f.IDs, Kind: nonEmpty(f.Kind), Queue: nonEmpty(f.Queue), Actor: actor, StartOver: f.StartOver,
		FailureGroup: nonZero(f.FailureGroup)}
	if f.State != "" {
		p.State = ptr(db.JobState(f.State))
	}
	var jobs []Job
	err := audit.Change(ctx, c.pool, c.q, func(q *db.Queries) (audit.Entry, error) {
		rows, err := q.JobRetry(ctx, p)
		if err != nil {
			return audit.Entry{}, fmt.Errorf("retrying jobs: %w", inputRefused(err, ""))
		}
		jobs = toJobs(rows)
		return f.auditEntry("retry", jobs), nil
	})
	if err != nil {
		return nil, err
	}
	queues := map[string]bool{}
	for _, j := range jobs {
		queues[j.Queue] = true
	}
	c.notifyJobs(ctx, mapKeys(queues))
	return jobs, nil
}

// auditEntry is the audit row of a retry or cancel (verb) of f that
// changed jobs: "job.VERB" of CancelOne or RetryOne, else "jobs.VERB"
// with the selection, the count and the first auditedIDs ids. A change
// of no job is no entry (Action "").
func (f Selection) auditEntry(verb string, jobs []Job) audit.Entry {
	if len(jobs) == 0 {
		return audit.Entry{}
	}
	detail := map[string]any{}
	if verb == "retry" {
		detail["checkpoint"] = "resume"
		if f.StartOver {
			detail["checkpoint"] = "start_over"
		}
	}
	if f.one {
		return audit.Entry{Action: "job." + verb, Target: "job:" + strconv.FormatInt(jobs[0].ID, 10), Detail: detail}
	}
	sel := map[string]any{}
	if len(f.IDs) > 0 {
		sel["ids"] = f.IDs[:min(len(f.IDs), auditedIDs)]
		sel["id_count"] = len(f.IDs)
	}
	for k, v := range map[string]string{"state": string(f.State), "kind": f.Kind, "queue": f.Queue} {
		if v != "" {
			sel[k] = v
		}
	}
	if f.FailureGroup != 0 {
		sel["failure_group"] = f.FailureGroup
	}
	ids := make([]int64, 0, min(len(jobs), auditedIDs))
	for _, j := range jobs[:cap(ids)] {
		ids = append(ids, j.ID)
	}
	detail["selection"], detail["count"], detail["ids"] = sel, len(jobs), ids
	return audit.Entry{Action: "jobs." + verb, Detail: detail}
}

// Why a retry or a cancel leaves a job alone (ErrWrongState, or a job a
// selection picked and the action skipped), as people and clients are
// told.
const (
	RetryRefusal  = "only dead or cancelled jobs can be retried"
	CancelRefusal = "only pending or running jobs can be cancelled"
)

// CancelOne cancels one job: ErrWrongState unless pending or running.
func (c *Client) CancelOne(ctx context.Context, id int64, actor string) (Job, error) {
	return c.one(ctx, Selection{IDs: []int64{id}, one: true}, actor, c.Cancel)
}

// RetryOne retries one job: ErrWrongState unless dead or cancelled. Its
// next attempt resumes from its checkpoint, if it has one.
func (c *Client) RetryOne(ctx context.Context, id int64, actor string) (Job, error) {
	return c.one(ctx, Selection{IDs: []int64{id}, one: true}, actor, c.Retry)
}

// RetryOneStartOver is RetryOne, the job's checkpoint cleared first: its
// next attempt starts from the beginning.
func (c *Client) RetryOneStartOver(ctx context.Context, id int64, actor string) (Job, error) {
	return c.one(ctx, Selection{IDs: []int64{id}, StartOver: true, one: true}, actor, c.Retry)
}

func (c *Client) one(ctx context.Context, sel Selection, actor string, act func(context.Context, Selection, string) ([]Job, error)) (Job, error) {
	id := sel.IDs[0]
	jobs, err := act(ctx, sel, actor)
	if err != nil {
		return Job{}, err
	}
	if len(jobs) == 1 {
		return jobs[0], nil
	}
	job, err := c.Get(ctx, id)
	if err != nil {
		return Job{}, err
	}
	return job, ErrWrongState
}
