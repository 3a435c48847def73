package queue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/db"
)

// Limited claims (paused and capped queues, concurrency keys).
//
// JobClaim, the fast path, never takes a job a limit applies to. Every
// fast claim also asks, in the same round trip, whether any limit applies
// to the worker's queues at all (JobClaimLimitedAny); only then does a
// claim run a limited one, and while limits apply, before the fast path: a transaction that takes an advisory lock per limit without
// waiting (JobClaimLimitedLock), then counts what runs under the limits
// it holds and claims within them (JobClaimLimited). Claimers of one key
// or one capped queue take turns, whatever their number, and none waits
// inside a statement.

// limitedRetries is how often a limited claim tries again, after
// limitedRetryDelay and double that, when limits it needed were held by
// other claimers and it came back short: the holder may have claimed less
// than there was room for (its own batch was full).
const (
	limitedRetries    = 2
	limitedRetryDelay = 2 * time.Millisecond
)

// claimLimited claims up to limit jobs that limits apply to, and with
// withFree, in the same transaction, free jobs for the room left (see
// claimLimitedOnce). found reports that any limit applies to p's queues
// (a capped queue, or due keyed jobs), whether or not it had room.
// rated reports that rate-limited jobs are due (JobClaimLimitedLock asks,
// as the fast claim's JobClaimLimitedAny does).
func (c *Client) claimLimited(ctx context.Context, p ClaimParams, limit int, lease time.Duration, withFree bool) (jobs []Job, found, rated bool, err error) {
	delay := limitedRetryDelay
	for try := 0; ; try++ {
		once, err := c.claimLimitedOnce(ctx, p, limit-len(jobs), lease, withFree, try >= limitedRetries, nil, nil)
		if err != nil {
			return jobs, true, rated, err
		}
		jobs = append(jobs, once.jobs...)
		found = found || once.limits > 0
		rated = rated || once.rated
		if !once.contended || len(jobs) >= limit || try >= limitedRetries {
			return jobs, found, rated, nil
		}
		select {
		case <-ctx.Done():
			return jobs, found, rated, nil
		case <-time.After(delay):
		}
		delay *= 2
	}
}

// openQueues are queues but closed.
func openQueues(queues, closed []string) []string {
	if len(closed) == 0 {
		return queues
	}
	var open []string
	for _, q := range queues {
		if !slices.Contains(closed, q) {
			open = append(open, q)
		}
	}
	return open
}

// limitsSeen remembers, per set of queues and devices, whether limits
// applied at the last claim (every claim finds out). While they do,
// claims try the limited jobs first. Only the order of claims depends on
// it, never a limit.
type limitsSeen struct {
	mu   sync.Mutex
	seen map[string]bool
}

func limitsKey(p ClaimParams) string {
	return strings.Join(p.Queues, ",") + "|" + strings.Join(p.Devices, ",")
}

// known reports that limits applied at the last claim.
func (l *limitsSeen) known(p ClaimParams) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[limitsKey(p)]
}

func (l *limitsSeen) set(p ClaimParams, found bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := limitsKey(p)
	if !found {
		delete(l.seen, key)
		return
	}
	if l.seen == nil || len(l.seen) >= maxGateKeys {
		l.seen = map[string]bool{}
	}
	l.seen[key] = true
}

// limitedClaim is what one limited claim found.
type limitedClaim struct {
	jobs []Job
	// limits is how many limits apply (capped queues, with room or
	// not, and keys of due jobs).
	limits int
	// contended reports that a limit the claim could have claimed under
	// was held by another claimer.
	contended bool
	// rated reports due rate-limited jobs (claimed elsewhere).
	rated bool
}

