package queue

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/audit"
	"github.com/leasehold/leasehold/db"
)

// audited runs change in one transaction with the audit row it returns
// (package audit): the row commits with the change or not at all. An
// entry without an Action (a change that changed nothing) writes no row.
func (c *Client) audited(ctx context.Context, change func(q *db.Queries) (audit.Entry, error)) error {
	return pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		q := c.q.WithTx(tx)
		e, err := change(q)
		if err != nil || e.Action == "" {
			return err
		}
		return audit.Write(ctx, q, e)
	})
}
