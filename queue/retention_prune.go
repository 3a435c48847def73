package queue

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/db"
)

// Pruner defaults.
const (
	pruneEvery = time.Minute
	// pruneBatch bounds one delete statement (and its transaction, locks
	// and cascade), so that claims and completions never queue behind it.
	pruneBatch = 500
	// prunePause separates batches, leaving the database to everyone else.
	prunePause = 20 * time.Millisecond
	// pruneSweepEvery is how often the active pruner looks at every
	// artifact file, for files whose rows went without the pass seeing it
	// (a crash between the delete and the file's removal, a refused upload).
	pruneSweepEvery = time.Hour
)

// FileCollector removes the artifact files that no artifact row names.
// The artifact store implements it; queue cannot import it.
type FileCollector interface {
	CollectFiles(ctx context.Context, req FileGCRequest) (FileGCResult, error)
}

// FileGCRequest is one collection.
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

// PruneResult is what one pass removed, or (dry run) would remove.
type PruneResult struct {
	Jobs  map[State]int64
	Files int64
	Bytes int64
}

// PrunerConfig configures a Pruner.
type PrunerConfig struct {
	Retention Retention
	// Files, when set, collects the artifact files of pruned jobs.
	Files  FileCollector
	Logger *slog.Logger
	// Every is the time between passes (default a minute), Batch the jobs
	// per delete statement (default 500), Pause the pause between batches
	// (default 20ms).
	Every time.Duration
	Batch int
	Pause time.Duration
}

// Pruner applies retention: finished jobs older than their state's
// retention go with their history, then the artifact files nothing
// references any more, and expired sessions. Every server runs one; one is
// active (the "pruner" leader role, see lead), the others wait on standby
// without holding a snapshot.
type Pruner struct {
	pool      *pgxpool.Pool
	q         *db.Queries
	cfg       PrunerConfig
	active    atomic.Bool
	lastSweep time.Time
}

// NewPruner returns a Pruner for pool's database.
func NewPruner(pool *pgxpool.Pool, cfg PrunerConfig) *Pruner {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Every <= 0 {
		cfg.Every = pruneEvery
	}
	if cfg.Batch <= 0 {
		cfg.Batch = pruneBatch
	}
	if cfg.Pause <= 0 {
		cfg.Pause = prunePause
	}
	return &Pruner{pool: pool, q: db.New(pool), cfg: cfg}
}

// Active reports whether this pruner holds the role now.
func (p *Pruner) Active() bool { return p.active.Load() }

