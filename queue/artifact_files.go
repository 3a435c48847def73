package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// RecordArtifactPlaced records a as RecordArtifact does, in a transaction
// that holds the lock of a.SHA256's file from before place runs until the
// row is committed. place must make sure the file is in storage (it may
// be there already): a collector that removes unreferenced files takes
// the same lock (CollectArtifactFile), so it cannot remove the file
// between place and the row. When the row is refused the transaction
// rolls back and the file stays, unreferenced, for the caller or the
// next collection to remove.
func (c *Client) RecordArtifactPlaced(ctx context.Context, l Lease, a Artifact, place func(context.Context) error) (Artifact, error) {
	if err := CheckText("name", a.Name, maxArtifactName); err != nil {
		return Artifact{}, err
	}
	var rec Artifact
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		q := c.q.WithTx(tx)
		if err := q.ArtifactFileLock(ctx, a.SHA256); err != nil {
			return fmt.Errorf("locking artifact file: %w", err)
		}
		if err := place(ctx); err != nil {
			return err
		}
		var err error
		rec, err = insertArtifact(ctx, q, l, a)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		// Recorded outside the rolled-back transaction.
		return Artifact{}, c.refused(ctx, "artifact", l)
	}
	return rec, err
}

// CollectArtifactFile calls remove for the file of sum when no artifact
// row names it and no upload of the same content holds its lock (see
// RecordArtifactPlaced), and reports whether it did. The lock is held
// until remove returns, so an upload waits for the removal and then puts
// its own copy in place.
func (c *Client) CollectArtifactFile(ctx context.Context, sum string, remove func(context.Context) error) (bool, error) {
	removed := false
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		q := c.q.WithTx(tx)
		locked, err := q.ArtifactFileTryLock(ctx, sum)
		if err != nil || !locked {
			return err
		}
		// A new statement, so a new snapshot: it sees every row committed
		// before the lock was granted.
		n, err := q.ArtifactCountBySHA(ctx, sum)
		if err != nil || n > 0 {
			return err
		}
		if err := remove(ctx); err != nil {
			return err
		}
		removed = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("collecting artifact file: %w", err)
	}
	return removed, nil
}
