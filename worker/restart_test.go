package worker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// A worker restarted under the same id is a new start: /workers dated
// every start from the id's first presence ever ("started 16 min ago"
// for a worker restarted a minute ago). Two real starts of one id; the
// first is moved 16 minutes into the past, as if it had been then.
func TestRestartUnderTheSameIDDatesItsStart(t *testing.T) {
	t.Parallel()
	f := setup(t)
	type row struct{ started, seen, now time.Time }
	read := func() (row, bool) {
		var r row
		err := f.pool.QueryRow(f.ctx, `SELECT started_at, last_seen, now() FROM workers WHERE id = 'test-worker'`).Scan(&r.started, &r.seen, &r.now)
		return r, err == nil
	}
	describe := func(r row) string { return fmt.Sprintf("%+v", r) }

	stop := f.start(t, worker.Config{Queues: []string{"restart-q"}})
	testutil.Await(t, 10*time.Second, read, describe)
	stop()
	if _, err := f.pool.Exec(f.ctx, `UPDATE workers SET started_at = now() - interval '16 minutes', last_seen = now() - interval '1 minute' WHERE id = 'test-worker'`); err != nil {
		t.Fatal(err)
	}
	before, _ := read()

	f.start(t, worker.Config{Queues: []string{"restart-q"}})
	again := testutil.Await(t, 10*time.Second, func() (row, bool) {
		r, ok := read()
		return r, ok && r.seen.After(before.now)
	}, describe)
	if again.started.Before(before.now) {
		t.Fatalf("restarted worker: started_at %v, before the restart at %v", again.started, before.now)
	}

	// A presence that is not a process's first keeps the start.
	if err := f.client.WorkerSeen(f.ctx, queue.Presence{ID: "test-worker", Queues: []string{"restart-q"}}); err != nil {
		t.Fatal(err)
	}
	if later, _ := read(); !later.started.Equal(again.started) || !later.seen.After(again.seen) {
		t.Errorf("a later presence moved started_at: %v, then %v", again.started, later.started)
	}
}
