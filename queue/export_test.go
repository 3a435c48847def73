package queue

import "time"

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
