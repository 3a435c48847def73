package maintenance

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/audit"
	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/queue"
)

// Pruner defaults.
const (
	pruneEvery = time.Minute
	// pruneBatch bounds one delete statement (and its transaction, locks
	// and cascade), so that claims and completions never queue behind it.
	pruneBatch = 500
	// prunePause separates batches, leaving the database to everyone else.
	prunePause = 20 * time.Millisecond
	// pruneDuty is the largest share of a pass's time spent in its
	// statements: after a batch that took d, the pass pauses at least
	// d*(1-duty)/duty. A fixed pause alone let a pass of 100,000 jobs keep
	// a 2-core machine's database busy end to end, and a claim's p99 went
	// from 6 to 15 ms meanwhile.
	pruneDuty = 0.5
	// pruneSweepEvery is how often the active pruner looks at every
	// artifact file, for files whose rows went without the pass seeing it
	// (a crash between the delete and the file's removal, a refused upload).
	pruneSweepEvery = time.Hour
)

// FileCollector removes the artifact files that no artifact row names.
// The artifact store implements it.
type FileCollector interface {
	CollectFiles(ctx context.Context, req queue.FileGCRequest) (queue.FileGCResult, error)
}

// PruneResult is what one pass removed, or (dry run) would remove.
type PruneResult struct {
	Jobs  map[queue.State]int64
	Files int64
	Bytes int64
	// Audit is the audit rows past PrunerConfig.AuditRetention.
	Audit int64
}

// PrunerConfig configures a Pruner.
type PrunerConfig struct {
	Retention Retention
	// AuditRetention is how long the audit trail keeps a row
	// (LEASEHOLD_AUDIT_RETENTION; cmd/server's default is
	// audit.DefaultRetention); 0 keeps every row.
	AuditRetention time.Duration
	// Files, when set, collects the artifact files of pruned jobs.
	Files  FileCollector
	Logger *slog.Logger
	// Every is the time between passes (default a minute), Batch the jobs
	// per delete statement (default 500), Pause the least pause between
	// batches (default 20ms), Duty the largest share of a pass's time its
	// statements may take (default 0.5; 1 pauses only Pause).
	Every time.Duration
	Batch int
	Pause time.Duration
	Duty  float64
}

// Pruner applies retention: finished jobs older than their state's
// retention go with their history, then the artifact files nothing
// references any more, audit rows past the audit retention, and expired
// sessions. Every server runs one; one is
// active (the "pruner" leader role, see lead), the others wait on standby
// without holding a snapshot.
type Pruner struct {
	leader
	client    *queue.Client
	q         *db.Queries
	cfg       PrunerConfig
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
	if cfg.Duty <= 0 || cfg.Duty > 1 {
		cfg.Duty = pruneDuty
	}
	return &Pruner{
		leader: leader{role: "pruner", pool: pool, logger: cfg.Logger},
		client: queue.NewClient(pool, cfg.Logger), q: db.New(pool), cfg: cfg,
	}
}

// Run prunes every cfg.Every while it holds the pruner role, until ctx
// ends, taking the role again after errors.
func (p *Pruner) Run(ctx context.Context) error { return p.run(ctx, p.lead) }

// lead is the active pruner. A failed pass is logged and the next one
// tried at its time: the role is kept.
func (p *Pruner) lead(ctx context.Context) error {
	p.cfg.Logger.Info("pruner active", "retention", p.cfg.Retention.String(),
		"audit_retention", AuditRetention(p.cfg.AuditRetention).String())
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
			if n := res.Total(); n > 0 || res.Files > 0 || res.Audit > 0 {
				p.cfg.Logger.Info("pruned", "jobs", n, "succeeded", res.Jobs[queue.StateSucceeded],
					"cancelled", res.Jobs[queue.StateCancelled], "dead", res.Jobs[queue.StateDead],
					"files", res.Files, "bytes", res.Bytes, "audit", res.Audit)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// pause is the wait after a batch that took busy: at least cfg.Pause, and
// long enough that the statements take at most cfg.Duty of the pass.
func (p *Pruner) pause(busy time.Duration) time.Duration {
	return max(p.cfg.Pause, time.Duration(float64(busy)*(1-p.cfg.Duty)/p.cfg.Duty))
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
	res := PruneResult{Jobs: map[queue.State]int64{}}
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
	if keep := p.cfg.AuditRetention; keep > 0 {
		n, err := p.pruneAudit(ctx, keep, opt.DryRun)
		res.Audit = n
		if err != nil {
			return res, err
		}
	}
	if !opt.DryRun {
		if err := p.client.DeleteExpiredSessions(ctx); err != nil {
			return res, err
		}
	}
	if p.cfg.Files == nil {
		return res, nil
	}
	req := queue.FileGCRequest{Sweep: opt.Sweep, DryRun: opt.DryRun}
	if opt.DryRun && len(doomed) > 0 {
		freed, err := p.client.FilesFreedBy(ctx, doomed)
		if err != nil {
			return res, err
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
func (p *Pruner) pruneState(ctx context.Context, st queue.State, keep time.Duration, dryRun bool, res *PruneResult) (int64, []int64, error) {
	var (
		after  int64
		total  int64
		doomed []int64
	)
	for {
		start := time.Now()
		b, err := p.client.PruneBatch(ctx, st, keep, after, p.cfg.Batch, dryRun)
		if err != nil {
			return total, doomed, err
		}
		after = b.Last
		if dryRun {
			total += int64(len(b.Expired))
			doomed = append(doomed, b.Expired...)
		} else {
			total += b.Deleted
		}
		if p.cfg.Files != nil && len(b.Sums) > 0 {
			fr, err := p.cfg.Files.CollectFiles(ctx, queue.FileGCRequest{Candidates: b.Sums})
			res.Files += fr.Files
			res.Bytes += fr.Bytes
			if err != nil {
				return total, doomed, fmt.Errorf("collecting artifact files: %w", err)
			}
		}
		if b.Done {
			return total, doomed, nil
		}
		select {
		case <-ctx.Done():
			return total, doomed, ctx.Err()
		case <-time.After(p.pause(time.Since(start))):
		}
	}
}

// pruneAudit deletes the audit rows older than keep, cfg.Batch a
// statement and pausing between them as pruneState does, so that the
// writes of changes (each with its audit row) never wait behind it; a
// dry run counts them.
func (p *Pruner) pruneAudit(ctx context.Context, keep time.Duration, dryRun bool) (int64, error) {
	if dryRun {
		return audit.Expired(ctx, p.q, keep)
	}
	var total int64
	for {
		start := time.Now()
		n, err := audit.Prune(ctx, p.q, keep, p.cfg.Batch)
		total += n
		if err != nil || n < int64(p.cfg.Batch) {
			return total, err
		}
		select {
		case <-ctx.Done():
			return total, ctx.Err()
		case <-time.After(p.pause(time.Since(start))):
		}
	}
}
