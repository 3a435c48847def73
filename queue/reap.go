package queue

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/leasehold/leasehold/db"
)

// ReaperMaxSleep bounds the active reaper's sleep. A lease that ends
// later cannot be missed: the reaper wakes before its deadline and plans
// again. Claims of shorter leases, retries and scheduled jobs announce
// their deadlines by NOTIFY. So an idle reaper costs two statements per
// ReaperMaxSleep, and the default 30 s lease is claimed without a
// notification.
const ReaperMaxSleep = 30 * time.Second

// reaperMaxSleep is ReaperMaxSleep as the claim statements know it.
const reaperMaxSleep = ReaperMaxSleep

// Reaped is one job taken back from an expired lease.
type Reaped struct {
	JobID      int64
	Queue      string
	State      State // pending, dead or cancelled
	LeaseUntil time.Time
	ReapedAt   time.Time
	// NotDelivered says the lease was a hand-over its worker never
	// confirmed (SPEC lease rule 11): the attempt ended not_delivered and
	// did not count.
	NotDelivered bool
}

// ReapExpired takes back up to limit expired leases, by the database
// clock (a test client's time, see At), and wakes the workers of their
// queues.
func (c *Client) ReapExpired(ctx context.Context, limit int32) ([]Reaped, error) {
	rows, err := c.q.JobReapExpired(ctx, db.JobReapExpiredParams{Max: limit, Now: c.now})
	if err != nil {
		return nil, fmt.Errorf("reaping expired leases: %w", err)
	}
	out := make([]Reaped, 0, len(rows))
	queues := map[string]bool{}
	for _, row := range rows {
		rp := Reaped{JobID: row.ID, Queue: row.Queue, State: State(row.State), ReapedAt: row.ReapedAt, NotDelivered: row.Undelivered}
		if row.LeaseUntil != nil {
			rp.LeaseUntil = *row.LeaseUntil
		}
		out = append(out, rp)
		// A job back to pending is due soon; one that ended may have
		// freed room under a limit for the jobs waiting behind it.
		queues[rp.Queue] = true
	}
	if len(queues) > 0 {
		if err := c.q.JobNotify(ctx, strings.Join(mapKeys(queues), ",")); err != nil {
			return out, fmt.Errorf("waking workers: %w", err)
		}
	}
	return out, nil
}

// AbandonHandovers ends at once the hand-overs of jobs, just claimed by a
// worker whose request is gone (its answer cannot be sent): the reaper
// ends each not_delivered, as at the hand-over deadline (SPEC lease rule
// 11), and the jobs are due again. Jobs whose hand-over was confirmed or
// has ended are left alone. It returns how many it ended.
func (c *Client) AbandonHandovers(ctx context.Context, jobs []Job) (int, error) {
	if len(jobs) == 0 {
		return 0, nil
	}
	p := db.JobHandoverAbandonParams{Ids: make([]int64, len(jobs)), LeaseTokens: make([]int64, len(jobs)), WorkerID: *jobs[0].LeaseOwner}
	for i, j := range jobs {
		p.Ids[i], p.LeaseTokens[i] = j.ID, j.LeaseToken
	}
	ended, err := c.q.JobHandoverAbandon(ctx, p)
	if err != nil {
		return 0, fmt.Errorf("abandoning hand-overs: %w", err)
	}
	return len(ended), nil
}

// Deadlines is what the active reaper reads after each reclaim.
type Deadlines struct {
	// Lease and Due are how long until the earliest lease ends and until
	// the next scheduled job (a retry after its backoff, a job submitted
	// for later) is due, by the database clock; math.MaxInt64 for none.
	Lease, Due time.Duration
	// Announced says that scheduled jobs fell due since the previous look
	// and idle workers were told so.
	Announced bool
	// Checked is when this look was made, by the database clock: the
	// next look's since.
	Checked time.Time
}

// NextDeadlines reads the next deadlines, and announces to idle workers,
// in the same statement, the scheduled jobs that fell due after since
// (the previous look's Checked; nil: ever). Announcing what fell due
// between two looks, rather than at a planned wake-up, means no due time
// is missed: not one that passed while the reaper was awake for a lease,
// nor one that passed while no reaper was active.
func (c *Client) NextDeadlines(ctx context.Context, since *time.Time) (Deadlines, error) {
	next, err := c.q.JobNextDeadline(ctx, since)
	if err != nil {
		return Deadlines{}, fmt.Errorf("reading next deadline: %w", err)
	}
	return Deadlines{
		Lease: msDuration(next.LeaseWaitMs), Due: msDuration(next.DueWaitMs),
		Announced: next.Announced, Checked: next.CheckedAt,
	}, nil
}

// msDuration turns a wait the database computed into a duration; +Inf
// and what does not fit become the longest one.
func msDuration(ms float64) time.Duration {
	if math.IsInf(ms, 1) || ms >= float64(math.MaxInt64/int64(time.Millisecond)) {
		return math.MaxInt64
	}
	return time.Duration(ms * float64(time.Millisecond))
}
