package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/api"
)

// Submit submits one job. When its idempotency key names the same job
// already, the server answers that job instead of a new one; a key that
// names a different job is an *Error with Status 409.
func (c *Client) Submit(ctx context.Context, j NewJob) (Job, error) {
	var job Job
	_, err := c.do(ctx, http.MethodPost, "/api/v1/jobs", nil, j, &job)
	return job, err
}

// SubmitBatch submits up to 10,000 jobs at once: all of them, or none when
// one is invalid (the *Error's Field then names it, "jobs[3].kind").
func (c *Client) SubmitBatch(ctx context.Context, jobs []NewJob) ([]Job, error) {
	var body api.Jobs
	_, err := c.do(ctx, http.MethodPost, "/api/v1/jobs/batch", nil, api.NewJobs{Jobs: jobs}, &body)
	return body.Jobs, err
}

// Get returns a job with its attempts, artifacts, events and effects.
func (c *Client) Get(ctx context.Context, id int64) (JobDetail, error) {
	var d JobDetail
	_, err := c.do(ctx, http.MethodGet, "/api/v1/jobs/"+strconv.FormatInt(id, 10), nil, nil, &d)
	return d, err
}

// ListPage returns one page of jobs, newest first, starting at cursor (0
// for the first page, then the NextCursor of the page before).
func (c *Client) ListPage(ctx context.Context, opts ListOptions, cursor int64) (Page, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("state", string(opts.State))
	set("kind", opts.Kind)
	set("queue", opts.Queue)
	set("app", opts.App)
	if opts.FailureGroup > 0 {
		q.Set("failure_group", strconv.FormatInt(opts.FailureGroup, 10))
	}
	if opts.PageSize > 0 {
		q.Set("limit", strconv.Itoa(opts.PageSize))
	}
	if cursor > 0 {
		q.Set("cursor", strconv.FormatInt(cursor, 10))
	}
	var p Page
	_, err := c.do(ctx, http.MethodGet, "/api/v1/jobs", q, nil, &p)
	return p, err
}

// List iterates over every job that opts selects, newest first, fetching
// one page at a time. It stops at the first error, which it yields.
func (c *Client) List(ctx context.Context, opts ListOptions) iter.Seq2[Job, error] {
	return func(yield func(Job, error) bool) {
		var cursor int64
		for {
			p, err := c.ListPage(ctx, opts, cursor)
			if err != nil {
				yield(Job{}, err)
				return
			}
			for _, j := range p.Jobs {
				if !yield(j, nil) {
					return
				}
			}
			if p.NextCursor == nil {
				return
			}
			if *p.NextCursor == cursor {
				yield(Job{}, errors.New("leasehold: the server repeated a cursor"))
				return
			}
			cursor = *p.NextCursor
		}
	}
}

// Retry moves a dead or cancelled job back to pending with a fresh budget
// of attempts; in other states it is an *Error with Status 409.
func (c *Client) Retry(ctx context.Context, id int64) (Job, error) {
	return c.jobAction(ctx, id, "retry")
}

// Cancel cancels a pending job, or asks a running one to stop (the job
// comes back with CancelRequested set); in other states it is an *Error
// with Status 409.
func (c *Client) Cancel(ctx context.Context, id int64) (Job, error) {
	return c.jobAction(ctx, id, "cancel")
}

func (c *Client) jobAction(ctx context.Context, id int64, action string) (Job, error) {
	var job Job
	_, err := c.do(ctx, http.MethodPost, fmt.Sprintf("/api/v1/jobs/%d/%s", id, action), nil, nil, &job)
	return job, err
}

// RetryMany retries the dead or cancelled jobs that sel picks; the others
// are skipped.
func (c *Client) RetryMany(ctx context.Context, sel Selector) (BulkResult, error) {
	var r BulkResult
	_, err := c.do(ctx, http.MethodPost, "/api/v1/jobs/retry", nil, sel, &r)
	return r, err
}

// CancelMany cancels the pending jobs that sel picks and asks the running
// ones to stop; the others are skipped.
func (c *Client) CancelMany(ctx context.Context, sel Selector) (BulkResult, error) {
	var r BulkResult
	_, err := c.do(ctx, http.MethodPost, "/api/v1/jobs/cancel", nil, sel, &r)
	return r, err
}

// Stats returns the job counts per state (every state, even at 0) and the
// workers seen in the last five minutes.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	_, err := c.do(ctx, http.MethodGet, "/api/v1/stats", nil, nil, &s)
	return s, err
}

// FailureGroups returns up to limit failure groups (1 to 500): with
// since zero, the groups that hold dead letters; otherwise every group
// with a failed attempt since then. The one seen last comes first.
func (c *Client) FailureGroups(ctx context.Context, since time.Time, limit int) ([]FailureGroup, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if !since.IsZero() {
		q.Set("since", since.UTC().Format(time.RFC3339Nano))
	}
	var body api.FailureGroupList
	_, err := c.do(ctx, http.MethodGet, "/api/v1/failure-groups", q, nil, &body)
	return body.Groups, err
}

// Workers returns the workers seen in the last 24 hours, latest first,
// with their phones' facts, health and outcomes.
func (c *Client) Workers(ctx context.Context) ([]WorkerStatus, error) {
	var body api.Workers
	_, err := c.do(ctx, http.MethodGet, "/api/v1/workers", nil, nil, &body)
	return body.Workers, err
}
