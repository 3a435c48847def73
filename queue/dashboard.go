package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/db"
)

// Reads for the dashboard. Each reads what a page shows for all of its
// rows at once: a page of fifty jobs is a fixed number of queries, never
// one per row.

// heldJobsShown bounds the running jobs the workers page lists for each
// worker (its newest); its count stays exact beyond it. A phone runs a
// few at a time.
const heldJobsShown = 20

// RecentDead returns the last limit jobs to go dead, latest first.
func (c *Client) RecentDead(ctx context.Context, limit int) ([]Job, error) {
	rows, err := c.q.JobListRecentlyDead(ctx, int32(limit))
	if err != nil {
		return nil, fmt.Errorf("listing recent dead jobs: %w", err)
	}
	return toJobs(rows), nil
}

// PermanentlyDead returns which of jobIDs last went dead on a failure that
// was not retryable: a retry runs such a job again, but its worker said
// another attempt would fail the same way.
func (c *Client) PermanentlyDead(ctx context.Context, jobIDs []int64) (map[int64]bool, error) {
	out := map[int64]bool{}
	if len(jobIDs) == 0 {
		return out, nil
	}
	ids, err := c.q.JobListPermanentlyDead(ctx, jobIDs)
	if err != nil {
		return nil, fmt.Errorf("listing permanent failures: %w", err)
	}
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}

// DiedPermanently reports whether the latest 'dead' event of events (oldest
// first) records a failure that was not retryable: the rule of
// PermanentlyDead, for a job whose events are at hand.
func DiedPermanently(events []Event) bool {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Type != "dead" {
			continue
		}
		var d struct {
			Retryable *bool `json:"retryable"`
		}
		return json.Unmarshal(events[i].Detail, &d) == nil && d.Retryable != nil && !*d.Retryable
	}
	return false
}

// Screenshots are the screenshots of one attempt of a job.
type Screenshots struct {
	Attempt int32
	// Artifacts are at most the perJob last ones taken, in the order they
	// were taken.
	Artifacts []Artifact
	// Total is how many the attempt has, shown or not.
	Total int
}

// LatestScreenshots returns, for each job of jobIDs that has any, the
// screenshots of its latest attempt that took some: at most perJob of them,
// the last ones taken (the screen it failed on comes last).
func (c *Client) LatestScreenshots(ctx context.Context, jobIDs []int64, perJob int) (map[int64]Screenshots, error) {
	out := map[int64]Screenshots{}
	if len(jobIDs) == 0 || perJob <= 0 {
		return out, nil
	}
	rows, err := c.q.ArtifactListLatestScreenshots(ctx, db.ArtifactListLatestScreenshotsParams{JobIds: jobIDs, PerJob: int64(perJob)})
	if err != nil {
		return nil, fmt.Errorf("listing screenshots: %w", err)
	}
	for _, r := range rows {
		s := out[r.JobID]
		s.Attempt, s.Total = r.Attempt, int(r.Total)
		s.Artifacts = append(s.Artifacts, Artifact{
			ID: r.ID, JobID: r.JobID, Attempt: r.Attempt, Kind: ArtifactScreenshot, Name: r.Name,
			ContentType: r.ContentType, Width: r.Width, Height: r.Height, CreatedAt: r.CreatedAt,
		})
		out[r.JobID] = s
	}
	return out, nil
}

// HeldJob is a running job as its worker's row shows it.
type HeldJob struct {
	ID         int64
	Kind       string
	App        *string
	Attempt    int32
	LeaseUntil *time.Time
}

// WorkerStatus is a worker as last seen, with the jobs it holds now.
type WorkerStatus struct {
	Worker
	StartedAt time.Time
	// Online says it was seen within the online window, by the database
	// clock.
	Online bool
	Jobs   []HeldJob
	// Info is what its device-info command last said (nil if nothing),
	// gathered at InfoAt (database clock); InfoError is why its last run
	// failed.
	Info      json.RawMessage
	InfoAt    *time.Time
	InfoError *string
	// Claiming is false while the worker holds back (its phone is unfit),
	// NotClaiming says why.
	Claiming    bool
	NotClaiming *string
	// Succeeded and Failed count its outcomes in the outcomes window: jobs
	// it completed, and its attempts that failed or whose lease expired.
	Succeeded, Failed int64
	// LastJobID is the job it runs (the newest listed in Jobs), else the
	// one whose attempt it ended last; 0 if none.
	LastJobID int64
}

// How far back a list of workers (the workers page, GET /api/v1/workers)
// looks, and the window of each worker's outcome counts
// (WorkerStatus.Succeeded and Failed; the API's succeeded_24h).
const (
	WorkerListWindow    = 24 * time.Hour
	WorkerOutcomeWindow = 24 * time.Hour
)

// Health says whether w claims, and why not: it is offline, or it said
// so with its last presence.
func (w WorkerStatus) Health() (claiming bool, reason string) {
	switch {
	case !w.Online:
		return false, "offline"
	case !w.Claiming:
		return false, derefOr(w.NotClaiming)
	}
	return true, ""
}

