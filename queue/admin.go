package queue

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/db"
)

// Cancel cancels the pending jobs that f selects and asks the running ones
// to stop. It returns the jobs it changed.
func (c *Client) Cancel(ctx context.Context, f Filter, actor string) ([]Job, error) {
	p := db.JobCancelParams{Ids: f.IDs, Kind: nonEmpty(f.Kind), Queue: nonEmpty(f.Queue), Actor: actor}
	if f.State != "" {
		p.State = ptr(db.JobState(f.State))
	}
	rows, err := c.q.JobCancel(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("cancelling jobs: %w", inputRefused(err, ""))
	}
	return toJobs(rows), nil
}

// Retry moves the dead or cancelled jobs that f selects back to pending,
// due now, with a fresh budget of attempts.
func (c *Client) Retry(ctx context.Context, f Filter, actor string) ([]Job, error) {
	p := db.JobRetryParams{Ids: f.IDs, Kind: nonEmpty(f.Kind), Queue: nonEmpty(f.Queue), Actor: actor}
	if f.State != "" {
		p.State = ptr(db.JobState(f.State))
	}
	rows, err := c.q.JobRetry(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("retrying jobs: %w", inputRefused(err, ""))
	}
	jobs := toJobs(rows)
	queues := map[string]bool{}
	for _, j := range jobs {
		queues[j.Queue] = true
	}
	c.notifyJobs(ctx, mapKeys(queues))
	return jobs, nil
}

// CancelOne cancels one job: ErrWrongState unless pending or running.
func (c *Client) CancelOne(ctx context.Context, id int64, actor string) (Job, error) {
	return c.one(ctx, id, actor, c.Cancel)
}

// RetryOne retries one job: ErrWrongState unless dead or cancelled.
func (c *Client) RetryOne(ctx context.Context, id int64, actor string) (Job, error) {
	return c.one(ctx, id, actor, c.Retry)
}

func (c *Client) one(ctx context.Context, id int64, actor string, act func(context.Context, Filter, string) ([]Job, error)) (Job, error) {
	jobs, err := act(ctx, Filter{IDs: []int64{id}}, actor)
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
