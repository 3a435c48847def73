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
	type item struct {
		ID         int64           `json:"id"`
		LeaseToken int64           `json:"lease_token"`
		WorkerID   string          `json:"worker_id"`
		Result     json.RawMessage `json:"result"`
	}
	errs := make([]error, len(cs))
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
		return errs, nil
	}
	encoded, err := json.Marshal(items)
	if err != nil {
		return nil, fmt.Errorf("encoding completions: %w", err)
	}
	rows, err := c.q.JobCompleteMany(ctx, db.JobCompleteManyParams{Completions: encoded, Now: c.now})
	if err != nil {
		return nil, fmt.Errorf("completing jobs: %w", err)
	}
	done := make(map[Lease]bool, len(rows))
	for _, r := range rows {
		done[Lease{JobID: r.ID, Token: r.LeaseToken, WorkerID: derefOr(r.LeaseOwner)}] = true
	}
	for i, cm := range cs {
		if errs[i] == nil && !done[cm.Lease] {
			_, errs[i] = c.completedBefore(ctx, cm)
		}
	}
	return errs, nil
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
