package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/db"
)

// FailureGroup is one cause of failure (SPEC "Search and failure
// groups"): failed attempts whose errors are the same once numbers, ids,
// times and paths are masked (Signature), and whose last screenshots, if
// they took any, show the same screen (ScreenHash within
// screenhash.Similar). An attempt joins its group when it ends; a job's
// dead letter belongs to the group of its last failure.
type FailureGroup struct {
	ID         int64
	Signature  string
	ScreenHash *int64
	// Error, JobID and Attempt are the group's first member as it was:
	// its error unmasked. ScreenshotID is the screenshot the group shows
	// (nil: none, or the group's screens had none).
	Error        string
	JobID        int64
	Attempt      int32
	ScreenshotID *int64
	// Dead is how many dead letters the group holds now; Attempts how
	// many failed attempts it has, ever or, for a Since query, since then.
	// Both are counted up to CountCap: a group with more shows CountCap.
	Dead     int64
	Attempts int64
	// FirstSeen and LastSeen bound its failures (of the window, for a
	// Since query).
	FirstSeen, LastSeen time.Time
	// Apps are up to five of the apps of its latest 200 dead letters (for
	// a Since query, of its latest 200 failed attempts of the window);
	// AppCount how many apps those were.
	Apps     []string
	AppCount int64
}

// MaxFailureGroups bounds one listing of failure groups.
const MaxFailureGroups = 500

// CountCap bounds each count of a group's dead letters and attempts, so
// that listing groups reads at most that many index entries per group
// however many a group holds.
const CountCap = 10_000

// FailureGroupQuery picks failure groups to list. With Since zero, the
// groups that hold dead letters; with Since, every group with a failed
// attempt since then, dead letters or not. The one seen last comes
// first. Limit is 1 to MaxFailureGroups.
type FailureGroupQuery struct {
	Since time.Time
	Limit int
}

// FailureGroups lists failure groups as q asks. Each group's figures are
// bounded index ranges; the grouping itself was done when its attempts
// ended.
func (c *Client) FailureGroups(ctx context.Context, q FailureGroupQuery) ([]FailureGroup, error) {
	if q.Limit < 1 || q.Limit > MaxFailureGroups {
		return nil, invalid("limit", "must be between 1 and %d", MaxFailureGroups)
	}
	var rows []db.FailureGroupListDeadRow
	var err error
	if q.Since.IsZero() {
		rows, err = c.q.FailureGroupListDead(ctx, db.FailureGroupListDeadParams{Max: int32(q.Limit), Cap: CountCap})
	} else {
		var recent []db.FailureGroupListRecentRow
		recent, err = c.q.FailureGroupListRecent(ctx, db.FailureGroupListRecentParams{Since: q.Since, Max: int32(q.Limit), Cap: CountCap})
		for _, r := range recent {
			rows = append(rows, db.FailureGroupListDeadRow(r)) // the same columns
		}
	}
	if err != nil {
		return nil, fmt.Errorf("listing failure groups: %w", inputRefused(err, ""))
	}
	out := make([]FailureGroup, len(rows))
	for i, r := range rows {
		out[i] = FailureGroup{
			ID: r.ID, Signature: r.Signature, ScreenHash: r.ScreenHash, Error: r.Error, JobID: r.JobID,
			Attempt: r.Attempt, ScreenshotID: r.ScreenshotID, Dead: r.Dead, Attempts: r.Attempts,
			FirstSeen: r.FirstSeen, LastSeen: r.LastSeen, Apps: r.Apps, AppCount: r.AppCount,
		}
	}
	return out, nil
}

// GetFailureGroup returns one group as it was made, without figures;
// ErrNotFound for none.
func (c *Client) GetFailureGroup(ctx context.Context, id int64) (FailureGroup, error) {
	r, err := c.q.FailureGroupGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return FailureGroup{}, ErrNotFound
	}
	if err != nil {
		return FailureGroup{}, fmt.Errorf("reading failure group: %w", err)
	}
	return FailureGroup{
		ID: r.ID, Signature: r.Signature, ScreenHash: r.ScreenHash, Error: r.Error, JobID: r.JobID,
		Attempt: r.Attempt, ScreenshotID: r.ScreenshotID, FirstSeen: r.CreatedAt,
	}, nil
}

// ErrorSignature returns what an error is grouped by: the error with its
// numbers, ids, times and paths masked ("" for none).
func (c *Client) ErrorSignature(ctx context.Context, errorText string) (string, error) {
	s, err := c.q.ErrorSignature(ctx, errorText)
	if err != nil {
		return "", fmt.Errorf("error signature: %w", inputRefused(err, ""))
	}
	return s, nil
}
