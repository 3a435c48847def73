package db

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Batcher sends several statements in one round trip: a pool, a
// connection or a transaction.
type Batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// JobClaimAndLimits runs JobClaim and JobClaimLimitedAny as one pipeline
// with a single sync, so in one round trip and one transaction: a claim
// learns whether limits apply to its queues without a statement and a
// commit of its own. (Hand-written: sqlc has no way to send two different
// queries together.)
func JobClaimAndLimits(ctx context.Context, conn Batcher, arg JobClaimParams) (claimed []JobClaimRow, limited bool, err error) {
	b := &pgx.Batch{}
	b.Queue(jobClaim, arg.Queues, arg.Devices, arg.Max, arg.WorkerID, arg.LeaseMs, arg.WakeBelowMs).
		Query(func(rows pgx.Rows) error {
			var err error
			claimed, err = pgx.CollectRows(rows, pgx.RowToStructByPos[JobClaimRow])
			return err
		})
	b.Queue(jobClaimLimitedAny, arg.Queues).QueryRow(func(row pgx.Row) error { return row.Scan(&limited) })
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, false, err
	}
	return claimed, limited, nil
}
