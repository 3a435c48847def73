package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/db"
)

// Lease bounds, for every kind of worker: a claim asks for a lease within
// [MinLease, MaxLease] or is refused (the jobs table's lease_ms check
// repeats them, as a last line). DefaultLease is what a worker asks for
// unless told otherwise.
const (
	MinLease     = 100 * time.Millisecond
	MaxLease     = time.Hour
	DefaultLease = 30 * time.Second
)

// ClampLease is lease within the bounds; zero means DefaultLease.
func ClampLease(lease time.Duration) time.Duration {
	if lease == 0 {
		return DefaultLease
	}
	return min(max(lease, MinLease), MaxLease)
}

// ClaimParams says who claims what.
type ClaimParams struct {
	WorkerID string
	Queues   []string
	// Devices are the worker's labels; jobs naming a device go only to a
	// worker that has it.
	Devices []string
	Limit   int
	// Lease is the lease each job gets; zero is DefaultLease.
	Lease time.Duration
	// Handover, when positive, hands the jobs over (SPEC lease rule 11):
	// the claim of a worker that is not in this process, whose answer
	// may never reach it. Each lease then runs only this long (never
	// longer than Lease) until the worker confirms the job with its
	// first heartbeat, which gives the full lease, or with its outcome.
	// A hand-over never confirmed ends not_delivered: it does not count,
	// and the job is due again at once. Zero for a direct claim.
	Handover time.Duration
	// TokenID, when not zero, is the worker token a remote claim comes
	// with: the claim statement takes nothing once that token is revoked,
	// even a revoke that commits while the claim runs (see JobClaim), and
	// Claim then answers ErrTokenRevoked. Zero for a direct claim.
	TokenID int64
}

// Hand-over deadlines (ClaimParams.Handover): a server's is within
// [MinHandover, MaxHandover], DefaultHandover unless configured. Long
// enough for a worker's heartbeat to cross a slow network, short next to
// a lease: a job nobody received waits this long to be claimed again.
const (
	MinHandover     = 500 * time.Millisecond
	MaxHandover     = time.Minute
	DefaultHandover = 5 * time.Second
)

// CheckHandover refuses a hand-over deadline outside [MinHandover,
// MaxHandover].
func CheckHandover(d time.Duration) error {
	if d < MinHandover || d > MaxHandover {
		return fmt.Errorf("hand-over deadline %s: must be between %s and %s", d, MinHandover, MaxHandover)
	}
	return nil
}

// Bounds of one claim statement, for a direct and a remote worker alike
// (the worker API also bounds its answer: api.MaxClaimLimit).
const (
	// MaxClaimLimit is the most jobs one claim may take: a worker with
	// more free slots takes this many and claims again. A direct worker
	// draining short jobs claims all its free slots at once, so a lower
	// bound would cost it a transaction per hundred jobs.
	MaxClaimLimit = 1000
	// MaxClaimQueues is the most queues one claim may name.
	MaxClaimQueues = 100
)

// CheckClaim checks p as Claim does: one to MaxClaimQueues queue names,
// a limit of 1 to MaxClaimLimit, a lease within [MinLease, MaxLease] (or
// zero), and valid device labels. It returns a *ValidationError naming
// the field as the worker API has it.
func CheckClaim(p ClaimParams) error {
	if len(p.Queues) == 0 || len(p.Queues) > MaxClaimQueues {
		return invalid("queues", "must name 1 to %d queues", MaxClaimQueues)
	}
	for _, q := range p.Queues {
		if !namePattern.MatchString(q) {
			return invalid("queues", "each must match [a-z0-9_.-]{1,64}")
		}
	}
	if p.Limit < 1 || p.Limit > MaxClaimLimit {
		return invalid("limit", "must be between 1 and %d", MaxClaimLimit)
	}
	if p.Lease != 0 && (p.Lease < MinLease || p.Lease > MaxLease) {
		return invalid("lease_ms", "must be between %d and %d", MinLease.Milliseconds(), MaxLease.Milliseconds())
	}
	return checkDevices(p.Devices)
}

// Claim takes up to p.Limit due jobs, each with a new attempt and fencing
// token, the lease deadline set by the database clock. A p that
// CheckClaim refuses is its error, and nothing is claimed.
func (c *Client) Claim(ctx context.Context, p ClaimParams) ([]Job, error) {
	if err := CheckClaim(p); err != nil {
		return nil, err
	}
	jobs, err := c.claim(ctx, p)
	if err == nil && len(jobs) == 0 && p.TokenID != 0 {
		// Nothing, perhaps because the token was revoked: a long poll
		// must end then rather than wait on for jobs it cannot take.
		active, aerr := c.q.TokenActive(ctx, p.TokenID)
		if aerr != nil {
			return nil, fmt.Errorf("checking the worker token: %w", aerr)
		}
		if !active {
			return nil, ErrTokenRevoked
		}
	}
	return jobs, err
}

