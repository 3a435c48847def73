package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/db"
)

// AttemptRecord is one attempt with what it left: its timeline entries
// and its artifacts, each in order.
type AttemptRecord struct {
	Attempt   Attempt
	Events    []Event
	Artifacts []Artifact
}

// ErrNoAttempt means the job exists but has no attempt of that number.
var ErrNoAttempt = errors.New("no such attempt")

// AttemptHistory reads attempt number of job jobID and only what belongs
// to it, however long the job's whole timeline is. ErrNotFound when there
// is no such job, ErrNoAttempt when the job has no such attempt. The
// three reads are separate statements: an attempt still running may add
// artifacts and events between them, which the next read shows.
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
		Events: []Event{}, Artifacts: []Artifact{},
	}
	if a.Outcome != nil {
		r.Attempt.Outcome = ptr(string(*a.Outcome))
	}
	events, err := c.q.ReplayEventListByAttempt(ctx, db.ReplayEventListByAttemptParams{JobID: jobID, Attempt: number})
	if err != nil {
		return AttemptRecord{}, fmt.Errorf("reading the attempt's events: %w", err)
	}
	for _, e := range events {
		r.Events = append(r.Events, Event{At: e.At, Type: e.Type, Attempt: e.Attempt, Detail: e.Detail})
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
