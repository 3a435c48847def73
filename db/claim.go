package db

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
// queries together. The claim's rows are read by the generated JobClaim,
// through batchRows.)
func JobClaimAndLimits(ctx context.Context, conn Batcher, arg JobClaimParams) (claimed []JobClaimRow, limited bool, err error) {
	b := &pgx.Batch{}
	// The claim's generic plan is the plan its custom ones are (the claim
	// index in order, then the primary key), but PostgreSQL, not knowing
	// the LIMIT, costs it higher and plans the claim again on every call:
	// 3 µs of planning per job claimed in batches of 100. For this
	// transaction only (the rest of it, if conn is a transaction), the
	// cached generic plan is used.
	b.Queue("SELECT set_config('plan_cache_mode', 'force_generic_plan', true)")
	b.Queue(jobClaim, arg.TokenID, arg.Now, arg.Queues, arg.Devices, arg.Max, arg.WorkerID, arg.LeaseMs, arg.HandoverMs, arg.WakeBelowMs).
		Query(func(rows pgx.Rows) error {
			var err error
			claimed, err = New(batchRows{rows}).JobClaim(ctx, arg)
			return err
		})
	b.Queue(jobClaimLimitedAny, arg.Queues).QueryRow(func(row pgx.Row) error { return row.Scan(&limited) })
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, false, err
	}
	return claimed, limited, nil
}

// batchRows hands rows already sent for in a batch to the generated code
// that reads them: its one Query gets them, whatever it asks.
type batchRows struct{ rows pgx.Rows }

var errBatchRows = errors.New("db: batchRows answers one Query only")

func (b batchRows) Query(context.Context, string, ...interface{}) (pgx.Rows, error) {
	return b.rows, nil
}

func (batchRows) Exec(context.Context, string, ...interface{}) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errBatchRows
}

func (batchRows) QueryRow(context.Context, string, ...interface{}) pgx.Row {
	return errRow{errBatchRows}
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