func (c *Client) claim(ctx context.Context, p ClaimParams) ([]Job, error) {
	lease := ClampLease(p.Lease)
	var jobs []Job
	ratedKnown := c.rated.known(p)
	if ratedKnown {
		// Jobs that name rate-limit keys first, while there are any, as
		// limited ones (below): after the others they would wait for as
		// long as others remain.
		rated, found, err := c.claimRated(ctx, p, p.Limit, lease)
		if err != nil {
			return nil, err
		}
		c.rated.set(p, found)
		jobs = rated
		if len(jobs) == p.Limit {
			return jobs, nil
		}
	}
	more, rated, err := c.claimUnrated(ctx, p, p.Limit-len(jobs), lease)
	jobs = append(jobs, more...)
	if err != nil || !rated || ratedKnown {
		return jobs, err
	}
	if len(jobs) == p.Limit {
		c.rated.set(p, true)
		return jobs, nil
	}
	// The fast or limited claim found rate-limited jobs due: claim them
	// now, and first from now on while there are.
	more, found, err := c.claimRated(ctx, p, p.Limit-len(jobs), lease)
	c.rated.set(p, found)
	return append(jobs, more...), err
}

// claimUnrated claims up to limit jobs that name no rate-limit key. rated
// reports that rate-limited jobs are due (a probe of the fast claim's, or
// of the limited claim's).
func (c *Client) claimUnrated(ctx context.Context, p ClaimParams, limit int, lease time.Duration) (jobs []Job, rated bool, err error) {
	if c.limits.known(p) {
		// Limited jobs first, while there are any: they are few at a time
		// (their limits say how few), and after the free ones they would
		// wait for as long as free jobs remain.
		// The free jobs for the room left are claimed in the same
		// transaction.
		jobs, found, rated, err := c.claimLimited(ctx, p, limit, lease, true)
		if err != nil {
			return nil, false, err
		}
		c.limits.set(p, found)
		return jobs, rated, nil
	}
	// The fast path, and in the same round trip and transaction whether
	// any limit applies to these queues (two probes of nearly empty
	// indexes when none does), and whether rate-limited jobs are due (a
	// third).
	rows, anyLimited, rated, err := db.JobClaimAndLimits(ctx, c.pool, c.claimParams(p, limit, lease))
	if err != nil {
		return nil, false, fmt.Errorf("claiming jobs: %w", err)
	}
	jobs = toJobs(rows)
	c.limits.set(p, anyLimited)
	if !anyLimited || len(jobs) == limit {
		return jobs, rated, nil
	}
	more, _, _, err := c.claimLimited(ctx, p, limit-len(jobs), lease, false)
	return append(jobs, more...), rated, err
}

func (c *Client) claimParams(p ClaimParams, limit int, lease time.Duration) db.JobClaimParams {
	return db.JobClaimParams{
		Queues: p.Queues, Devices: append([]string{}, p.Devices...), Max: int32(limit),
		WorkerID: p.WorkerID, LeaseMs: int32(lease / time.Millisecond), WakeBelowMs: int32(reaperMaxSleep / time.Millisecond),
		HandoverMs: handoverMs(p.Handover, lease), Now: c.now, TokenID: tokenID(p),
	}
}

// tokenID is p's worker token as the claim statements take it: NULL for
// a direct claim, which no token gates.
func tokenID(p ClaimParams) *int64 {
	if p.TokenID == 0 {
		return nil
	}
	return &p.TokenID
}

// handoverMs is a claim's hand-over deadline as the claim statements take
// it: nil for none (a direct claim), never more than the lease.
func handoverMs(handover, lease time.Duration) *int32 {
	if handover <= 0 {
		return nil
	}
	ms := int32(max(min(handover, lease), time.Millisecond) / time.Millisecond)
	return &ms
}

// HeartbeatResult is what a renewed lease tells its worker.
type HeartbeatResult struct {
	LeaseUntil      time.Time
	CancelRequested bool
	// Remaining is how long the lease has left by the database clock.
	Remaining time.Duration
}

