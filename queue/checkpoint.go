package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/db"
)

// MaxCheckpointBytes bounds a checkpoint's state (SPEC "Checkpoints"):
// a small JSON object that a later attempt resumes from, not a place for
// results or files.
const MaxCheckpointBytes = 64 << 10

// Checkpoint is the last state an attempt of a job saved to resume from:
// the step it ends (the next attempt starts after it) and the
// executor's own state, a JSON object.
type Checkpoint struct {
	Step  int32
	State json.RawMessage
	// Attempt is the attempt that saved it, At when.
	Attempt int32
	At      time.Time
}

// checkpointFromRow is the job's checkpoint, nil when it has none.
func checkpointFromRow(r db.Job) *Checkpoint {
	if r.Checkpoint == nil || r.CheckpointStep == nil {
		return nil
	}
	cp := &Checkpoint{Step: *r.CheckpointStep, State: r.Checkpoint}
	if r.CheckpointAttempt != nil {
		cp.Attempt = *r.CheckpointAttempt
	}
	if r.CheckpointAt != nil {
		cp.At = *r.CheckpointAt
	}
	return cp
}

// CheckCheckpoint says what is wrong with a checkpoint before it is sent:
// step 0 (nothing done yet) to MaxStep, state a JSON object of at most
// MaxCheckpointBytes (larger: a *ValidationError wrapping ErrTooLarge).
// Both kinds of worker check it, so that a direct one is refused exactly
// as the server refuses a remote one.
func CheckCheckpoint(step int, state json.RawMessage) error {
	if step < 0 || step > MaxStep {
		return invalid("step", "must be between 0 and %d", MaxStep)
	}
	state = bytes.TrimSpace(state)
	if len(state) > MaxCheckpointBytes {
		return tooLarge("state", MaxCheckpointBytes)
	}
	if len(state) == 0 || state[0] != '{' || !json.Valid(state) {
		return invalid("state", "must be a JSON object")
	}
	if problem := checkDocument(state, MaxCheckpointBytes); problem != "" {
		return invalid("state", "%s", problem)
	}
	return nil
}

// SaveCheckpoint saves state as the checkpoint of l's job at step,
// replacing the one before: the job's next attempt receives it in its
// claim. Fenced like every write of the attempt: ErrLeaseLost (recorded
// on the timeline) once the lease is not current.
func (c *Client) SaveCheckpoint(ctx context.Context, l Lease, step int, state json.RawMessage) error {
	if err := CheckCheckpoint(step, state); err != nil {
		return err
	}
	_, err := c.q.JobCheckpoint(ctx, db.JobCheckpointParams{
		State: bytes.TrimSpace(state), Step: int32(step),
		ID: l.JobID, LeaseToken: l.Token, WorkerID: l.WorkerID,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return c.refused(ctx, "checkpoint", l)
	}
	if err != nil {
		return fmt.Errorf("saving the checkpoint: %w", inputRefused(err, "state"))
	}
	return nil
}
