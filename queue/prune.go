package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/db"
)

// FileGCRequest is one collection of artifact files.
type FileGCRequest struct {
	// Candidates are files whose last known rows a pass deleted; in a dry
	// run, files that the pass would leave unreferenced (the collector
	// takes them as unreferenced without asking).
	Candidates []string
	// Sweep also looks at every file in storage.
	Sweep bool
	// DryRun removes nothing and counts what would go.
	DryRun bool
}

// FileGCResult is what a collection removed, or would.
type FileGCResult struct {
	Files int64
	Bytes int64
}

// PrunedBatch is what one PruneBatch found and did.
type PrunedBatch struct {
	// Expired are the jobs past their retention (deleted unless a dry
	// run), Deleted how many went.
	Expired []int64
	Deleted int64
	// Sums are the artifact files the deleted jobs' artifacts named.
	Sums []string
	// Last is the last job looked at, the next batch's after; Done means
	// no job of the state is left to look at.
	Last int64
	Done bool
}

// PruneBatch looks at up to batch finished jobs in state st after the job
// after, in id order, and deletes those finished more than keep ago with
// their history (a dry run only lists them). Rows another transaction
// holds are skipped, not waited for.
func (c *Client) PruneBatch(ctx context.Context, st State, keep time.Duration, after int64, batch int, dryRun bool) (PrunedBatch, error) {
	keepMs := keep.Milliseconds()
	rows, err := c.q.RetentionScan(ctx, db.RetentionScanParams{
		KeepMs: keepMs, State: db.JobState(st), After: after, Batch: int32(batch),
	})
	if err != nil {
		return PrunedBatch{}, fmt.Errorf("scanning %s jobs: %w", st, err)
	}
	b := PrunedBatch{Last: after, Done: len(rows) < batch}
	for _, r := range rows {
		if r.Young {
			b.Done = true
			break
		}
		b.Last = r.ID
		if r.Expired {
			b.Expired = append(b.Expired, r.ID)
		}
	}
	if len(b.Expired) == 0 || dryRun {
		return b, nil
	}
	del, err := c.q.RetentionDelete(ctx, db.RetentionDeleteParams{Ids: b.Expired, State: db.JobState(st), KeepMs: keepMs})
	if err != nil {
		return b, fmt.Errorf("deleting %s jobs: %w", st, err)
	}
	b.Deleted, b.Sums = del.Jobs, del.Sums
	return b, nil
}

// FilesFreedBy returns the artifact files that deleting jobs would leave
// unreferenced.
func (c *Client) FilesFreedBy(ctx context.Context, jobs []int64) ([]string, error) {
	sums, err := c.q.RetentionFreedFiles(ctx, jobs)
	if err != nil {
		return nil, fmt.Errorf("finding the files a prune frees: %w", err)
	}
	return sums, nil
}

// DeleteExpiredSessions removes the dashboard sessions past their end.
func (c *Client) DeleteExpiredSessions(ctx context.Context) error {
	if err := c.q.SessionDeleteExpired(ctx); err != nil {
		return fmt.Errorf("deleting expired sessions: %w", err)
	}
	return nil
}

// ArtifactFilesReferenced returns which of sums some artifact row names.
func (c *Client) ArtifactFilesReferenced(ctx context.Context, sums []string) (map[string]bool, error) {
	rows, err := c.q.ArtifactSHAsReferenced(ctx, sums)
	if err != nil {
		return nil, fmt.Errorf("reading artifact references: %w", err)
	}
	in := make(map[string]bool, len(rows))
	for _, s := range rows {
		in[s] = true
	}
	return in, nil
}

// Storage is what the artifact files take on disk: one file per distinct
// content.
type Storage struct {
	ArtifactFiles int64
	ArtifactBytes int64
}

// ArtifactStorage reads the kept figures (one row per shard, never a scan
// of the artifacts).
func (c *Client) ArtifactStorage(ctx context.Context) (Storage, error) {
	r, err := c.q.ArtifactStorage(ctx)
	if err != nil {
		return Storage{}, fmt.Errorf("reading artifact storage: %w", err)
	}
	return Storage{ArtifactFiles: r.Files, ArtifactBytes: r.Bytes}, nil
}

// AddArtifactStorage counts files placed (positive) or removed (negative).
func (c *Client) AddArtifactStorage(ctx context.Context, files, bytes int64) error {
	if err := c.q.ArtifactStorageAdd(ctx, db.ArtifactStorageAddParams{Files: files, Bytes: bytes}); err != nil {
		return fmt.Errorf("counting artifact storage: %w", err)
	}
	return nil
}

// SetArtifactStorage sets the figures to what a sweep counted.
func (c *Client) SetArtifactStorage(ctx context.Context, s Storage) error {
	if err := c.q.ArtifactStorageSet(ctx, db.ArtifactStorageSetParams{Files: s.ArtifactFiles, Bytes: s.ArtifactBytes}); err != nil {
		return fmt.Errorf("setting artifact storage: %w", err)
	}
	return nil
}
