package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/db"
)

// Get returns one job.
func (c *Client) Get(ctx context.Context, id int64) (Job, error) {
	row, err := c.q.JobGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Job{}, ErrNotFound
	}
	if err != nil {
		return Job{}, fmt.Errorf("reading job: %w", err)
	}
	return toJob(row), nil
}

// Detail returns a job with its attempts and events.
func (c *Client) Detail(ctx context.Context, id int64) (JobDetail, error) {
	return c.detail(ctx, id, func() ([]Event, error) {
		events, err := c.q.EventListByJob(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("reading events: %w", err)
		}
		out := make([]Event, 0, len(events))
		for _, e := range events {
			out = append(out, Event{At: e.At, Type: e.Type, Attempt: e.Attempt, Detail: e.Detail})
		}
		return out, nil
	})
}

// DetailRecent is Detail for a page: of the timeline only the newest max
// entries (in time order), each string of their details cut to chars
// characters by the database, and total, how many entries there are. An
// attempt's 200 progress messages of 64 KB, or a timeline of thousands,
// cost the page what it shows.
func (c *Client) DetailRecent(ctx context.Context, id int64, max, chars int) (d JobDetail, total int64, err error) {
	d, err = c.detail(ctx, id, func() ([]Event, error) {
		events, err := c.q.EventListByJobRecent(ctx, db.EventListByJobRecentParams{JobID: id, Max: int32(max), Chars: int32(chars)})
		if err != nil {
			return nil, fmt.Errorf("reading events: %w", err)
		}
		out := make([]Event, len(events))
		for i, e := range events { // newest first: turned to time order
			out[len(events)-1-i] = Event{At: e.At, Type: e.Type, Attempt: e.Attempt, Detail: e.Detail}
		}
		if total, err = c.q.EventCountByJob(ctx, id); err != nil {
			return nil, fmt.Errorf("counting events: %w", err)
		}
		return out, nil
	})
	return d, total, err
}

// ProgressBefore is the message of screenshot shot's replay step (see
// ReplayStep) read alone: the latest progress event of its attempt of
// its Step, or else at or before its time; "" for none.
func (c *Client) ProgressBefore(ctx context.Context, shot Artifact) (string, error) {
	m, err := c.q.EventProgressBefore(ctx, db.EventProgressBeforeParams{JobID: shot.JobID, Attempt: shot.Attempt, At: shot.CreatedAt, Step: shot.Step})
	if err != nil {
		return "", fmt.Errorf("reading a step's message: %w", err)
	}
	return m, nil
}

func (c *Client) detail(ctx context.Context, id int64, events func() ([]Event, error)) (JobDetail, error) {
	job, err := c.Get(ctx, id)
	if err != nil {
		return JobDetail{}, err
	}
	d := JobDetail{Job: job, Attempts: []Attempt{}, Events: []Event{}}
	attempts, err := c.q.AttemptListByJob(ctx, id)
	if err != nil {
		return JobDetail{}, fmt.Errorf("reading attempts: %w", err)
	}
	for _, a := range attempts {
		var outcome *string
		if a.Outcome != nil {
			outcome = ptr(string(*a.Outcome))
		}
		d.Attempts = append(d.Attempts, Attempt{
			Number: a.Number, WorkerID: a.WorkerID, LeaseToken: a.LeaseToken, StartedAt: a.StartedAt,
			HeartbeatAt: a.HeartbeatAt, LeaseUntil: a.LeaseUntil, EndedAt: a.EndedAt, Outcome: outcome, Error: a.Error,
		})
	}
	if d.Events, err = events(); err != nil {
		return JobDetail{}, err
	}
	if d.Artifacts, err = c.artifacts(ctx, id); err != nil {
		return JobDetail{}, err
	}
	if d.Effects, err = c.effects(ctx, id); err != nil {
		return JobDetail{}, err
	}
	if d.Usage, err = c.usage(ctx, id); err != nil {
		return JobDetail{}, err
	}
	return d, nil
}

