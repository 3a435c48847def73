package queue

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/audit"
	"github.com/leasehold/leasehold/db"
)

// Rate limits (SPEC "Rate limits").
//
// A job may name rate-limit keys; a key may have a budget per window
// ("60/min", "10000/day"). A claim takes a job only while every key it
// names has budget left in the current window of each of its budgets, and
// one claim (one attempt started) spends one unit of each. An attempt that
// ends early (released, failed pre-flight, lost) gives nothing back. A key
// without budgets is unlimited.
//
// Windows are fixed, not sliding, and not a token bucket: a window of a
// second, minute, hour or day starts at a multiple of its length since the
// Unix epoch (a day at UTC midnight), and its budget is spent by claims
// within it. Why: the budgets people set are the providers' quotas
// ("10,000 requests per day"), which are counted that way; the state is
// one counter per key and window, read and written in the claim's own
// transaction under a row lock, so exactness under any number of claimers
// is the database's, and "budget returns at T" has one answer, the
// window's end. The price is the burst at a window's edge (a budget can
// be spent at the end of one window and again at the start of the next),
// which a sliding log avoids at the cost of a row per claim.
//
// The claim (claimRated) is one transaction of two statements:
// JobClaimRatedLock locks due jobs that name keys none of which is spent
// (SKIP LOCKED, so claimers share them out), and the budgets of the keys
// they name, in key order, reading what is spent (FOR UPDATE returns the
// newest row: claims of one key take turns); JobClaimRated claims those
// of the candidates the budgets leave room for and spends them. Jobs that
// name no key never meet any of it: JobClaim leaves them out by its
// index's own predicate.
//
// Rate limits combine with concurrency keys and queue caps: this claim
// alone takes a rate-limited job, whatever else limits it, and for a
// keyed job or one of a capped queue it takes the advisory lock a limited
// claim of that key or queue takes (without waiting), and counts what
// runs under it in its second statement (chooseRated, JobClaimRated).

// Bounds of the keys a job names.
const (
	// MaxRateLimits is the most keys one job may name.
	MaxRateLimits = 8
	// MaxRateLimitKey is the longest key, in characters.
	MaxRateLimitKey = 200
	// MaxRateBudget bounds one budget.
	MaxRateBudget = 1_000_000_000
)

// rateWindows are the windows a budget may have, by the unit it is
// written with.
var rateWindows = map[string]time.Duration{
	"s": time.Second, "sec": time.Second, "second": time.Second,
	"min": time.Minute, "m": time.Minute, "minute": time.Minute,
	"h": time.Hour, "hour": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour,
}

// Budget is how many claims one window of a key allows.
type Budget struct {
	Limit  int
	Window time.Duration
}

// String is the budget as it is written: "60/min".
func (b Budget) String() string {
	unit := map[time.Duration]string{time.Second: "s", time.Minute: "min", time.Hour: "h", 24 * time.Hour: "day"}[b.Window]
	return strconv.Itoa(b.Limit) + "/" + unit
}

