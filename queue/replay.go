package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/db"
)

// AttemptRecord is one attempt with its artifacts in upload order. Its
// timeline entries, which may be many and large, are read page by page
// with AttemptEvents.
type AttemptRecord struct {
	Attempt   Attempt
	Artifacts []Artifact
}

// ErrNoAttempt means the job exists but has no attempt of that number.
var ErrNoAttempt = errors.New("no such attempt")

// AttemptHistory reads attempt number of job jobID and its artifacts,
// however long the job's whole timeline is. ErrNotFound when there is no
// such job, ErrNoAttempt when the job has no such attempt.
func (c *Client) AttemptHistory(ctx context.Context, jobID int64, number int32) (AttemptRecord, error) {
	a, err := c.q.ReplayAttemptGet(ctx, db.ReplayAttemptGetParams{JobID: jobID, Number: number})
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err := c.Get(ctx, jobID); err != nil {
			return AttemptRecord{}, err
		}
		return AttemptRecord{}, ErrNoAttempt
	}
	if err != nil {
		return AttemptRecord{}, fmt.Errorf("reading attempt: %w", err)
	}
	r := AttemptRecord{
		Attempt: Attempt{
			Number: a.Number, WorkerID: a.WorkerID, LeaseToken: a.LeaseToken, StartedAt: a.StartedAt,
			HeartbeatAt: a.HeartbeatAt, LeaseUntil: a.LeaseUntil, EndedAt: a.EndedAt, Error: a.Error,
		},
		Artifacts: []Artifact{},
	}
	if a.Outcome != nil {
		r.Attempt.Outcome = ptr(string(*a.Outcome))
	}
	artifacts, err := c.q.ReplayArtifactListByAttempt(ctx, db.ReplayArtifactListByAttemptParams{JobID: jobID, Attempt: number})
	if err != nil {
		return AttemptRecord{}, fmt.Errorf("reading the attempt's artifacts: %w", err)
	}
	for _, x := range artifacts {
		r.Artifacts = append(r.Artifacts, artifactFromRow(x))
	}
	return r, nil
}

// attemptEventsPage is how many timeline entries AttemptEvents reads at a
// time: with progress messages of up to 64 KB, a few megabytes.
const attemptEventsPage = 50

// AttemptEvents calls fn with each timeline entry of attempt number of
// job jobID in timeline order (only its progress events when
// progressOnly), reading them a page at a time: what it holds is one page,
// however many the attempt has. Each page is its own statement, so an
// attempt still running may add entries meanwhile, which a later page
// shows. fn's error ends the walk and is returned.
func (c *Client) AttemptEvents(ctx context.Context, jobID int64, number int32, progressOnly bool, fn func(Event) error) error {
	p := db.ReplayEventPageByAttemptParams{
		JobID: jobID, Attempt: number, AfterRank: -1, AfterID: -1, ProgressOnly: progressOnly, Max: attemptEventsPage,
	}
	for {
		rows, err := c.q.ReplayEventPageByAttempt(ctx, p)
		if err != nil {
			return fmt.Errorf("reading the attempt's events: %w", err)
		}
		for _, e := range rows {
			if err := fn(Event{At: e.At, Type: e.Type, Attempt: e.Attempt, Detail: e.Detail}); err != nil {
				return err
			}
		}
		if len(rows) < attemptEventsPage {
			return nil
		}
		last := rows[len(rows)-1]
		p.AfterAt, p.AfterRank, p.AfterID = last.At, last.Rank, last.ID
	}
}