// claimLimitedOnce is one limited claim, one transaction: it locks the
// limits that have room (JobClaimLimitedLock), claims within those it
// holds (JobClaimLimited), and with withFree claims free jobs for the
// room left (JobClaim) before it commits, from the queues that are
// neither paused nor capped: a claim costs one commit, and none reads
// the jobs waiting behind a cap. A try that found a limit held by
// another claimer leaves the free jobs to a later one (final is the
// last), so that they do not take the room of limited jobs it will
// still try for. The statements go in two round trips, three when free
// jobs follow limited ones (db.JobClaimLimitedBegin). With complete, the
// transaction completes that batch first, in the first round trip, and
// completed gets the leases it took (CompleteManyThenClaim).
func (c *Client) claimLimitedOnce(ctx context.Context, p ClaimParams, limit int, lease time.Duration, withFree, final bool,
	complete *db.JobCompleteManyParams, completed *[]db.JobCompleteManyRow) (limitedClaim, error) {
	var out limitedClaim
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return out, fmt.Errorf("claiming limited jobs: %w", err)
	}
	// A connection left in the transaction by an error is closed, not
	// reused (pgxpool closes one released in a transaction).
	defer conn.Release()
	lock := db.JobClaimLimitedLockParams{
		WorkerID: p.WorkerID, Queues: p.Queues, Devices: append([]string{}, p.Devices...), Max: int32(limit),
	}
	var held []db.JobClaimLimitedLockRow
	if complete != nil {
		*completed, held, err = db.JobCompleteThenClaimBegin(ctx, conn, *complete, lock)
	} else {
		held, err = db.JobClaimLimitedBegin(ctx, conn, lock)
	}
	if err != nil {
		return out, fmt.Errorf("locking limits: %w", err)
	}
	var queues, keys, closed []string
	var keyLimits []int32
	for _, l := range held {
		if l.Scope == "rated" {
			out.rated = true
			continue
		}
		if l.Scope != "key" {
			closed = append(closed, l.Name)
		}
		if l.Scope != "paused" {
			out.limits++
		}
		switch {
		case !l.Locked:
			out.contended = true
		case l.Scope == "queue":
			queues = append(queues, l.Name)
		case l.Scope == "key":
			keys = append(keys, l.Name)
			keyLimits = append(keyLimits, l.FirstLimit)
		}
	}
	var jobs []Job
	open := openQueues(p.Queues, closed)
	freeToo := withFree && (!out.contended || final) && len(open) > 0
	// The claims commit with their last batch, unless completions went
	// first: then what they left free is announced before the COMMIT.
	quiet := complete != nil
	if len(queues) > 0 || len(keys) > 0 {
		// Committed with this batch unless free jobs may follow.
		rows, _, err := db.JobClaimLimitedSend(ctx, conn, &db.JobClaimLimitedParams{
			LockedQueues: append([]string{}, queues...), LockedKeys: append([]string{}, keys...), LockedKeyLimits: append([]int32{}, keyLimits...),
			Queues: p.Queues, Devices: append([]string{}, p.Devices...), Max: int32(limit),
			WorkerID: p.WorkerID, LeaseMs: int32(lease / time.Millisecond), WakeBelowMs: int32(reaperMaxSleep / time.Millisecond),
			HandoverMs: handoverMs(p.Handover, lease), TokenID: tokenID(p),
		}, nil, !freeToo && !quiet)
		if err != nil {
			return limitedClaim{limits: out.limits}, fmt.Errorf("claiming limited jobs: %w", err)
		}
		jobs = toJobs(rows)
		if !freeToo && !quiet {
			out.jobs = jobs
			return out, nil
		}
	}
	var free *db.JobClaimParams
	if freeToo && len(jobs) < limit {
		f := p
		f.Queues = open
		fp := c.claimParams(f, limit-len(jobs), lease)
		free = &fp
	}
	if quiet {
		// The free claim goes with the announcement and the COMMIT: it
		// takes no room the completions freed (leftFree), so one round
		// trip of the completions' round is saved.
		counted, keyed := leftFree(*completed, jobs)
		rows, err := db.JobLimitsFreedCommit(ctx, conn, free, counted, keyed)
		if err != nil {
			return limitedClaim{limits: out.limits}, fmt.Errorf("completing jobs: %w", err)
		}
		out.jobs = append(jobs, toJobs(rows)...)
		return out, nil
	}
	_, rows, err := db.JobClaimLimitedSend(ctx, conn, nil, free, true)
	if err != nil {
		return limitedClaim{limits: out.limits}, fmt.Errorf("claiming jobs: %w", err)
	}
	out.jobs = append(jobs, toJobs(rows)...)
	return out, nil
}

// leftFree is what a transaction that completed done and then claimed
// claimed left free, to announce (job_limits_freed): counted, the queues
// of which it claimed fewer jobs than it completed (those with a cap have
// room); keyed, the queues of the completed jobs whose key it claimed
// fewer jobs of than it completed. Where the claim took back all the room
// the completions freed, a claimer woken would find none: nothing is
// announced, and the round costs one commit instead of a commit and a
// wake of every listening session.
func leftFree(done []db.JobCompleteManyRow, claimed []Job) (counted, keyed []string) {
	byQueue := map[string]int{}
	byKey := map[string]int{}
	for _, j := range claimed {
		byQueue[j.Queue]--
		if j.ConcurrencyKey != nil {
			byKey[*j.ConcurrencyKey]--
		}
	}
	for _, d := range done {
		byQueue[d.Queue]++
		if d.ConcurrencyKey != nil {
			byKey[*d.ConcurrencyKey]++
		}
	}
	for _, d := range done {
		if byQueue[d.Queue] > 0 && !slices.Contains(counted, d.Queue) {
			counted = append(counted, d.Queue)
		}
		if d.ConcurrencyKey != nil && byKey[*d.ConcurrencyKey] > 0 && !slices.Contains(keyed, d.Queue) {
			keyed = append(keyed, d.Queue)
		}
	}
	return counted, keyed
}