// Filter selects jobs for listing and bulk actions. Zero fields match all.
type Filter struct {
	State State
	Kind  string
	Queue string
	App   string
	IDs   []int64
	// Text, when set, is searched for (Search) in the job's app,
	// payload, last error and result; CheckSearch says what it may be.
	Text string
	// FailureGroup, when set, lists the dead letters of that failure
	// group: State must be empty or dead, and Text empty.
	FailureGroup int64
}

// List returns up to limit jobs matching f, newest first, older than
// before (0: from the newest). next is the cursor of the following page, or
// nil on the last one.
func (c *Client) List(ctx context.Context, f Filter, before int64, limit int) (jobs []Job, next *int64, err error) {
	if f.FailureGroup != 0 {
		return c.listDeadInGroup(ctx, f, before, limit)
	}
	if f.Text != "" {
		return c.search(ctx, f, before, limit)
	}
	params := db.JobListParams{Max: int32(limit + 1), Kind: nonEmpty(f.Kind), Queue: nonEmpty(f.Queue), App: nonEmpty(f.App)}
	if f.State != "" {
		params.State = ptr(db.JobState(f.State))
	}
	if before > 0 {
		params.BeforeID = &before
	}
	rows, err := c.q.JobList(ctx, params)
	if err != nil {
		return nil, nil, fmt.Errorf("listing jobs: %w", inputRefused(err, ""))
	}
	if len(rows) > limit {
		rows = rows[:limit]
		next = &rows[limit-1].ID
	}
	return toJobs(rows), next, nil
}

// Counts is the number of jobs per state, and running totals.
type Counts struct {
	Jobs        map[State]int64
	Claims      int64
	Completions int64
	Expired     int64
	Refused     int64
}

// Counts reads the maintained counters: exact, without scanning jobs.
func (c *Client) Counts(ctx context.Context) (Counts, error) {
	r, err := c.q.JobCounts(ctx)
	if err != nil {
		return Counts{}, fmt.Errorf("reading counts: %w", err)
	}
	return Counts{
		Jobs: map[State]int64{
			StatePending: r.Pending, StateRunning: r.Running, StateSucceeded: r.Succeeded,
			StateDead: r.Dead, StateCancelled: r.Cancelled,
		},
		Claims: r.ClaimsTotal, Completions: r.CompletionsTotal, Expired: r.ExpiredTotal, Refused: r.RefusedTotal,
	}, nil
}

// Worker is a worker process as last seen.
type Worker struct {
	ID       string
	LastSeen time.Time
	Device   *string
	Queues   []string
	Running  int64
}

// Workers lists the workers seen within the last window, by the database
// clock.
func (c *Client) Workers(ctx context.Context, window time.Duration) ([]Worker, error) {
	rows, err := c.q.WorkerListRecent(ctx, window.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("listing workers: %w", err)
	}
	ws := make([]Worker, len(rows))
	for i, r := range rows {
		ws[i] = Worker{ID: r.ID, LastSeen: r.LastSeen, Device: r.Device, Queues: r.Queues, Running: r.Running}
	}
	return ws, nil
}

// listDeadInGroup is List for a filter with a FailureGroup.
func (c *Client) listDeadInGroup(ctx context.Context, f Filter, before int64, limit int) (jobs []Job, next *int64, err error) {
	switch {
	case f.State != "" && f.State != StateDead:
		return nil, nil, invalid("state", "a failure group lists dead letters: leave state out or make it dead")
	case f.Text != "":
		return nil, nil, invalid("q", "search within a failure group is not supported: leave one of them out")
	}
	rows, err := c.q.JobListDeadInGroup(ctx, db.JobListDeadInGroupParams{
		FailureGroup: f.FailureGroup, BeforeID: before, Max: int32(limit + 1),
		Kind: nonEmpty(f.Kind), Queue: nonEmpty(f.Queue), App: nonEmpty(f.App),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("listing dead letters of a failure group: %w", inputRefused(err, ""))
	}
	if len(rows) > limit {
		rows = rows[:limit]
		next = &rows[limit-1].ID
	}
	return toJobs(rows), next, nil
}
