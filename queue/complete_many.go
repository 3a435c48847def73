package queue

import (
	"context"
	"encoding/json"
	"fmt"
)

// Completion is one attempt's success, for CompleteMany.
type Completion struct {
	Lease  Lease
	Result json.RawMessage
}

// CompleteMany completes a batch of attempts in one statement, fenced one
// by one exactly as Complete. It returns an error per completion: nil,
// ErrLeaseLost or ErrNotFound. A worker finishing many short jobs commits
// once per batch instead of once per job.
func (c *Client) CompleteMany(ctx context.Context, cs []Completion) ([]error, error) {
	_, errs, err := c.completeMany(ctx, cs)
	return errs, err
}

// completeMany also returns the completed jobs, in the order of cs (the
// zero Job where the completion was refused).
func (c *Client) completeMany(ctx context.Context, cs []Completion) ([]Job, []error, error) {
	type item struct {
		ID         int64           `json:"id"`
		LeaseToken int64           `json:"lease_token"`
		Result     json.RawMessage `json:"result"`
	}
	items := make([]item, len(cs))
	for i, cm := range cs {
		items[i] = item{ID: cm.Lease.JobID, LeaseToken: cm.Lease.Token, Result: cm.Result}
		if len(items[i].Result) == 0 {
			items[i].Result = json.RawMessage(`{}`)
		}
	}
	encoded, err := json.Marshal(items)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding completions: %w", err)
	}
	rows, err := c.q.JobCompleteMany(ctx, encoded)
	if err != nil {
		return nil, nil, fmt.Errorf("completing jobs: %w", err)
	}
	done := make(map[Lease]Job, len(rows))
	for _, r := range rows {
		done[Lease{JobID: r.ID, Token: r.LeaseToken}] = toJob(r)
	}
	jobs := make([]Job, len(cs))
	errs := make([]error, len(cs))
	for i, cm := range cs {
		job, ok := done[Lease{JobID: cm.Lease.JobID, Token: cm.Lease.Token}]
		if !ok {
			errs[i] = c.refused(ctx, "complete", cm.Lease)
		}
		jobs[i] = job
	}
	return jobs, errs, nil
}