// WorkerStatuses lists the workers seen within the last window, each with
// the running jobs it holds and whether it was seen within online. Both
// reads see one snapshot, so a job is never shown on no worker or on two.
func (c *Client) WorkerStatuses(ctx context.Context, window, online, outcomes time.Duration) ([]WorkerStatus, error) {
	var out []WorkerStatus
	err := pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		q := c.q.WithTx(tx)
		// Neither statement has an optional filter; planning them anew
		// took 7 ms of each look at 1 M jobs.
		if err := q.UseGenericPlans(ctx); err != nil {
			return fmt.Errorf("listing workers: %w", err)
		}
		rows, err := q.WorkerListStatus(ctx, db.WorkerListStatusParams{WithinMs: window.Milliseconds(), OnlineMs: online.Milliseconds(), OutcomesMs: outcomes.Milliseconds()})
		if err != nil {
			return fmt.Errorf("listing workers: %w", err)
		}
		inHours, err := c.succeeded.inWholeHours(ctx, q, rows)
		if err != nil {
			return fmt.Errorf("counting workers' completed jobs: %w", err)
		}
		out = make([]WorkerStatus, len(rows))
		ids := make([]string, len(rows))
		index := make(map[string]int, len(rows))
		for i, r := range rows {
			out[i] = WorkerStatus{
				Worker:    Worker{ID: r.ID, LastSeen: r.LastSeen, Device: r.Device, Queues: r.Queues, Running: r.Running},
				StartedAt: r.StartedAt, Online: r.Online,
				Info: r.Info, InfoAt: r.InfoAt, InfoError: r.InfoError, Claiming: r.Claiming, NotClaiming: r.NotClaiming,
				Succeeded: r.SucceededOutsideHours + inHours[r.ID], Failed: r.FailedRecent, LastJobID: r.LastEndedJobID,
			}
			ids[i], index[r.ID] = r.ID, i
		}
		if len(ids) == 0 {
			return nil
		}
		held, err := q.JobListHeldBy(ctx, db.JobListHeldByParams{Owners: ids, PerWorker: heldJobsShown})
		if err != nil {
			return fmt.Errorf("listing running jobs of workers: %w", err)
		}
		for _, h := range held {
			w := &out[index[h.LeaseOwner]]
			w.Jobs = append(w.Jobs, HeldJob{ID: h.ID, Kind: h.Kind, App: h.App, Attempt: h.Attempt, LeaseUntil: h.LeaseUntil})
			w.LastJobID = h.ID // the one it took last (ids ascending)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// hourlySucceeded keeps how many jobs each worker completed in each whole
// hour of the outcomes window that ended over five minutes ago (by the
// database clock; WorkerListStatus counts the rest live). A busy fleet
// completes thousands of jobs a day per worker, and counting them again
// on every look at the workers page took 30 ms at 20 workers; each past
// hour is counted once. A completion commits within its statement
// timeout (30 s), long before the five minutes are up, so no job of a
// kept hour appears after it was counted; on a read replica that lags by
// more than five minutes, it can (the figure is then low until the hour
// leaves the window or the server restarts). A job removed from a kept
// hour (retention, by hand) stays in its count.
type hourlySucceeded struct {
	mu    sync.Mutex
	count map[workerHour]int64
}

type workerHour struct {
	worker string
	hour   int64 // Unix seconds of the hour's start
}

// inWholeHours returns, per worker of rows, the jobs it completed in the
// hours rows name (FullFrom to FullTo, the same for every row), counting
// only the hours it does not keep yet, in one statement.
func (h *hourlySucceeded) inWholeHours(ctx context.Context, q *db.Queries, rows []db.WorkerListStatusRow) (map[string]int64, error) {
	if len(rows) == 0 || !rows[0].FullTo.After(rows[0].FullFrom) {
		return nil, nil
	}
	from, to := rows[0].FullFrom, rows[0].FullTo
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.count == nil {
		h.count = make(map[workerHour]int64)
	}
	for k := range h.count {
		if k.hour < from.Unix() {
			delete(h.count, k) // out of the window now
		}
	}
	var missing []string
	missingFrom := to
	for _, r := range rows {
		for at := from; at.Before(to); at = at.Add(time.Hour) {
			if _, ok := h.count[workerHour{r.ID, at.Unix()}]; !ok {
				missing = append(missing, r.ID)
				if at.Before(missingFrom) {
					missingFrom = at
				}
				break
			}
		}
	}
	if len(missing) > 0 {
		counted, err := q.WorkerSucceededByHour(ctx, db.WorkerSucceededByHourParams{Owners: missing, HoursFrom: missingFrom, HoursTo: to})
		if err != nil {
			return nil, err
		}
		for _, w := range missing {
			for at := missingFrom; at.Before(to); at = at.Add(time.Hour) {
				h.count[workerHour{w, at.Unix()}] = 0
			}
		}
		for _, c := range counted {
			h.count[workerHour{c.WorkerID, c.Hour.Unix()}] = c.Succeeded
		}
	}
	sums := make(map[string]int64, len(rows))
	for _, r := range rows {
		for at := from; at.Before(to); at = at.Add(time.Hour) {
			sums[r.ID] += h.count[workerHour{r.ID, at.Unix()}]
		}
	}
	return sums, nil
}
