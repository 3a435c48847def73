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
//
// rated reports a due job of the queues that names rate-limit keys none of
// which is spent (claimed by JobClaimRated*, never by JobClaim).
func JobClaimAndLimits(ctx context.Context, conn Batcher, arg JobClaimParams) (claimed []JobClaimRow, limited, rated bool, err error) {
	b := &pgx.Batch{}
	// The claim's generic plan is the plan its custom ones are (the claim
	// index in order, then the primary key), but PostgreSQL, not knowing
	// the LIMIT, costs it higher and plans the claim again on every call:
	// 3 µs of planning per job claimed in batches of 100. For this
	// transaction only (the rest of it, if conn is a transaction), the
	// cached generic plan is used.
	b.Queue("SELECT set_config('plan_cache_mode', 'force_generic_plan', true)")
	// In the order of JobClaim's generated call (sqlc numbers parameters as they
	// first appear in the statement).
	b.Queue(jobClaim, arg.TokenID, arg.WorkerID, arg.Devices, arg.Now, arg.Queues, arg.Max, arg.LeaseMs, arg.HandoverMs, arg.WakeBelowMs).
		Query(func(rows pgx.Rows) error {
			var err error
			claimed, err = New(batchRows{rows}).JobClaim(ctx, arg)
			return err
		})
	b.Queue(jobClaimLimitedAny, arg.Queues, arg.Now).QueryRow(func(row pgx.Row) error { return row.Scan(&limited, &rated) })
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, false, false, err
	}
	return claimed, limited, rated, nil
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

// A limited claim is one transaction of up to three statements (see
// queue/limits.go), sent in two or three round trips instead of five:
// BEGIN with JobClaimLimitedLock; then JobClaimLimited (when it locked
// anything); then JobClaim for the room left (when its queues have free
// jobs to give) with COMMIT, or COMMIT with the claim before it when no
// free claim follows. A later batch depends on what an earlier one read,
// so they cannot be one. A failed batch leaves the transaction open: the
// caller hands conn back through Release, which closes a connection
// still in a transaction.

// genericPlans makes the statements of the rest of a limited claim's
// transaction run on their cached generic plans, as JobClaimAndLimits
// does for the fast claim: PostgreSQL planned JobClaimLimited again on
// 169 of 203 calls of a capped drain, 1.8 ms each, more than the
// statement's own execution for 100 jobs (2.8 ms).
const genericPlans = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true)"

// JobClaimLimitedBegin begins a limited claim on conn.
func JobClaimLimitedBegin(ctx context.Context, conn Batcher, arg JobClaimLimitedLockParams) (held []JobClaimLimitedLockRow, err error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(genericPlans)
	queueQuery(ctx, b, func(q *Queries) ([]JobClaimLimitedLockRow, error) { return q.JobClaimLimitedLock(ctx, arg) }, &held)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	return held, nil
}

// JobCompleteThenClaimBegin begins a limited claim on conn that first
// completes a batch of the claimer's jobs (JobCompleteMany), in the same
// round trip and transaction: what the batch frees under a limit is room
// the claim that follows can take, with no commit, notification and wake
// between them.
func JobCompleteThenClaimBegin(ctx context.Context, conn Batcher, done JobCompleteManyParams, arg JobClaimLimitedLockParams) (completed []JobCompleteManyRow, held []JobClaimLimitedLockRow, err error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(genericPlans)
	queueQuery(ctx, b, func(q *Queries) ([]JobCompleteManyRow, error) { return q.JobCompleteMany(ctx, done) }, &completed)
	queueQuery(ctx, b, func(q *Queries) ([]JobClaimLimitedLockRow, error) { return q.JobClaimLimitedLock(ctx, arg) }, &held)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, nil, err
	}
	return completed, held, nil
}

