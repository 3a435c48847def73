package artifact

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// DefaultGCGrace is how long an object just written is left alone by the
// collector, whatever the rows say: an upload writes its object before it
// records the row, and removing it meanwhile would only make the upload
// write it again. Safety does not depend on it (see CollectFiles).
const DefaultGCGrace = time.Hour

// gcCheckBatch bounds the sums asked about in one statement.
const gcCheckBatch = 1000

// CollectFiles removes the objects no artifact row names: req.Candidates
// (whose rows a prune just deleted) and, with req.Sweep, every object in
// storage. A dry run removes nothing and counts what would go, taking the
// candidates as unreferenced (their rows still exist).
//
// Why a concurrent upload of the same content is safe, on any backend
// (S3 has no rename, so nothing here relies on one). An upload writes the
// object (or finds it there) and only then inserts the row that names it,
// so "no row names it" does not yet mean the object is unused. One lock
// per content in PostgreSQL closes that gap (queue.RecordArtifactPlaced
// and queue.CollectArtifactFile):
//
//  1. An upload, holding the content's lock, checks that the object is
//     there (writing it again from its spool if not) and inserts its row;
//     the lock goes with the commit that makes the row visible.
//  2. The collector removes an object only while holding the same lock
//     (never waiting for it: an upload in progress makes it skip the
//     object), after a statement started under the lock found no row.
//
// So either the upload's check comes after the removal (and it writes the
// object again) or its row is committed before the collector looks (and
// the collector keeps the object). This holds across processes and
// servers, since the lock is the database's. The grace period only spares
// young objects the churn.
func (s *Store) CollectFiles(ctx context.Context, req queue.FileGCRequest) (queue.FileGCResult, error) {
	var res queue.FileGCResult
	known := make(map[string]bool, len(req.Candidates))
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		used, err := s.referenced(ctx, batch, req.DryRun, known)
		if err != nil {
			return err
		}
		for _, sum := range batch {
			if used[sum] {
				continue
			}
			n, size, err := s.collect(ctx, sum, req.DryRun)
			if err != nil {
				return err
			}
			res.Files += n
			res.Bytes += size
		}
		batch = batch[:0]
		return nil
	}
	for _, sum := range req.Candidates {
		if !validSum(sum) || known[sum] {
			continue
		}
		known[sum] = true
		if batch = append(batch, sum); len(batch) == gcCheckBatch {
			if err := flush(); err != nil {
				return res, err
			}
		}
	}
	if err := flush(); err != nil {
		return res, err
	}
	if !req.Sweep {
		return res, s.countRemoved(ctx, req, res)
	}
	candidates := known
	known = map[string]bool{}
	before := res // removed before the walk, so not seen by it
	// What stays on disk, for the storage figures: every file looked at,
	// less those removed.
	var seen queue.Storage
	err := s.b.Walk(ctx, func(o ObjectInfo) error {
		seen.ArtifactFiles++
		seen.ArtifactBytes += o.Size
		if candidates[o.SHA256] {
			return nil
		}
		if batch = append(batch, o.SHA256); len(batch) == gcCheckBatch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil || req.DryRun {
		return res, err
	}
	// Uploads during the walk may be missed by a file or two; the next
	// sweep counts them.
	seen.ArtifactFiles = max(seen.ArtifactFiles-(res.Files-before.Files), 0)
	seen.ArtifactBytes = max(seen.ArtifactBytes-(res.Bytes-before.Bytes), 0)
	return res, s.q.SetArtifactStorage(ctx, seen)
}

// countRemoved subtracts the files a collection removed from the storage
// figures.
func (s *Store) countRemoved(ctx context.Context, req queue.FileGCRequest, res queue.FileGCResult) error {
	if req.DryRun || res.Files == 0 {
		return nil
	}
	return s.q.AddArtifactStorage(ctx, -res.Files, -res.Bytes)
}

// referenced returns which of sums some row names. In a dry run the
// candidates (in known) count as unreferenced without asking.
func (s *Store) referenced(ctx context.Context, sums []string, dryRun bool, known map[string]bool) (map[string]bool, error) {
	ask := sums
	if dryRun {
		ask = nil
		for _, sum := range sums {
			if !known[sum] {
				ask = append(ask, sum)
			}
		}
		if len(ask) == 0 {
			return nil, nil
		}
	}
	return s.q.ArtifactFilesReferenced(ctx, ask)
}

// collect removes the object of sum (no row named it) unless an upload
// wrote it within gcGrace or holds its lock; it reports the object and
// its bytes when it went (or, dryRun, would go).
func (s *Store) collect(ctx context.Context, sum string, dryRun bool) (int64, int64, error) {
	o, err := s.b.Stat(ctx, sum)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, 0, nil
	case err != nil:
		return 0, 0, fmt.Errorf("collecting artifact file: %w", err)
	case time.Since(o.ModTime) < s.gcGrace:
		return 0, 0, nil
	case dryRun:
		return 1, o.Size, nil
	}
	if s.beforeRemove != nil {
		s.beforeRemove(sum)
	}
	removed, err := s.q.CollectArtifactFile(ctx, sum, func(ctx context.Context) error {
		if err := s.b.Delete(ctx, sum); err != nil {
			return fmt.Errorf("removing artifact file: %w", err)
		}
		return nil
	})
	if err != nil || !removed {
		return 0, 0, err
	}
	return 1, o.Size, nil
}
