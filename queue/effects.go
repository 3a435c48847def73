package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/db"
)

var effectKeyPattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)

// Effect is an external action recorded in a job's side-effect ledger.
type Effect struct {
	Key       string
	Attempt   int32
	State     string // started or done
	Result    json.RawMessage
	CreatedAt time.Time
}

// EffectStart tells the holder of a lease whether to perform an effect.
type EffectStart struct {
	// Done means an earlier attempt recorded the effect: do not perform it
	// again; Result is what it recorded.
	Done   bool
	Result json.RawMessage
	// IdempotencyKey goes with the external call (an Idempotency-Key
	// header, say), so that its receiver can drop a repeat: the one repeat
	// the ledger cannot prevent is a crash between the call and FinishEffect.
	IdempotencyKey string
}

// IdempotencyKey is the key an effect's external call carries: unique to
// the job and the effect, the same for every attempt.
func IdempotencyKey(jobID int64, key string) string {
	return fmt.Sprintf("%d:%s", jobID, key)
}

// StartEffect asks the ledger whether l's attempt may perform the effect
// key, and marks it started. ErrLeaseLost when l is not current.
func (c *Client) StartEffect(ctx context.Context, l Lease, key string) (EffectStart, error) {
	if !effectKeyPattern.MatchString(key) {
		return EffectStart{}, invalid("key", "must match [A-Za-z0-9_.:-]{1,128}")
	}
	start := EffectStart{IdempotencyKey: IdempotencyKey(l.JobID, key)}
	_, err := c.q.EffectStart(ctx, db.EffectStartParams{JobID: l.JobID, LeaseToken: l.Token, WorkerID: l.WorkerID, Key: key})
	if err == nil {
		return start, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return EffectStart{}, fmt.Errorf("starting effect: %w", err)
	}
	existing, err := c.q.EffectGet(ctx, db.EffectGetParams{JobID: l.JobID, Key: key})
	if err == nil && existing.State == "done" {
		start.Done, start.Result = true, existing.Result
		return start, nil
	}
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return EffectStart{}, fmt.Errorf("reading effect: %w", err)
	}
	return EffectStart{}, c.refused(ctx, "effect_start", l)
}

// ErrEffectNotStarted means FinishEffect named an effect that l's attempt
// did not start: a bug in the caller, not a lost lease (HTTP 400).
var ErrEffectNotStarted = &ValidationError{Field: "key", Message: "effect not started"}

// FinishEffect records the effect key as done with result. Only the
// current holder of the lease that started it can; finishing it again
// with the same lease (a retry whose first answer was lost) succeeds.
func (c *Client) FinishEffect(ctx context.Context, l Lease, key string, result json.RawMessage) error {
	if !effectKeyPattern.MatchString(key) {
		return invalid("key", "must match [A-Za-z0-9_.:-]{1,128}")
	}
	if err := CheckResult(result); err != nil {
		return err
	}
	if len(result) == 0 || string(result) == "null" {
		result = json.RawMessage(`{}`)
	}
	row, err := c.q.EffectFinish(ctx, db.EffectFinishParams{
		JobID: l.JobID, LeaseToken: l.Token, WorkerID: l.WorkerID, Key: key, Result: result,
	})
	switch {
	case err != nil:
		return fmt.Errorf("finishing effect: %w", err)
	case row.Finished:
		return nil
	case !row.LeaseCurrent:
		return c.refused(ctx, "effect_finish", l)
	case row.PriorState == "done" && row.PriorToken == l.Token:
		return nil
	default:
		return ErrEffectNotStarted
	}
}

func (c *Client) effects(ctx context.Context, jobID int64) ([]Effect, error) {
	rows, err := c.q.EffectListByJob(ctx, jobID)
	if err != nil {
		return nil, fmt.Errorf("reading effects: %w", err)
	}
	out := make([]Effect, len(rows))
	for i, r := range rows {
		out[i] = Effect{Key: r.Key, Attempt: r.Attempt, State: r.State, Result: r.Result, CreatedAt: r.CreatedAt}
	}
	return out, nil
}
