package queue

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

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

// claimLimited claims up to limit jobs that limits apply to. found
// reports that any limit applies to p's queues (a capped queue, or due
// keyed jobs), whether or not it had room.
func (c *Client) claimLimited(ctx context.Context, p ClaimParams, limit int, lease time.Duration) (jobs []Job, found bool, err error) {
	delay := limitedRetryDelay
	for try := 0; ; try++ {
		got, limits, contended, err := c.claimLimitedOnce(ctx, p, limit-len(jobs), lease)
		if err != nil {
			return jobs, true, err
		}
		jobs = append(jobs, got...)
		found = found || limits > 0
		if !contended || len(jobs) >= limit || try >= limitedRetries {
			return jobs, found, nil
		}
		select {
		case <-ctx.Done():
			return jobs, found, nil
		case <-time.After(delay):
		}
		delay *= 2
	}
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

// claimLimitedOnce is one limited claim. contended reports that a limit
// it could have claimed under was held by another claimer.
func (c *Client) claimLimitedOnce(ctx context.Context, p ClaimParams, limit int, lease time.Duration) (jobs []Job, limits int, contended bool, err error) {
	err = pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		q := c.q.WithTx(tx)
		held, err := q.JobClaimLimitedLock(ctx, db.JobClaimLimitedLockParams{
			Queues: p.Queues, Devices: append([]string{}, p.Devices...), Max: int32(limit),
		})
		if err != nil {
			return fmt.Errorf("locking limits: %w", err)
		}
		var queues, keys []string
		limits = len(held)
		for _, l := range held {
			switch {
			case !l.Locked:
				contended = true
			case l.Scope == "queue":
				queues = append(queues, l.Name)
			default:
				keys = append(keys, l.Name)
			}
		}
		if len(queues) == 0 && len(keys) == 0 {
			return nil
		}
		rows, err := q.JobClaimLimited(ctx, db.JobClaimLimitedParams{
			LockedQueues: append([]string{}, queues...), LockedKeys: append([]string{}, keys...),
			Queues: p.Queues, Devices: append([]string{}, p.Devices...), Max: int32(limit),
			WorkerID: p.WorkerID, LeaseMs: int32(lease / time.Millisecond), WakeBelowMs: int32(reaperMaxSleep / time.Millisecond),
			HandoverMs: handoverMs(p.Handover, lease), TokenID: tokenID(p),
		})
		if err != nil {
			return fmt.Errorf("claiming limited jobs: %w", err)
		}
		jobs = toJobs(rows)
		return nil
	})
	if err != nil {
		return nil, limits, false, err
	}
	return jobs, limits, contended, nil
}
