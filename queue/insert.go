package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/audit"
	"github.com/leasehold/leasehold/db"
)

// Insert submits one job. When its idempotency key is already taken by the
// same job, it returns that job with existed=true; by a different job,
// ErrIdempotencyConflict.
//
// The insert runs in a transaction whose COMMIT is sent only while ctx
// lives: a submission whose client gave up (ctx cancelled, or the
// request's deadline passed while the database was frozen) rolls back
// when pgx closes its connection, and cannot become a job after its
// client was told it failed.
func (c *Client) Insert(ctx context.Context, nj NewJob) (job Job, existed bool, err error) {
	if err := nj.Normalize(); err != nil {
		return Job{}, false, err
	}
	err = pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		q := c.q.WithTx(tx)
		job, existed, err = c.insert(ctx, q, nj)
		if err != nil || existed {
			return err
		}
		if err := audit.Write(ctx, q, audit.Entry{Action: "job.submit", Target: "job:" + strconv.FormatInt(job.ID, 10),
			Detail: map[string]any{"kind": job.Kind, "queue": job.Queue, "app": nj.app}}); err != nil {
			return err
		}
		return notifyJobsAtCommit(ctx, q, []string{job.Queue})
	})
	return job, existed, err
}

func (c *Client) insert(ctx context.Context, q *db.Queries, nj NewJob) (Job, bool, error) {
	row, err := q.JobInsert(ctx, db.JobInsertParams{
		Kind: nj.Kind, Queue: nj.Queue, Priority: nj.Priority, Payload: nj.Payload,
		App: nj.app, Device: nj.device, MaxAttempts: *nj.MaxAttempts, RunAt: nj.RunAt,
		TimeoutMs: nj.TimeoutMs, IdempotencyKey: nj.IdempotencyKey,
		BackoffBaseMs: *nj.BackoffBaseMs, BackoffMaxMs: *nj.BackoffMaxMs, Schedule: nj.Schedule,
		ConcurrencyKey: nj.ConcurrencyKey, ConcurrencyLimit: *nj.ConcurrencyLimit,
		MaxCost: nj.MaxCost, MaxSteps: nj.MaxSteps,
		RateLimits: nj.RateLimits,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		// ON CONFLICT DO NOTHING waited for the other insert to commit,
		// so this statement (read committed: a snapshot of its own) sees
		// the job that holds the key.
		existing, err := q.JobGetByIdempotencyKeys(ctx, []string{*nj.IdempotencyKey})
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
	return toJob(row), false, nil
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
	// Keys are at most 200 characters: JSON keeps them exact.
	ConcurrencyKey   *string  `json:"concurrency_key"`
	ConcurrencyLimit int32    `json:"concurrency_limit"`
	MaxCost          *int64   `json:"max_cost"`
	MaxSteps         *int32   `json:"max_steps"`
	RateLimits       []string `json:"rate_limits,omitempty"`
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
			return nil, ve.under(fmt.Sprintf("jobs[%d].", i))
		}
		batch[i] = batchJob{
			Kind: nj.Kind, Queue: nj.Queue, Priority: nj.Priority, Payload: nj.Payload,
			App: nj.app, Device: nj.device, MaxAttempts: *nj.MaxAttempts, RunAt: nj.RunAt,
			TimeoutMs: nj.TimeoutMs, IdempotencyKey: nj.IdempotencyKey,
			BackoffBaseMs: *nj.BackoffBaseMs, BackoffMaxMs: *nj.BackoffMaxMs,
			ConcurrencyKey: nj.ConcurrencyKey, ConcurrencyLimit: *nj.ConcurrencyLimit,
			MaxCost: nj.MaxCost, MaxSteps: nj.MaxSteps,
			RateLimits: nj.RateLimits,
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
		var made []Job
		if err := c.insertBatch(ctx, q, njs, encoded, keys, &jobs, &made); err != nil {
			return err
		}
		if len(made) == 0 {
			return nil
		}
		ids := make([]int64, 0, min(len(made), auditedIDs))
		for _, j := range made[:cap(ids)] {
			ids = append(ids, j.ID)
		}
		if err := audit.Write(ctx, q, audit.Entry{Action: "jobs.submit",
			Detail: map[string]any{"count": len(made), "ids": ids, "queues": mapKeys(queues)}}); err != nil {
			return err
		}
		return notifyJobsAtCommit(ctx, q, mapKeys(queues))
	})
	if err != nil {
		return nil, err
	}
	return jobs, nil
}

// auditedIDs bounds the job ids a bulk action's audit row lists; its
// count is always whole.
const auditedIDs = 100

// insertBatch inserts a batch in q's transaction: jobs is every job of
// the batch in input order (those an idempotency key already named
// included), made the jobs it inserted.
func (c *Client) insertBatch(ctx context.Context, q *db.Queries, njs []NewJob, encoded []byte, keys []string,
	jobs, made *[]Job) error {
	rows, err := q.JobInsertMany(ctx, encoded)
	if err != nil {
		return fmt.Errorf("inserting batch: %w", inputRefused(err, "jobs"))
	}
	inserted := toJobs(rows)
	*made = inserted
	if len(inserted) == len(njs) {
		*jobs = inserted
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
	*jobs = make([]Job, 0, len(njs))
	next := 0
	for i, nj := range njs {
		if next < len(inserted) && (nj.IdempotencyKey == nil ||
			(inserted[next].IdempotencyKey != nil && *inserted[next].IdempotencyKey == *nj.IdempotencyKey)) {
			*jobs = append(*jobs, inserted[next])
			next++
			continue
		}
		j, ok := byKey[*nj.IdempotencyKey]
		if !ok || !sameJob(j, nj) {
			return fmt.Errorf("jobs[%d]: %w", i, ErrIdempotencyConflict)
		}
		*jobs = append(*jobs, j)
	}
	return nil
}
