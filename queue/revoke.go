package queue

import (
	"context"
	"fmt"
)

// EndLeasesOf ends every running lease held by owner at once, for a worker
// whose token was revoked: the reaper takes the jobs back now rather than
// when their leases would have run out, and they retry elsewhere as after
// any lost lease. It also wakes every waiting claim (of any server), so
// that the long polls of the revoked token end (ErrTokenRevoked) rather
// than wait out their wait_ms; the others claim once and wait on. It
// returns the ids of the jobs whose leases it ended.
//
// Call it after the token's revoke has committed, in a later statement:
// then it sees every job that a claim made with the token took (see
// JobClaim's gate).
func (c *Client) EndLeasesOf(ctx context.Context, owner string) ([]int64, error) {
	ids, err := c.q.JobLeasesEndByOwner(ctx, owner)
	if err != nil {
		return nil, fmt.Errorf("ending the leases of %s: %w", owner, err)
	}
	if len(ids) > 0 {
		c.wakeReaper(ctx)
	}
	if err := c.q.JobNotify(ctx, ""); err != nil {
		c.logger.Warn("waking waiting claims", "err", err)
	}
	return ids, nil
}