// ParseBudget reads "60/min": a whole number from 1 to MaxRateBudget, a
// slash and a unit (s, min, h, day, and their long names).
func ParseBudget(s string) (Budget, error) {
	n, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	w, known := rateWindows[strings.ToLower(strings.TrimSpace(unit))]
	if !ok || !known {
		return Budget{}, fmt.Errorf("%q: must be N/s, N/min, N/h or N/day", truncate(s, 40))
	}
	limit, err := strconv.Atoi(strings.TrimSpace(n))
	if err != nil || limit < 1 || limit > MaxRateBudget {
		return Budget{}, fmt.Errorf("%q: the number must be between 1 and %d", truncate(s, 40), MaxRateBudget)
	}
	return Budget{Limit: limit, Window: w}, nil
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// CheckRateLimitKey refuses a key that is empty, longer than
// MaxRateLimitKey characters, or not printable text.
func CheckRateLimitKey(field, k string) error {
	if k == "" || !utf8.ValidString(k) || utf8.RuneCountInString(k) > MaxRateLimitKey || hasControl(k) {
		return invalid(field, "must be 1 to %d printable characters", MaxRateLimitKey)
	}
	return nil
}

// normalizeRateLimits checks the keys a job names (Normalize calls it):
// at most MaxRateLimits, each valid, none twice. An empty list is none.
func (j *NewJob) normalizeRateLimits() error {
	if len(j.RateLimits) == 0 {
		j.RateLimits = nil
		return nil
	}
	if len(j.RateLimits) > MaxRateLimits {
		return invalid("rate_limits", "must name at most %d keys", MaxRateLimits)
	}
	for i, k := range j.RateLimits {
		if err := CheckRateLimitKey(fmt.Sprintf("rate_limits[%d]", i), k); err != nil {
			return err
		}
		if slices.Contains(j.RateLimits[:i], k) {
			return invalid(fmt.Sprintf("rate_limits[%d]", i), "names %q twice", truncate(k, 40))
		}
	}
	return nil
}

// RateLimit is one key's budgets and what the current windows spent.
type RateLimit struct {
	Key     string
	Budgets []RateBudget
}

// RateBudget is one budget of a key with its current window.
type RateBudget struct {
	Budget
	// Used is what the current window has spent; WindowEnd is when it
	// ends (and the budget returns whole).
	Used      int
	WindowEnd time.Time
	UpdatedAt time.Time
	UpdatedBy *string
}

// RateLimits lists every key that has budgets, by key, with its budgets
// by window length.
func (c *Client) RateLimits(ctx context.Context) ([]RateLimit, error) {
	rows, err := c.q.RateLimitList(ctx, c.now)
	if err != nil {
		return nil, fmt.Errorf("listing rate limits: %w", err)
	}
	var out []RateLimit
	for _, r := range rows {
		if len(out) == 0 || out[len(out)-1].Key != r.Key {
			out = append(out, RateLimit{Key: r.Key})
		}
		last := &out[len(out)-1]
		last.Budgets = append(last.Budgets, RateBudget{
			Budget: Budget{Limit: int(r.Budget), Window: time.Duration(r.WindowS) * time.Second},
			Used:   int(r.Used), WindowEnd: r.WindowEnd, UpdatedAt: r.UpdatedAt, UpdatedBy: r.UpdatedBy,
		})
	}
	return out, nil
}

// RateLimit is one key's budgets; ErrNotFound when it has none.
func (c *Client) RateLimit(ctx context.Context, key string) (RateLimit, error) {
	all, err := c.RateLimits(ctx)
	if err != nil {
		return RateLimit{}, err
	}
	for _, rl := range all {
		if rl.Key == key {
			return rl, nil
		}
	}
	return RateLimit{}, ErrNotFound
}

// SetRateLimit replaces key's budgets by budgets (written "60/min"), at
// most one per window length; what the current windows have spent stays.
// No budgets is DeleteRateLimit. actor is recorded as who set them.
func (c *Client) SetRateLimit(ctx context.Context, key string, budgets []string, actor string) (RateLimit, error) {
	if err := CheckRateLimitKey("key", key); err != nil {
		return RateLimit{}, err
	}
	if len(budgets) > len(rateWindowLengths) {
		return RateLimit{}, invalid("budgets", "must hold at most %d budgets, one per window", len(rateWindowLengths))
	}
	if len(budgets) == 0 {
		return RateLimit{Key: key}, c.DeleteRateLimit(ctx, key)
	}
	var windows, limits []int32
	for i, s := range budgets {
		b, err := ParseBudget(s)
		if err != nil {
			return RateLimit{}, invalid(fmt.Sprintf("budgets[%d]", i), "%s", err.Error())
		}
		w := int32(b.Window / time.Second)
		if slices.Contains(windows, w) {
			return RateLimit{}, invalid(fmt.Sprintf("budgets[%d]", i), "a second budget for the same window")
		}
		windows, limits = append(windows, w), append(limits, int32(b.Limit))
	}
	err := audit.Change(ctx, c.pool, c.q, func(q *db.Queries) (audit.Entry, error) {
		err := q.RateLimitSet(ctx, db.RateLimitSetParams{Key: key, WindowS: windows, Budgets: limits, Actor: actor})
		if err != nil {
			return audit.Entry{}, fmt.Errorf("setting rate limit %s: %w", key, inputRefused(err, "key"))
		}
		return audit.Entry{Action: "rate_limit.set", Target: "rate_limit:" + key, Detail: map[string]any{"budgets": budgets}}, nil
	})
	if err != nil {
		return RateLimit{}, err
	}
	// A budget raised or a window dropped may let waiting jobs run.
	c.notifyAllQueues(ctx)
	return c.RateLimit(ctx, key)
}

var rateWindowLengths = []time.Duration{time.Second, time.Minute, time.Hour, 24 * time.Hour}

// DeleteRateLimit removes every budget of key: its jobs are no longer
// limited. ErrNotFound when it had none.
func (c *Client) DeleteRateLimit(ctx context.Context, key string) error {
	if err := CheckRateLimitKey("key", key); err != nil {
		return err
	}
	err := audit.Change(ctx, c.pool, c.q, func(q *db.Queries) (audit.Entry, error) {
		n, err := q.RateLimitDelete(ctx, key)
		if err != nil {
			return audit.Entry{}, fmt.Errorf("deleting rate limit %s: %w", key, err)
		}
		if n == 0 {
			return audit.Entry{}, ErrNotFound
		}
		return audit.Entry{Action: "rate_limit.delete", Target: "rate_limit:" + key}, nil
	})
	if err != nil {
		return err
	}
	c.notifyAllQueues(ctx)
	return nil
}

// notifyAllQueues wakes the idle workers of every queue: a rate-limit
// key's jobs, or the jobs a changed availability window lets a worker
// take, may be in any of them. An empty payload names every queue (the
// listeners' rule), so this costs one notification and no read.
func (c *Client) notifyAllQueues(ctx context.Context) {
	if err := c.q.JobNotify(ctx, ""); err != nil {
		c.logger.WarnContext(ctx, "notifying workers", "err", err)
	}
}

// claimRated claims up to limit due jobs that name rate-limit keys, within
// their budgets and, for those that also have a concurrency key or a
// capped queue, within those limits (see the comment at the top of this
// file). found reports that there were due jobs whose keys were not
// spent, claimed or not. A claim that came back short because another
// claimer held a key or a queue it needed tries again, as a limited
// claim does (limitedRetries): the holder does not claim rate-limited
// jobs for it.
func (c *Client) claimRated(ctx context.Context, p ClaimParams, limit int, lease time.Duration) (jobs []Job, found bool, err error) {
	delay := limitedRetryDelay
	for try := 0; ; try++ {
		once, contended, foundOnce, err := c.claimRatedOnce(ctx, p, limit-len(jobs), lease)
		jobs = append(jobs, once...)
		found = found || foundOnce
		if err != nil || !contended || len(jobs) >= limit || try >= limitedRetries {
			return jobs, found, err
		}
		select {
		case <-ctx.Done():
			return jobs, found, nil
		case <-time.After(delay):
		}
		delay *= 2
	}
}

// claimRatedOnce is one rate-limited claim, one transaction of two round
// trips. contended reports a candidate left out because another claimer
// held its key's or its queue's lock.
func (c *Client) claimRatedOnce(ctx context.Context, p ClaimParams, limit int, lease time.Duration) (jobs []Job, contended, found bool, err error) {
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return nil, false, false, fmt.Errorf("claiming rate-limited jobs: %w", err)
	}
	// A connection left in the transaction by an error is closed, not
	// reused (pgxpool closes one released in a transaction).
	defer conn.Release()
	cands, err := db.JobClaimRatedBegin(ctx, conn, db.JobClaimRatedLockParams{
		WorkerID: p.WorkerID, Devices: append([]string{}, p.Devices...), Now: c.now, Queues: p.Queues, Max: int32(limit),
	})
	if err != nil {
		return nil, false, false, fmt.Errorf("claiming rate-limited jobs: %w", err)
	}
	var claim *db.JobClaimRatedParams
	chosen := chooseRated(cands)
	if len(chosen.ids) > 0 || len(chosen.limited) > 0 {
		claim = &db.JobClaimRatedParams{
			TokenID: tokenID(p), WorkerID: p.WorkerID, LeaseMs: int32(lease / time.Millisecond), Now: c.now,
			HandoverMs: handoverMs(p.Handover, lease), Ids: chosen.ids, WakeBelowMs: int32(reaperMaxSleep / time.Millisecond),
			LimitedIds: chosen.limited, LockedKeys: chosen.keys, LockedQueues: chosen.queues,
		}
	}
	rows, err := db.JobClaimRatedCommit(ctx, conn, claim)
	if err != nil {
		return nil, false, len(cands) > 0, fmt.Errorf("claiming rate-limited jobs: %w", err)
	}
	return toJobs(rows), chosen.contended, len(cands) > 0, nil
}

