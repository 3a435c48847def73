package artifact

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// DefaultGCGrace is how long a file placed or reused by an upload is safe
// from the collector, whatever the rows say. An upload records its row
// within a statement's time of placing the file; an hour is far more.
const DefaultGCGrace = time.Hour

// gcCheckBatch bounds the sums asked about in one statement.
const gcCheckBatch = 1000

// CollectFiles removes the files no artifact row names: req.Candidates
// (whose rows a prune just deleted) and, with req.Sweep, every file in
// storage. A dry run removes nothing and counts what would go, taking the
// candidates as unreferenced (their rows still exist).
//
// Why a concurrent upload of the same content is safe. An upload places
// the file (or finds it there) and only then inserts the row that names
// it, so "no row names it" does not yet mean the file is unused. Three
// rules close that gap:
//
//  1. An upload that finds the file already there touches it (mtime now,
//     see place); a new file's mtime is its upload's time anyway.
//  2. The collector removes only files whose mtime is older than gcGrace,
//     and removes in two steps: it renames the file into tmp/ (atomic;
//     from then on an upload cannot find it and places its own copy, with
//     the same bytes), then reads the moved file's mtime again. A touch
//     that happened before the rename shows there (same inode), and the
//     file is renamed back: replacing an upload's fresh copy with equal
//     bytes is harmless. Only a file still old after the move is removed.
//  3. An upload that reused a file keeps its own copy until its row is
//     recorded, then checks the file is still there and puts its copy in
//     place if not: this covers a touch racing the rename inside the
//     kernel.
//
// So a file is removed only when no upload touched it within gcGrace
// before its move, and any upload later than the move re-creates it. A
// row inserted more than gcGrace after its upload touched the file is
// the one case not covered, and no upload takes that long. Uploads in this
// process are also held off by the per-prefix lock.
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
			n, size, err := s.collect(sum, req.DryRun)
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
	err := filepath.WalkDir(s.objects, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !validSum(d.Name()) {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			seen.ArtifactFiles++
			seen.ArtifactBytes += fi.Size()
		}
		if candidates[d.Name()] {
			return nil
		}
		if batch = append(batch, d.Name()); len(batch) == gcCheckBatch {
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

// collect removes the file of sum (no row names it) unless an upload
// placed or reused it within gcGrace; it reports the file and its bytes
// when it went (or, dryRun, would go).
func (s *Store) collect(sum string, dryRun bool) (int64, int64, error) {
	prefix, _ := hex.DecodeString(sum[:2])
	mu := &s.locks[prefix[0]]
	mu.Lock()
	defer mu.Unlock()

	path := s.path(sum)
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, 0, nil
	case err != nil:
		return 0, 0, fmt.Errorf("collecting artifact file: %w", err)
	case s.fresh(fi):
		return 0, 0, nil
	case dryRun:
		return 1, fi.Size(), nil
	}
	if s.beforeRemove != nil {
		s.beforeRemove(sum)
	}
	var r [8]byte
	_, _ = rand.Read(r[:])
	trash := filepath.Join(s.tmp, "gc-"+sum+"-"+hex.EncodeToString(r[:]))
	if err := os.Rename(path, trash); errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	} else if err != nil {
		return 0, 0, fmt.Errorf("collecting artifact file: %w", err)
	}
	moved, err := os.Stat(trash)
	if err != nil || s.fresh(moved) {
		// An upload reused it after all: put it back (over the copy a
		// later upload may have placed meanwhile, with the same bytes).
		if rerr := os.Rename(trash, path); rerr != nil {
			return 0, 0, fmt.Errorf("restoring artifact file: %w", rerr)
		}
		return 0, 0, nil
	}
	if err := os.Remove(trash); err != nil {
		return 0, 0, fmt.Errorf("removing artifact file: %w", err)
	}
	return 1, moved.Size(), nil
}

// fresh reports whether an upload placed or reused the file within the
// grace period.
func (s *Store) fresh(fi fs.FileInfo) bool {
	return time.Since(fi.ModTime()) < s.gcGrace
}