// Run prunes every cfg.Every while it holds the pruner role, until ctx
// ends, taking the role again after errors.
func (p *Pruner) Run(ctx context.Context) error {
	delay := 100 * time.Millisecond
	for {
		err := lead(ctx, p.pool, "pruner", p.lead)
		if ctx.Err() != nil {
			return nil
		}
		p.cfg.Logger.Warn("pruner session ended", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// lead is the active pruner. A failed pass is logged and the next one
// tried at its time: the role is kept.
func (p *Pruner) lead(ctx context.Context) error {
	p.active.Store(true)
	defer p.active.Store(false)
	p.cfg.Logger.Info("pruner active", "retention", p.cfg.Retention.String())
	tick := time.NewTicker(p.cfg.Every)
	defer tick.Stop()
	for {
		sweep := time.Since(p.lastSweep) >= pruneSweepEvery
		res, err := p.Prune(ctx, PruneOptions{Sweep: sweep})
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			p.cfg.Logger.Warn("pruning", "err", err)
		default:
			if sweep {
				p.lastSweep = time.Now()
			}
			if n := res.Total(); n > 0 || res.Files > 0 {
				p.cfg.Logger.Info("pruned", "jobs", n, "succeeded", res.Jobs[StateSucceeded],
					"cancelled", res.Jobs[StateCancelled], "dead", res.Jobs[StateDead],
					"files", res.Files, "bytes", res.Bytes)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Total is the jobs removed in every state.
func (r PruneResult) Total() int64 {
	var n int64
	for _, v := range r.Jobs {
		n += v
	}
	return n
}

// PruneOptions are one pass's choices.
type PruneOptions struct {
	// DryRun deletes nothing and reports what a pass would remove.
	DryRun bool
	// Sweep also collects every unreferenced artifact file, not only
	// those of the jobs this pass deletes.
	Sweep bool
}

// Prune runs one pass (server prune runs one without holding the role;
// two passes at once are safe, each skips what the other has locked).
func (p *Pruner) Prune(ctx context.Context, opt PruneOptions) (PruneResult, error) {
	res := PruneResult{Jobs: map[State]int64{}}
	var doomed []int64 // dry run: every job the pass would delete
	for _, st := range FinishedStates {
		keep := p.cfg.Retention[st]
		if keep <= 0 {
			continue
		}
		n, ids, err := p.pruneState(ctx, st, keep, opt.DryRun, &res)
		if err != nil {
			return res, err
		}
		res.Jobs[st] = n
		doomed = append(doomed, ids...)
	}
	if !opt.DryRun {
		if err := p.q.SessionDeleteExpired(ctx); err != nil {
			return res, fmt.Errorf("deleting expired sessions: %w", err)
		}
	}
	if p.cfg.Files == nil {
		return res, nil
	}
	req := FileGCRequest{Sweep: opt.Sweep, DryRun: opt.DryRun}
	if opt.DryRun && len(doomed) > 0 {
		freed, err := p.q.RetentionFreedFiles(ctx, doomed)
		if err != nil {
			return res, fmt.Errorf("finding the files a prune frees: %w", err)
		}
		req.Candidates = freed
	}
	if len(req.Candidates) > 0 || req.Sweep {
		fr, err := p.cfg.Files.CollectFiles(ctx, req)
		res.Files += fr.Files
		res.Bytes += fr.Bytes
		if err != nil {
			return res, fmt.Errorf("collecting artifact files: %w", err)
		}
	}
	return res, nil
}

// pruneState walks the jobs of st in id order, one batch per statement,
// deleting (or, in a dry run, listing) the expired ones. After each
// delete it collects the files that batch's artifacts named.
func (p *Pruner) pruneState(ctx context.Context, st State, keep time.Duration, dryRun bool, res *PruneResult) (int64, []int64, error) {
	var (
		after  int64
		total  int64
		doomed []int64
	)
	keepMs := keep.Milliseconds()
	for {
		rows, err := p.q.RetentionScan(ctx, db.RetentionScanParams{
			KeepMs: keepMs, State: db.JobState(st), After: after, Batch: int32(p.cfg.Batch),
		})
		if err != nil {
			return total, doomed, fmt.Errorf("scanning %s jobs: %w", st, err)
		}
		done := len(rows) < p.cfg.Batch
		var expired []int64
		for _, r := range rows {
			if r.Young {
				done = true
				break
			}
			after = r.ID
			if r.Expired {
				expired = append(expired, r.ID)
			}
		}
		switch {
		case len(expired) == 0:
		case dryRun:
			total += int64(len(expired))
			doomed = append(doomed, expired...)
		default:
			del, err := p.q.RetentionDelete(ctx, db.RetentionDeleteParams{Ids: expired, State: db.JobState(st), KeepMs: keepMs})
			if err != nil {
				return total, doomed, fmt.Errorf("deleting %s jobs: %w", st, err)
			}
			total += del.Jobs
			if p.cfg.Files != nil && len(del.Sums) > 0 {
				fr, err := p.cfg.Files.CollectFiles(ctx, FileGCRequest{Candidates: del.Sums})
				res.Files += fr.Files
				res.Bytes += fr.Bytes
				if err != nil {
					return total, doomed, fmt.Errorf("collecting artifact files: %w", err)
				}
			}
		}
		if done {
			return total, doomed, nil
		}
		select {
		case <-ctx.Done():
			return total, doomed, ctx.Err()
		case <-time.After(p.cfg.Pause):
		}
	}
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
