package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/db"
)

// Artifact kinds.
const (
	ArtifactScreenshot = "screenshot"
	ArtifactText       = "text"
)

// Artifact is a stored screenshot or text file of one attempt. Its bytes
// live in a file named by SHA256 (package artifact).
type Artifact struct {
	ID          int64
	JobID       int64
	Attempt     int32
	Kind        string
	Name        string
	ContentType string
	Size        int64
	SHA256      string
	Width       *int32
	Height      *int32
	// Step is the step of its attempt the executor says the artifact
	// belongs to (>= 1; nil: not given): a replay shows it with the
	// message of the progress event of the same step.
	Step *int32
	// ScreenHash is a screenshot's perceptual hash (package screenhash),
	// which groups failures by the screen they ended on; nil for text, or
	// for an image too large to decode for it.
	ScreenHash *int64
	CreatedAt  time.Time
}

// maxArtifactName is the artifacts.name column's bound.
const maxArtifactName = 255

// RecordArtifact records a stored file as an artifact of l's attempt.
// ErrLeaseLost when l is not current: a stale worker's upload is refused.
func (c *Client) RecordArtifact(ctx context.Context, l Lease, a Artifact) (Artifact, error) {
	if err := CheckText("name", a.Name, maxArtifactName); err != nil {
		return Artifact{}, err // package artifact cleans names first; this is the rule it meets
	}
	if a.Step != nil && (*a.Step < 1 || *a.Step > MaxStep) {
		return Artifact{}, invalid("step", "must be between 1 and %d", MaxStep)
	}
	rec, err := insertArtifact(ctx, c.q, l, a)
	if errors.Is(err, pgx.ErrNoRows) {
		return Artifact{}, c.refused(ctx, "artifact", l)
	}
	return rec, err
}

// insertArtifact inserts a's row; pgx.ErrNoRows when the lease is not
// current.
func insertArtifact(ctx context.Context, q *db.Queries, l Lease, a Artifact) (Artifact, error) {
	row, err := q.ArtifactInsert(ctx, db.ArtifactInsertParams{
		JobID: l.JobID, LeaseToken: l.Token, WorkerID: l.WorkerID, Kind: a.Kind, Name: a.Name, ContentType: a.ContentType,
		Size: a.Size, Sha256: a.SHA256, Width: a.Width, Height: a.Height, Step: a.Step, ScreenHash: a.ScreenHash,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Artifact{}, err
	}
	if err != nil {
		return Artifact{}, fmt.Errorf("recording artifact: %w", err)
	}
	return artifactFromRow(row), nil
}

// GetArtifact returns one artifact's metadata.
func (c *Client) GetArtifact(ctx context.Context, id int64) (Artifact, error) {
	row, err := c.q.ArtifactGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Artifact{}, ErrNotFound
	}
	if err != nil {
		return Artifact{}, fmt.Errorf("reading artifact: %w", err)
	}
	return artifactFromRow(row), nil
}

// ArtifactFileInUse reports whether any artifact still names the file with
// this SHA-256 (files are shared by content).
func (c *Client) ArtifactFileInUse(ctx context.Context, sha256 string) (bool, error) {
	n, err := c.q.ArtifactCountBySHA(ctx, sha256)
	if err != nil {
		return false, fmt.Errorf("counting artifact references: %w", err)
	}
	return n > 0, nil
}

func (c *Client) artifacts(ctx context.Context, jobID int64) ([]Artifact, error) {
	rows, err := c.q.ArtifactListByJob(ctx, jobID)
	if err != nil {
		return nil, fmt.Errorf("reading artifacts: %w", err)
	}
	out := make([]Artifact, len(rows))
	for i, r := range rows {
		out[i] = artifactFromRow(r)
	}
	return out, nil
}

func artifactFromRow(r db.Artifact) Artifact {
	return Artifact{
		ID: r.ID, JobID: r.JobID, Attempt: r.Attempt, Kind: r.Kind, Name: r.Name, ContentType: r.ContentType,
		Size: r.Size, SHA256: r.Sha256, Width: r.Width, Height: r.Height, Step: r.Step, ScreenHash: r.ScreenHash,
		CreatedAt: r.CreatedAt,
	}
}