// ratedChoice is what a rate-limited claim takes of its candidates, in
// claim order: ids, and limited, those with a concurrency key or in a
// capped queue (JobClaimRated counts them again under the locks it holds
// for them, keys and queues).
type ratedChoice struct {
	ids, limited []int64
	keys, queues []string
	contended    bool
}

// chooseRated is the candidates a claim may take, in claim order: each
// only while every rate-limit key it names has room left (the least room
// of the key's budgets, less what the candidates before it took; a key
// without budgets is unlimited), and, for a job with a concurrency key or
// in a capped queue, while the claim holds that limit's lock and the room
// it saw is not taken (JobClaimRated counts again under the lock). A job
// that does not fit takes nothing, and the ones after it are still looked
// at.
func chooseRated(cands []db.JobClaimRatedLockRow) ratedChoice {
	var out ratedChoice
	if len(cands) == 0 {
		return out
	}
	// Every row carries the same locked budgets.
	left := make(map[string]int32, len(cands[0].BudgetKeys))
	for i, k := range cands[0].BudgetKeys {
		room := max(cands[0].BudgetRooms[i], 0)
		if l, ok := left[k]; !ok || room < l {
			left[k] = room
		}
	}
	keyTaken := map[string]int64{}
	queueTaken := map[string]int64{}
	for _, cand := range cands {
		if cand.ConcurrencyKey != "" && !cand.KeyLocked || cand.QueueCapped && !cand.QueueLocked {
			out.contended = true
			continue
		}
		if cand.ConcurrencyKey != "" && cand.KeyRunning+keyTaken[cand.ConcurrencyKey] >= int64(cand.ConcurrencyLimit) ||
			cand.QueueCapped && queueTaken[cand.Queue] >= cand.QueueRoom {
			continue
		}
		fits := true
		for _, k := range cand.RateLimits {
			if l, limited := left[k]; limited && l < 1 {
				fits = false
			}
		}
		if !fits {
			continue
		}
		for _, k := range cand.RateLimits {
			if _, limited := left[k]; limited {
				left[k]--
			}
		}
		if cand.ConcurrencyKey != "" {
			if keyTaken[cand.ConcurrencyKey] == 0 {
				out.keys = append(out.keys, cand.ConcurrencyKey)
			}
			keyTaken[cand.ConcurrencyKey]++
		}
		if cand.QueueCapped {
			if queueTaken[cand.Queue] == 0 {
				out.queues = append(out.queues, cand.Queue)
			}
			queueTaken[cand.Queue]++
		}
		if cand.ConcurrencyKey != "" || cand.QueueCapped {
			out.limited = append(out.limited, cand.ID)
		} else {
			out.ids = append(out.ids, cand.ID)
		}
	}
	return out
}
