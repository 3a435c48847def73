package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/db"
)

// Client runs the lease lifecycle against one database.
type Client struct {
	pool   *pgxpool.Pool
	q      *db.Queries
	logger *slog.Logger
}

// NewClient returns a Client on pool.
func NewClient(pool *pgxpool.Pool, logger *slog.Logger) *Client {
	if logger == nil {
		logger = slog.Default()
	}
	return &Client{pool: pool, q: db.New(pool), logger: logger}
}

// Insert submits one job. When its idempotency key is already taken by the
// same job, it returns that job with existed=true; by a different job,
// ErrIdempotencyConflict.
func (c *Client) Insert(ctx context.Context, nj NewJob) (job Job, existed bool, err error) {
	if err := nj.Normalize(); err != nil {
		return Job{}, false, err
	}
	row, err := c.q.JobInsert(ctx, db.JobInsertParams{
		Kind: nj.Kind, Queue: nj.Queue, Priority: nj.Priority, Payload: nj.Payload,
		App: nj.app, Device: nj.device, MaxAttempts: *nj.MaxAttempts, RunAt: nj.RunAt,
		TimeoutMs: nj.TimeoutMs, IdempotencyKey: nj.IdempotencyKey,
		BackoffBaseMs: *nj.BackoffBaseMs, BackoffMaxMs: *nj.BackoffMaxMs,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		// ON CONFLICT DO NOTHING waited for the other insert to commit,
		// so this statement sees the job that holds the key.
		existing, err := c.q.JobGetByIdempotencyKeys(ctx, []string{*nj.IdempotencyKey})
		if err != nil || len(existing) == 0 {
			return Job{}, false, fmt.Errorf("reading job by idempotency key: %w", errors.Join(err, ErrNotFound))
		}
		j := toJob(existing[0])
		if !sameJob(j, nj) {
			return j, true, ErrIdempotencyConflict
		}
		return j, true, nil
	}
	if err != nil {
		return Job{}, false, fmt.Errorf("inserting job: %w", inputRefused(err, ""))
	}
	job = toJob(row)
	c.notifyJobs(ctx, []string{job.Queue})
	return job, false, nil
}

type batchJob struct {
	Kind           string          `json:"kind"`
	Queue          string          `json:"queue"`
	Priority       int32           `json:"priority"`
	Payload        json.RawMessage `json:"payload"`
	App            *string         `json:"app"`
	Device         *string         `json:"device"`
	MaxAttempts    int32           `json:"max_attempts"`
	RunAt          *time.Time      `json:"run_at"`
	TimeoutMs      *int32          `json:"timeout_ms"`
	IdempotencyKey *string         `json:"idempotency_key"`
	BackoffBaseMs  int32           `json:"backoff_base_ms"`
	BackoffMaxMs   int32           `json:"backoff_max_ms"`
}

// InsertMany submits up to MaxBatch jobs in one statement: all of them or,
// when one is invalid or conflicts with an idempotency key, none. Jobs whose
// key names an identical existing job come back as that job.
func (c *Client) InsertMany(ctx context.Context, njs []NewJob) ([]Job, error) {
	if len(njs) == 0 || len(njs) > MaxBatch {
		return nil, invalid("jobs", "must hold 1 to %d jobs", MaxBatch)
	}
	batch := make([]batchJob, len(njs))
	var keys []string
	queues := map[string]bool{}
	for i := range njs {
		nj := &njs[i]
		if err := nj.Normalize(); err != nil {
			var ve *ValidationError
			errors.As(err, &ve)
			return nil, invalid(fmt.Sprintf("jobs[%d].%s", i, ve.Field), "%s", ve.Message)
		}
		batch[i] = batchJob{
			Kind: nj.Kind, Queue: nj.Queue, Priority: nj.Priority, Payload: nj.Payload,
			App: nj.app, Device: nj.device, MaxAttempts: *nj.MaxAttempts, RunAt: nj.RunAt,
			TimeoutMs: nj.TimeoutMs, IdempotencyKey: nj.IdempotencyKey,
			BackoffBaseMs: *nj.BackoffBaseMs, BackoffMaxMs: *nj.BackoffMaxMs,
		}
		if nj.IdempotencyKey != nil {
			keys = append(keys, *nj.IdempotencyKey)
		}
		queues[nj.Queue] = true
	}
	encoded, err := json.Marshal(batch)
	if err != nil {
		return nil, fmt.Errorf("encoding batch: %w", err)
	}
	var jobs []Job
	err = pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		q := c.q.WithTx(tx)
		rows, err := q.JobInsertMany(ctx, encoded)
		if err != nil {
			return fmt.Errorf("inserting batch: %w", inputRefused(err, "jobs"))
		}
		inserted := toJobs(rows)
		if len(inserted) == len(njs) {
			jobs = inserted
			return nil
		}
		existing, err := q.JobGetByIdempotencyKeys(ctx, keys)
		if err != nil {
			return fmt.Errorf("reading jobs by idempotency key: %w", err)
		}
		byKey := map[string]Job{}
		for _, r := range existing {
			byKey[*r.IdempotencyKey] = toJob(r)
		}
		// Rows come back in input order; match them up again by key.
		jobs = make([]Job, 0, len(njs))
		next := 0
		for i, nj := range njs {
			if next < len(inserted) && (nj.IdempotencyKey == nil ||
				(inserted[next].IdempotencyKey != nil && *inserted[next].IdempotencyKey == *nj.IdempotencyKey)) {
				jobs = append(jobs, inserted[next])
				next++
				continue
			}
			j, ok := byKey[*nj.IdempotencyKey]
			if !ok || !sameJob(j, nj) {
				return fmt.Errorf("jobs[%d]: %w", i, ErrIdempotencyConflict)
			}
			jobs = append(jobs, j)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.notifyJobs(ctx, mapKeys(queues))
	return jobs, nil
}

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
	events, err := c.q.EventListByJob(ctx, id)
	if err != nil {
		return JobDetail{}, fmt.Errorf("reading events: %w", err)
	}
	for _, e := range events {
		d.Events = append(d.Events, Event{At: e.At, Type: e.Type, Attempt: e.Attempt, Detail: e.Detail})
	}
	if d.Artifacts, err = c.artifacts(ctx, id); err != nil {
		return JobDetail{}, err
	}
	if d.Effects, err = c.effects(ctx, id); err != nil {
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
}

// List returns up to limit jobs matching f, newest first, older than
// before (0: from the newest). next is the cursor of the following page, or
// nil on the last one.
func (c *Client) List(ctx context.Context, f Filter, before int64, limit int) (jobs []Job, next *int64, err error) {
	params := db.JobListParams{Max: int32(limit + 1), Kind: nonEmpty(f.Kind), Queue: nonEmpty(f.Queue), App: nonEmpty(f.App)}
	if f.State != "" {
		params.State = ptr(db.JobState(f.State))
	}
	if before > 0 {
		params.BeforeID = &before
	}
	rows, err := c.q.JobList(ctx, params)
	if err != nil {
		return nil, nil, fmt.Errorf("listing jobs: %w", err)
	}
	if len(rows) > limit {
		rows = rows[:limit]
		next = &rows[limit-1].ID
	}
	return toJobs(rows), next, nil
}

// ClaimParams says who claims what.
type ClaimParams struct {
	WorkerID string
	Queues   []string
	// Devices are the worker's labels; jobs naming a device go only to a
	// worker that has it.
	Devices []string
	Limit   int
	Lease   time.Duration
}

// Claim takes up to p.Limit due jobs, each with a new attempt and fencing
// token, the lease deadline set by the database clock.
func (c *Client) Claim(ctx context.Context, p ClaimParams) ([]Job, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	lease := min(max(p.Lease, MinLease), MaxLease)
	rows, err := c.q.JobClaim(ctx, db.JobClaimParams{
		Queues: p.Queues, Devices: append([]string{}, p.Devices...), Max: int32(p.Limit),
		WorkerID: p.WorkerID, LeaseMs: int32(lease / time.Millisecond), WakeBelowMs: int32(reaperMaxSleep / time.Millisecond),
	})
	if err != nil {
		return nil, fmt.Errorf("claiming jobs: %w", err)
	}
	return toJobs(rows), nil
}

// HeartbeatResult is what a renewed lease tells its worker.
type HeartbeatResult struct {
	LeaseUntil      time.Time `json:"lease_until"`
	CancelRequested bool      `json:"cancel_requested"`
	// Remaining is how long the lease has left by the database clock.
	Remaining time.Duration `json:"-"`
}

// Heartbeat extends l's lease. ErrLeaseLost means the worker must stop the
// job now: the token is stale, the job no longer runs, or the deadline
// passed.
func (c *Client) Heartbeat(ctx context.Context, l Lease) (HeartbeatResult, error) {
	row, err := c.q.JobHeartbeat(ctx, db.JobHeartbeatParams{ID: l.JobID, LeaseToken: l.Token, WorkerID: l.WorkerID})
	if errors.Is(err, pgx.ErrNoRows) {
		return HeartbeatResult{}, c.refused(ctx, "heartbeat", l)
	}
	if err != nil {
		return HeartbeatResult{}, fmt.Errorf("renewing lease: %w", err)
	}
	return HeartbeatResult{
		LeaseUntil: *row.LeaseUntil, CancelRequested: row.CancelRequested,
		Remaining: time.Duration(row.RemainingMs * float64(time.Millisecond)),
	}, nil
}

// Complete ends l's attempt as succeeded with result.
func (c *Client) Complete(ctx context.Context, l Lease, result json.RawMessage) (Job, error) {
	jobs, errs, err := c.completeMany(ctx, []Completion{{Lease: l, Result: result}})
	if err != nil {
		return Job{}, err
	}
	return jobs[0], errs[0]
}

// Fail ends l's attempt as failed. A retryable failure is retried after
// its backoff while counted attempts remain; otherwise the job goes dead.
func (c *Client) Fail(ctx context.Context, l Lease, msg string, retryable bool) (Job, error) {
	msg = cleanText(msg, maxMessageBytes)
	row, err := c.q.JobFail(ctx, db.JobFailParams{ID: l.JobID, LeaseToken: l.Token, WorkerID: l.WorkerID, Error: &msg, Retryable: retryable})
	if errors.Is(err, pgx.ErrNoRows) {
		return Job{}, c.refused(ctx, "fail", l)
	}
	if err != nil {
		return Job{}, fmt.Errorf("failing job: %w", err)
	}
	job := toJob(row)
	if job.State == StatePending {
		if job.BackoffBaseMs == 0 {
			c.notifyJobs(ctx, []string{job.Queue}) // due now
		} else {
			c.wakeReaper(ctx) // it announces the retry when it is due
		}
	}
	return job, nil
}

// Release gives l's job back without counting the attempt (graceful
// shutdown): it is due again at once.
func (c *Client) Release(ctx context.Context, l Lease) (Job, error) {
	return c.stop(ctx, l, db.AttemptOutcomeReleased)
}

// AckCancel ends l's attempt as cancelled after the worker stopped it on
// a cancel request.
func (c *Client) AckCancel(ctx context.Context, l Lease) (Job, error) {
	return c.stop(ctx, l, db.AttemptOutcomeCancelled)
}

func (c *Client) stop(ctx context.Context, l Lease, outcome db.AttemptOutcome) (Job, error) {
	row, err := c.q.JobStop(ctx, db.JobStopParams{ID: l.JobID, LeaseToken: l.Token, WorkerID: l.WorkerID, Outcome: outcome})
	if errors.Is(err, pgx.ErrNoRows) {
		return Job{}, c.refused(ctx, string(outcome), l)
	}
	if err != nil {
		return Job{}, fmt.Errorf("stopping job: %w", err)
	}
	job := toJob(row)
	if job.State == StatePending {
		c.notifyJobs(ctx, []string{job.Queue})
	}
	return job, nil
}

// Progress records an executor's progress on l's job.
func (c *Client) Progress(ctx context.Context, l Lease, fraction float64, message string) error {
	event := map[string]any{"message": cleanText(message, maxMessageBytes)}
	if !math.IsNaN(fraction) && !math.IsInf(fraction, 0) {
		event["progress"] = fraction
	}
	detail, err := json.Marshal(event)
	if err != nil {
		return fmt.Errorf("encoding progress: %w", err)
	}
	_, err = c.q.EventProgress(ctx, db.EventProgressParams{JobID: l.JobID, LeaseToken: l.Token, WorkerID: l.WorkerID, Detail: detail})
	if errors.Is(err, pgx.ErrNoRows) {
		return c.refused(ctx, "progress", l)
	}
	if err != nil {
		return fmt.Errorf("recording progress: %w", err)
	}
	return nil
}

// refused records a refused write on the job's timeline and returns
// ErrLeaseLost, or ErrNotFound when there is no such job.
func (c *Client) refused(ctx context.Context, op string, l Lease) error {
	found, err := c.q.EventStaleWrite(ctx, db.EventStaleWriteParams{
		JobID: l.JobID, LeaseToken: l.Token, Op: op, WorkerID: l.WorkerID,
	})
	if err != nil {
		c.logger.Warn("recording refused write", "job_id", l.JobID, "token", l.Token, "err", err)
		return ErrLeaseLost
	}
	if !found {
		return ErrNotFound
	}
	c.logger.Info("refused stale write", "op", op, "job_id", l.JobID, "token", l.Token, "worker", l.WorkerID)
	return ErrLeaseLost
}

// Cancel cancels the pending jobs that f selects and asks the running ones
// to stop. It returns the jobs it changed.
func (c *Client) Cancel(ctx context.Context, f Filter, actor string) ([]Job, error) {
	p := db.JobCancelParams{Ids: f.IDs, Kind: nonEmpty(f.Kind), Queue: nonEmpty(f.Queue), Actor: actor}
	if f.State != "" {
		p.State = ptr(db.JobState(f.State))
	}
	rows, err := c.q.JobCancel(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("cancelling jobs: %w", err)
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
		return nil, fmt.Errorf("retrying jobs: %w", err)
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
	ID       string    `json:"id"`
	LastSeen time.Time `json:"last_seen"`
	Device   *string   `json:"device"`
	Queues   []string  `json:"queues"`
	Running  int64     `json:"running"`
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

// WorkerSeen records that a worker is alive.
func (c *Client) WorkerSeen(ctx context.Context, id string, devices, queues []string) error {
	if err := checkDevices(devices); err != nil {
		return err
	}
	var device *string
	if len(devices) > 0 {
		device = ptr(strings.Join(devices, ","))
	}
	if err := c.q.WorkerSeen(ctx, db.WorkerSeenParams{ID: id, Device: device, Queues: queues}); err != nil {
		return fmt.Errorf("recording worker: %w", err)
	}
	return nil
}

// wakeReaper makes the active reaper look at the deadlines again.
func (c *Client) wakeReaper(ctx context.Context) {
	if err := c.q.ReaperWake(ctx); err != nil {
		c.logger.Warn("waking reaper", "err", err)
	}
}

// notifyJobs wakes idle workers of these queues with one notification.
func (c *Client) notifyJobs(ctx context.Context, queues []string) {
	if len(queues) == 0 {
		return
	}
	payload := strings.Join(queues, ",")
	if len(payload) > 7000 {
		payload = "" // too long to name them all: wake everyone
	}
	if err := c.q.JobNotify(ctx, payload); err != nil {
		c.logger.Warn("notifying workers", "err", err)
	}
}

// maxMessageBytes bounds the error and progress messages a job keeps.
const maxMessageBytes = 64 << 10

// cleanText makes a worker's message storable: PostgreSQL text takes no
// NUL and only valid UTF-8. Messages are not refused for it: an executor's
// stderr is what it is, and losing the failure would be worse.
func cleanText(s string, limit int) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
	if len(s) > limit {
		s = strings.ToValidUTF8(s[:limit], "") + "…"
	}
	return s
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func mapKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
