package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Polling bounds of WaitFor: quick at first for short jobs, then no more
// than one request every two seconds.
const (
	waitFirst = 50 * time.Millisecond
	waitMax   = 2 * time.Second
)

// WaitFor polls the job, with growing pauses, until it is in one of
// states, and returns it then; or returns ctx's error (with the last state
// seen) when ctx ends first. Give a deadline: a job that never reaches
// one of states is waited for as long as ctx lasts. Answers of the API
// that are errors (404 for an unknown job, say) end the wait at once;
// failures to reach the server are retried.
func (c *Client) WaitFor(ctx context.Context, id int64, states ...State) (JobDetail, error) {
	if len(states) == 0 {
		return JobDetail{}, errors.New("leasehold: WaitFor needs at least one state")
	}
	pause := waitFirst
	timer := time.NewTimer(0)
	defer timer.Stop()
	var last State
	for {
		select {
		case <-ctx.Done():
			return JobDetail{}, fmt.Errorf("waiting for job %d to be %v (it was %s): %w", id, states, last, context.Cause(ctx))
		case <-timer.C:
		}
		d, err := c.Get(ctx, id)
		var apiErr *Error
		switch {
		case errors.As(err, &apiErr):
			return JobDetail{}, err
		case err == nil && slices.Contains(states, d.State):
			return d, nil
		case err == nil:
			last = d.State
		}
		// A transport error (the server restarting, say) is retried like
		// a state not reached yet.
		timer.Reset(pause)
		pause = min(pause*3/2, waitMax)
	}
}
