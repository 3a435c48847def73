package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/db"
)

// At returns a client whose lease statements (claim, heartbeat, complete,
// fail) take at for the time where they would read the database clock, so
// that a test moves a lease past its deadline without sleeping. Limited
// claims still read the clock: use At with jobs no limit applies to.
func (c *Client) At(at time.Time) *Client {
	return &Client{pool: c.pool, q: c.q, logger: c.logger, now: &at}
}

// ReapExpired runs the reaper's statement once at c's time (the database
// clock unless c came from At) and returns the ids of the jobs it took back.
func (c *Client) ReapExpired(ctx context.Context) ([]int64, error) {
	rows, err := c.q.JobReapExpired(ctx, db.JobReapExpiredParams{Max: 1000, Now: c.now})
	if err != nil {
		return nil, fmt.Errorf("reaping expired leases: %w", err)
	}
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids, nil
}
