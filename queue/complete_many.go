package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/leasehold/leasehold/db"
)

// ErrResultConflict means the attempt was completed already, under the
// same lease, with a different result: the first result stands.
var ErrResultConflict = errors.New("the job was completed already with a different result")

// Completion is one attempt's success, for CompleteMany.
type Completion struct {
	Lease  Lease
	Result json.RawMessage
}

// CompleteMany completes a batch of attempts in one statement, fenced one
// by one exactly as Complete. It returns an error per completion: nil,
// ErrLeaseLost, ErrNotFound, ErrResultConflict, or a *ValidationError for a result that
// CheckResult refuses (that attempt is left running, for the worker to
// fail it with the reason). A worker finishing many short jobs commits
// once per batch instead of once per job.
func (c *Client) CompleteMany(ctx context.Context, cs []Completion) ([]error, error) {
	errs, encoded, err := completionBatch(cs)
	if err != nil || encoded == nil {
		return errs, err
	}
	rows, err := c.q.JobCompleteMany(ctx, db.JobCompleteManyParams{Completions: encoded, Now: c.now})
	if err != nil {
		return nil, fmt.Errorf("completing jobs: %w", err)
	}
	c.completedOrRefused(ctx, cs, errs, rows)
	return errs, nil
}

// completionBatch checks each completion's result and encodes the others
// for JobCompleteMany: an error per completion (nil for those encoded),
// and nil for encoded when none is left.
func completionBatch(cs []Completion) (errs []error, encoded []byte, err error) {
	type item struct {
		ID         int64           `json:"id"`
		LeaseToken int64           `json:"lease_token"`
		WorkerID   string          `json:"worker_id"`
		Result     json.RawMessage `json:"result"`
	}
	errs = make([]error, len(cs))
	items := make([]item, 0, len(cs))
	for i, cm := range cs {
		if errs[i] = CheckResult(cm.Result); errs[i] != nil {
			continue
		}
		it := item{ID: cm.Lease.JobID, LeaseToken: cm.Lease.Token, WorkerID: cm.Lease.WorkerID, Result: cm.Result}
		if len(it.Result) == 0 || string(it.Result) == "null" {
			it.Result = json.RawMessage(`{}`)
		}
		items = append(items, it)
	}
	if len(items) == 0 {
		return errs, nil, nil
	}
	encoded, err = json.Marshal(items)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding completions: %w", err)
	}
	return errs, encoded, nil
}

// completedOrRefused sets errs for the completions of cs that are not
// among rows, the leases a batch took: a repeat of an earlier success, or
// a refused write (completedBefore).
func (c *Client) completedOrRefused(ctx context.Context, cs []Completion, errs []error, rows []db.JobCompleteManyRow) {
	done := make(map[Lease]bool, len(rows))
	for _, r := range rows {
		done[Lease{JobID: r.ID, Token: r.LeaseToken, WorkerID: derefOr(r.LeaseOwner)}] = true
	}
	for i, cm := range cs {
		if errs[i] == nil && !done[cm.Lease] {
			_, errs[i] = c.completedBefore(ctx, cm)
		}
	}
}

// CompleteManyThenClaim completes cs as CompleteMany does and, in the same
// transaction, claims for p as a limited claim does (the limits first,
// then free jobs for the room left; never rate-limited ones): the room the
// completions free under a cap or a key is taken at once, with one commit
// for both instead of a completion, a notification, a wake and a claim.
// The limits stay exact: the claim counts what runs under them after the
// completions, under the same locks as every limited claim. It takes
// nothing when another claimer holds a limit (it does not retry), and
// nothing is written when it fails: the caller writes the completions
// again, and claims on its own. While no limit applied at p's last claim
// it only completes.
func (c *Client) CompleteManyThenClaim(ctx context.Context, cs []Completion, p ClaimParams) ([]error, []Job, error) {
	if err := CheckClaim(p); err != nil {
		return nil, nil, err
	}
	if !c.limits.known(p) {
		// No limit applied at p's last claim: nothing waits for the room
		// these completions free, and a claim would only find the queues
		// as the last one left them.
		errs, err := c.CompleteMany(ctx, cs)
		return errs, nil, err
	}
	errs, encoded, err := completionBatch(cs)
	if err != nil {
		return nil, nil, err
	}
	if encoded == nil {
		return errs, nil, nil
	}
	var rows []db.JobCompleteManyRow
	once, err := c.claimLimitedOnce(ctx, p, p.Limit, ClampLease(p.Lease), true, true,
		&db.JobCompleteManyParams{Completions: encoded, Now: c.now, Quiet: true}, &rows)
	if err != nil {
		return nil, nil, err
	}
	c.limits.set(p, once.limits > 0)
	c.completedOrRefused(ctx, cs, errs, rows)
	return errs, once.jobs, nil
}

func derefOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// completedBefore answers a completion the fence refused: a repeat of one
// that succeeded under the same lease (a retry after its answer was lost)
// gets the job if its result is the same, ErrResultConflict if not;
// anything else is a refused write.
func (c *Client) completedBefore(ctx context.Context, cm Completion) (Job, error) {
	l := cm.Lease
	job, err := c.Get(ctx, l.JobID)
	if err == nil && job.State == StateSucceeded && job.LeaseToken == l.Token &&
		job.LeaseOwner != nil && *job.LeaseOwner == l.WorkerID {
		if !sameResult(job.Result, cm.Result) {
			return Job{}, ErrResultConflict
		}
		return job, nil
	}
	return Job{}, c.refused(ctx, "complete", l)
}

// sameResult reports whether a stored result (jsonb: keys reordered,
// spaces dropped) is the one sent; none or null is the empty object.
func sameResult(stored, sent json.RawMessage) bool {
	if len(sent) == 0 || string(sent) == "null" {
		sent = json.RawMessage(`{}`)
	}
	var a, b any
	if json.Unmarshal(stored, &a) != nil || json.Unmarshal(sent, &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}
