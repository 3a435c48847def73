// Package audit keeps the trail of who changed what (SPEC "Roles and
// audit"). A request's caller travels in its context (NewContext, set by
// the server's authentication); a change writes its row with Write, on
// the transaction of the change itself, so that a change that rolls back
// leaves no row and a row never names a change that did not happen.
//
// A context without a caller writes nothing: a Go program driving the
// queue package directly, the scheduler and the reaper are not people.
package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/role"
)

// Actor is who made a change: Name is "user:NAME", "token:NAME" or
// "cli:NAME", Addr the client address as the sign-in throttle sees it
// ("" from the command line).
type Actor struct {
	Name string
	Role role.Role
	Addr string
}

type actorKey struct{}

// NewContext returns ctx carrying a as the caller of what it changes.
func NewContext(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// FromContext is the caller ctx carries; ok is false without one.
func FromContext(ctx context.Context) (a Actor, ok bool) {
	a, ok = ctx.Value(actorKey{}).(Actor)
	return a, ok
}

// Entry is one change: Action names it ("job.retry", "jobs.cancel",
// "queue.update", "user.add", "sign_in.failed"…), Target what it was done
// to ("job:42", "queue:default", "user:alice"), Detail the rest (a bulk
// action's selection and count, a queue's new settings).
type Entry struct {
	Action string
	Target string
	Detail map[string]any
}

// Write records e as done by the caller ctx carries, through q (the
// change's transaction). Without a caller it writes nothing.
func Write(ctx context.Context, q *db.Queries, e Entry) error {
	a, ok := FromContext(ctx)
	if !ok {
		return nil
	}
	return WriteAs(ctx, q, a, e)
}

// Change runs change in one transaction on pool with the audit row it
// returns, written by Write: the row commits with the change or not at
// all. q is the caller's queries, bound to the transaction for change.
// An entry without an Action (a change that changed nothing) writes no
// row.
func Change(ctx context.Context, pool *pgxpool.Pool, q *db.Queries, change func(q *db.Queries) (Entry, error)) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		qtx := q.WithTx(tx)
		e, err := change(qtx)
		if err != nil || e.Action == "" {
			return err
		}
		return Write(ctx, qtx, e)
	})
}

// WriteAs records e as done by a, whatever ctx carries: a sign-in, whose
// caller is known only once its password was checked, or a refused one,
// which has no session at all.
func WriteAs(ctx context.Context, q *db.Queries, a Actor, e Entry) error {
	detail := []byte("{}")
	if len(e.Detail) > 0 {
		var err error
		if detail, err = json.Marshal(e.Detail); err != nil {
			return fmt.Errorf("encoding the audit detail of %s: %w", e.Action, err)
		}
	}
	err := q.AuditInsert(ctx, db.AuditInsertParams{
		Actor: a.Name, Role: string(a.Role), Addr: a.Addr,
		Action: e.Action, Target: e.Target, Detail: detail,
	})
	if err != nil {
		return fmt.Errorf("writing the audit row of %s: %w", e.Action, err)
	}
	return nil
}

// Row is one change as the trail keeps it.
type Row = db.AuditLog

// Filter narrows a read of the trail; the zero Filter reads everything.
// Action matches exactly or as the prefix before a dot ("job" matches
// "job.retry"). Before is the paging cursor: the id of the last row of
// the previous page.
type Filter struct {
	Actor, Action, Target string
	Since, Until          time.Time
	Before                int64
}

// MaxPage bounds a page of the trail.
const MaxPage = 500

// List reads up to limit rows that f picks, newest first, and the cursor
// of the next page (0 at the end).
func List(ctx context.Context, q *db.Queries, f Filter, limit int) (rows []Row, next int64, err error) {
	if limit <= 0 || limit > MaxPage {
		limit = MaxPage
	}
	p := db.AuditListParams{Before: f.Before, PageSize: int32(limit + 1),
		Actor: nonEmpty(f.Actor), Action: nonEmpty(f.Action), Target: nonEmpty(f.Target)}
	if !f.Since.IsZero() {
		p.Since = &f.Since
	}
	if !f.Until.IsZero() {
		p.Until = &f.Until
	}
	found, err := q.AuditList(ctx, p)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the audit trail: %w", err)
	}
	if len(found) > limit {
		found = found[:limit]
		next = found[limit-1].ID
	}
	return found, next, nil
}

// DefaultRetention is how long the trail keeps a row unless told
// otherwise: a year.
const DefaultRetention = 365 * 24 * time.Hour

// Prune deletes up to batch rows older than keep, in database time, and
// says how many it deleted.
func Prune(ctx context.Context, q *db.Queries, keep time.Duration, batch int) (int64, error) {
	n, err := q.AuditPrune(ctx, db.AuditPruneParams{KeepMs: keep.Milliseconds(), Batch: int32(batch)})
	if err != nil {
		return 0, fmt.Errorf("pruning the audit trail: %w", err)
	}
	return n, nil
}

// Expired counts the rows older than keep, in database time: what Prune
// would delete, batch after batch.
func Expired(ctx context.Context, q *db.Queries, keep time.Duration) (int64, error) {
	n, err := q.AuditCountExpired(ctx, keep.Milliseconds())
	if err != nil {
		return 0, fmt.Errorf("counting the expired audit rows: %w", err)
	}
	return n, nil
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
