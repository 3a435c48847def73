package queue_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/audit"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/role"
)

// A change and its audit row commit in one transaction: the row and the
// changed job carry the same transaction id, a change that is refused
// writes no row, and a row that cannot be written takes the change back
// with it.
func TestAuditRowCommitsWithItsChange(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	alice := audit.NewContext(f.ctx, audit.Actor{Name: "user:alice", Role: role.Operator, Addr: "192.0.2.7"})
	rows := func() int {
		t.Helper()
		var n int
		if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM audit_log`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Without a caller (a Go program, the scheduler): no row.
	if _, _, err := f.client.Insert(f.ctx, queue.NewJob{Kind: "noop"}); err != nil {
		t.Fatal(err)
	}
	if n := rows(); n != 0 {
		t.Fatalf("%d audit rows after a change with no caller, want 0", n)
	}

	job, _, err := f.client.Insert(alice, queue.NewJob{Kind: "noop", Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	var sameTx bool
	var actor, addr, action, target string
	err = f.pool.QueryRow(f.ctx, `SELECT a.xmin = j.xmin, a.actor, a.addr, a.action, a.target
		FROM audit_log a, jobs j WHERE j.id = $1 ORDER BY a.id DESC LIMIT 1`, job.ID).Scan(&sameTx, &actor, &addr, &action, &target)
	if err != nil {
		t.Fatal(err)
	}
	if !sameTx || actor != "user:alice" || addr != "192.0.2.7" || action != "job.submit" || target != "job:"+strconv.FormatInt(job.ID, 10) {
		t.Fatalf("submit's row: same transaction %v, actor %q, addr %q, action %q, target %q", sameTx, actor, addr, action, target)
	}

	// Refused: a retry of a pending job, a bad cap. No row.
	before := rows()
	if _, err := f.client.RetryOne(alice, job.ID, "user:alice"); !errors.Is(err, queue.ErrWrongState) {
		t.Fatalf("retry of a pending job: %v, want ErrWrongState", err)
	}
	if _, err := f.client.PatchQueue(alice, "q", queue.QueuePatch{MaxRunning: ptrTo(int32(-1))}, "user:alice"); err == nil {
		t.Fatal("a cap of -1 was accepted")
	}
	if n := rows(); n != before {
		t.Fatalf("refused changes wrote %d audit rows", n-before)
	}

	// A row that cannot be written (here a constraint refuses it) takes
	// its change back: the queue stays unpaused, the job pending.
	if _, err := f.pool.Exec(f.ctx, `ALTER TABLE audit_log ADD CONSTRAINT refuse_for_test CHECK (actor <> 'user:mallory') NOT VALID`); err != nil {
		t.Fatal(err)
	}
	mallory := audit.NewContext(context.WithoutCancel(f.ctx), audit.Actor{Name: "user:mallory", Role: role.Admin})
	var pgErr *pgconn.PgError
	if _, err := f.client.PatchQueue(mallory, "q", queue.QueuePatch{Paused: ptrTo(true)}, "user:mallory"); !errors.As(err, &pgErr) {
		t.Fatalf("pause with an unwritable audit row: %v, want the row's error", err)
	}
	if q, err := f.client.Queue(f.ctx, "q"); err != nil || q.Paused {
		t.Fatalf("queue after a pause whose audit row failed: paused %v (%v), want not paused", q.Paused, err)
	}
	if _, err := f.client.CancelOne(mallory, job.ID, "user:mallory"); !errors.As(err, &pgErr) {
		t.Fatalf("cancel with an unwritable audit row: %v, want the row's error", err)
	}
	if j, err := f.client.Get(f.ctx, job.ID); err != nil || j.State != queue.StatePending {
		t.Fatalf("job after a cancel whose audit row failed: %s (%v), want pending", j.State, err)
	}
	if _, _, err := f.client.Insert(mallory, queue.NewJob{Kind: "noop", Queue: "mallory"}); !errors.As(err, &pgErr) {
		t.Fatalf("submit with an unwritable audit row: %v, want the row's error", err)
	}
	var made int
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM jobs WHERE queue = 'mallory'`).Scan(&made); err != nil || made != 0 {
		t.Fatalf("%d jobs left by a submit whose audit row failed (%v), want 0", made, err)
	}
}