// Heartbeat extends l's lease. ErrLeaseLost means the worker must stop the
// job now: the token is stale, the job no longer runs, or the deadline
// passed.
func (c *Client) Heartbeat(ctx context.Context, l Lease) (HeartbeatResult, error) {
	row, err := c.q.JobHeartbeat(ctx, db.JobHeartbeatParams{ID: l.JobID, LeaseToken: l.Token, WorkerID: l.WorkerID, Now: c.now})
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
	errs, err := c.CompleteMany(ctx, []Completion{{Lease: l, Result: result}})
	if err != nil {
		return Job{}, err
	}
	if errs[0] != nil {
		return Job{}, errs[0]
	}
	// The batch statement answers which completions it took, not the
	// jobs (at thousands a second, reading back whole rows nobody looks
	// at is a cost of its own); one job is read back.
	return c.Get(ctx, l.JobID)
}

// Fail ends l's attempt as failed. A retryable failure is retried after
// its backoff while counted attempts remain; otherwise the job goes dead.
// msg must pass CheckText (a worker cleans it with CleanText first).
func (c *Client) Fail(ctx context.Context, l Lease, msg string, retryable bool) (Job, error) {
	if err := CheckText("error", msg, maxMessageBytes); err != nil {
		return Job{}, err
	}
	row, err := c.q.JobFail(ctx, db.JobFailParams{ID: l.JobID, LeaseToken: l.Token, WorkerID: l.WorkerID, Error: &msg, Retryable: retryable, Now: c.now})
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

// ProgressKept is how many progress events an attempt keeps: a write past
// it deletes the attempt's oldest, and the attempt's one progress_dropped
// event counts them ({"dropped": N, "kept": ProgressKept}), standing on
// the timeline where they were. 200 messages of at most maxMessageBytes
// bound what one attempt's progress costs every read of it.
const ProgressKept = 200

// Progress records an executor's progress on l's job: fraction is in [0, 1]
// (NaN: none given), anything else a *ValidationError, as is a message
// CheckText refuses. The attempt keeps its newest ProgressKept.
func (c *Client) Progress(ctx context.Context, l Lease, fraction float64, message string) error {
	return c.ProgressStep(ctx, l, 0, fraction, message)
}

// MaxStep bounds the step an artifact or a progress report names.
const MaxStep = 1_000_000

// ProgressStep is Progress for the given step of the attempt (1..MaxStep,
// stored as detail.step; 0: none), the step the attempt's artifacts of
// the same number belong to (see ReplaySteps).
func (c *Client) ProgressStep(ctx context.Context, l Lease, step int32, fraction float64, message string) error {
	if step < 0 || step > MaxStep {
		return invalid("step", "must be between 1 and %d", MaxStep)
	}
	if fraction < 0 || fraction > 1 {
		return invalid("progress", "must be between 0 and 1")
	}
	if err := CheckText("message", message, maxMessageBytes); err != nil {
		return err
	}
	event := map[string]any{"message": message}
	if !math.IsNaN(fraction) && !math.IsInf(fraction, 0) {
		event["progress"] = fraction
	}
	if step > 0 {
		event["step"] = step
	}
	detail, err := json.Marshal(event)
	if err != nil {
		return fmt.Errorf("encoding progress: %w", err)
	}
	if step > 0 {
		return c.progressStep(ctx, l, detail)
	}
	_, err = c.q.EventProgress(ctx, db.EventProgressParams{
		JobID: l.JobID, LeaseToken: l.Token, WorkerID: l.WorkerID, Detail: detail, Keep: ProgressKept,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return c.refused(ctx, "progress", l)
	}
	if err != nil {
		return fmt.Errorf("recording progress: %w", err)
	}
	return nil
}

// progressStep records the progress of a step, which counts against the
// job's max_steps (SPEC "Usage and budgets"): the report that reaches it
// ends the attempt failed, permanently, with reason BudgetSpent, and is
// answered ErrBudgetSpent. Steps are counted as reported, over all the
// job's attempts.
//
// One statement, as for any progress, and a second only when the budget
// is spent: the attempt is ended by the fenced fail right after, not in
// one transaction with the count, so that a step of a job without a
// budget costs no more round trips than before. In between, only the
// same lease holder could write; a fail that does not get through is
// an error the worker retries, and the retry finds the budget spent.
func (c *Client) progressStep(ctx context.Context, l Lease, detail []byte) error {
	row, err := c.q.EventProgressStep(ctx, db.EventProgressStepParams{
		JobID: l.JobID, LeaseToken: l.Token, WorkerID: l.WorkerID, Detail: detail, Keep: ProgressKept,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return c.refused(ctx, "progress", l)
	}
	if err != nil {
		return fmt.Errorf("recording progress: %w", err)
	}
	if !row.Spent {
		return nil
	}
	if err := c.spend(ctx, c.q, l); err != nil {
		return err
	}
	c.logger.Info("budget spent: attempt ended", "job_id", l.JobID, "token", l.Token, "by", "steps")
	return ErrBudgetSpent
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
