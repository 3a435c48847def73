package queue

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/window"
)

// At returns a client whose lease statements (claim, heartbeat, complete,
// fail) take at for the time where they would read the database clock, so
// that a test moves a lease past its deadline without sleeping. Limited
// claims still read the clock: use At with jobs no limit applies to.
func (c *Client) At(at time.Time) *Client {
	return &Client{pool: c.pool, q: c.q, logger: c.logger, now: &at}
}

// StoredNumber is checkNumber: how many bytes PostgreSQL writes num out in,
// or why it is refused.
func StoredNumber(num string) (stored int, problem string) { return checkNumber([]byte(num)) }

// WindowClosesSQL is availability_closes, the claim statements' twin of
// window.Window.ClosesAt, for w at at: whether it is open, and when it
// closes (zero for never).
func (c *Client) WindowClosesSQL(ctx context.Context, w *window.Window, at time.Time) (time.Time, bool, error) {
	starts, ends := make([]int32, len(w.Spans)), make([]int32, len(w.Spans))
	for i, s := range w.Spans {
		starts[i], ends[i] = int32(s.Start), int32(s.End)
	}
	r, err := c.q.AvailabilityClosesAt(ctx, db.AvailabilityClosesAtParams{Zone: w.Zone, Starts: starts, Ends: ends, At: at})
	if err != nil || r.ClosesEpoch == 0 {
		return time.Time{}, r.Open, err
	}
	return time.Unix(0, int64(r.ClosesEpoch*1e9)).Round(time.Second), r.Open, nil
}