// JobLimitsFreedCommit commits a claim begun by JobCompleteThenClaimBegin,
// whose completions were quiet, in one round trip: it claims free jobs
// (free, unless nil), announces the room the completions left under caps
// (counted, the queues that have fewer running jobs than before) and keys
// (keyed, the queues of such keys), as JobCompleteMany announces what it
// frees, and commits. Free jobs take no such room (they have no key, and
// JobClaim takes none of a capped queue), so what to announce is known
// before they are claimed.
func JobLimitsFreedCommit(ctx context.Context, conn Batcher, free *JobClaimParams, counted, keyed []string) (frows []JobClaimRow, err error) {
	b := &pgx.Batch{}
	if free != nil {
		queueQuery(ctx, b, func(q *Queries) ([]JobClaimRow, error) { return q.JobClaim(ctx, *free) }, &frows)
	}
	if len(counted) > 0 || len(keyed) > 0 {
		b.Queue("SELECT job_limits_freed($1::text[], false), job_limits_freed($2::text[], true)", counted, keyed)
	}
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	return frows, nil
}

// JobClaimLimitedSend sends the next statements of a limited claim begun
// on conn: the claim under the locked limits (limited, unless nil), the
// claim of free jobs (free, unless nil), and with commit, COMMIT.
func JobClaimLimitedSend(ctx context.Context, conn Batcher, limited *JobClaimLimitedParams, free *JobClaimParams, commit bool) (lrows []JobClaimLimitedRow, frows []JobClaimRow, err error) {
	b := &pgx.Batch{}
	if limited != nil {
		queueQuery(ctx, b, func(q *Queries) ([]JobClaimLimitedRow, error) { return q.JobClaimLimited(ctx, *limited) }, &lrows)
	}
	if free != nil {
		queueQuery(ctx, b, func(q *Queries) ([]JobClaimRow, error) { return q.JobClaim(ctx, *free) }, &frows)
	}
	if commit {
		b.Queue("COMMIT")
	}
	if b.Len() == 0 {
		return nil, nil, nil
	}
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, nil, err
	}
	return lrows, frows, nil
}

// queueQuery queues on b the one statement the generated query call
// sends, with its arguments, and has call read its rows into out when
// the batch's results come.
func queueQuery[T any](ctx context.Context, b *pgx.Batch, call func(*Queries) (T, error), out *T) {
	var rec recorder
	_, _ = call(New(&rec))
	b.Queue(rec.sql, rec.args...).Query(func(rows pgx.Rows) error {
		var err error
		*out, err = call(New(batchRows{rows}))
		return err
	})
}

// recorder is a DBTX that only notes the statement and arguments of the
// one Query a generated query sends.
type recorder struct {
	sql  string
	args []any
}

var errRecorded = errors.New("db: statement recorded, not sent")

func (r *recorder) Query(_ context.Context, sql string, args ...interface{}) (pgx.Rows, error) {
	r.sql, r.args = sql, args
	return nil, errRecorded
}

func (*recorder) Exec(context.Context, string, ...interface{}) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errRecorded
}

func (*recorder) QueryRow(context.Context, string, ...interface{}) pgx.Row {
	return errRow{errRecorded}
}

// A rate-limited claim (queue/ratelimit.go) is one transaction of two
// statements in two round trips: BEGIN with JobClaimRatedLock, then
// JobClaimRated (unless the claimer chose nothing) with COMMIT. As with a
// limited claim, a failed batch leaves the transaction open for the
// caller's Release to close.

// JobClaimRatedBegin begins a rate-limited claim on conn.
func JobClaimRatedBegin(ctx context.Context, conn Batcher, arg JobClaimRatedLockParams) (cands []JobClaimRatedLockRow, err error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	queueQuery(ctx, b, func(q *Queries) ([]JobClaimRatedLockRow, error) { return q.JobClaimRatedLock(ctx, arg) }, &cands)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	return cands, nil
}

// JobClaimRatedCommit claims what arg names (unless nil) and commits the
// rate-limited claim begun on conn.
func JobClaimRatedCommit(ctx context.Context, conn Batcher, arg *JobClaimRatedParams) (claimed []JobClaimRatedRow, err error) {
	b := &pgx.Batch{}
	if arg != nil {
		queueQuery(ctx, b, func(q *Queries) ([]JobClaimRatedRow, error) { return q.JobClaimRated(ctx, *arg) }, &claimed)
	}
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	return claimed, nil
}
