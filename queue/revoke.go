package queue

import (
	"context"
	"fmt"
)

// EndLeasesOf ends every running lease held by owner at once, for a worker
// whose token was revoked: the reaper takes the jobs back now rather than
// when their leases would have run out, and they retry elsewhere as after
// any lost lease. It returns the ids of the jobs whose leases it ended.
func (c *Client) EndLeasesOf(ctx context.Context, owner string) ([]int64, error) {
	ids, err := c.q.JobLeasesEndByOwner(ctx, owner)
	if err != nil {
		return nil, fmt.Errorf("ending the leases of %s: %w", owner, err)
	}
	if len(ids) > 0 {
		c.wakeReaper(ctx)
	}
	return ids, nil
}
