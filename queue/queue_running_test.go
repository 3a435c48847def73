package queue_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
)

// The queue lists read each queue's running count from queue_running,
// which the count triggers keep (migration 27). Claims, completions,
// failures, releases, cancels, expiries and deletes from many sessions at
// once must leave it equal to a count of the running rows, in every queue,
// at every moment a transaction can see.
func TestQueueRunningCountsFollowTheJobs(t *testing.T) {
	t.Parallel()
	f := setup(t, 40)
	queues := []string{"alpha", "beta", "gamma"}
	var batch []queue.NewJob
	for i := range 1500 {
		batch = append(batch, queue.NewJob{Kind: "noop", Queue: queues[i%3], Payload: json.RawMessage(`{}`)})
	}
	if _, err := f.client.InsertMany(f.ctx, batch); err != nil {
		t.Fatal(err)
	}

	// compare reads both sides in one snapshot.
	compare := func(when string) {
		t.Helper()
		tx, err := f.pool.Begin(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(f.ctx)
		if _, err := tx.Exec(f.ctx, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`); err != nil {
			t.Fatal(err)
		}
		read := func(sql string) map[string]int64 {
			rows, err := tx.Query(f.ctx, sql)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			m := map[string]int64{}
			for rows.Next() {
				var q string
				var n int64
				if err := rows.Scan(&q, &n); err != nil {
					t.Fatal(err)
				}
				m[q] = n
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			return m
		}
		kept := read(`SELECT queue, sum(running)::bigint FROM queue_running GROUP BY queue HAVING sum(running) <> 0`)
		counted := read(`SELECT queue, count(*) FROM jobs WHERE state = 'running' GROUP BY queue`)
		if !maps.Equal(kept, counted) {
			t.Fatalf("%s: queue_running says %v, the running jobs are %v", when, kept, counted)
		}
	}

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	stop := make(chan struct{})
	for w := range 12 {
		wg.Go(func() {
			for {
				jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{
					WorkerID: fmt.Sprintf("w%d", w), Queues: queues, Limit: 1 + rand.IntN(8), Lease: time.Minute,
				})
				if err != nil {
					errs <- err
					return
				}
				if len(jobs) == 0 {
					return
				}
				var done []queue.Completion
				for _, j := range jobs {
					l := testutil.LeaseOf(j)
					switch rand.IntN(6) {
					case 0:
						_, err = f.client.Fail(f.ctx, l, "flaky", true)
					case 1:
						_, err = f.client.Release(f.ctx, l)
					case 2:
						_, err = f.client.CancelOne(f.ctx, j.ID, "tester")
					case 3:
						// left running: its lease is shortened and reaped below
						_, err = f.pool.Exec(f.ctx, `UPDATE jobs SET lease_until = now() WHERE id = $1`, j.ID)
					default:
						done = append(done, queue.Completion{Lease: l, Result: json.RawMessage(`{}`)})
					}
					if err != nil {
						errs <- err
						return
					}
				}
				if len(done) > 0 {
					if _, err := f.client.CompleteMany(f.ctx, done); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if _, err := f.client.ReapExpired(f.ctx, 50); err != nil {
				errs <- err
				return
			}
		}
	})
	for range 20 {
		time.Sleep(20 * time.Millisecond)
		compare("while draining")
	}
	// A running job deleted (as SQL written by hand would) leaves its
	// queue's count too.
	if _, err := f.pool.Exec(f.ctx, `DELETE FROM jobs WHERE id = (SELECT min(id) FROM jobs WHERE state = 'running')`); err != nil {
		t.Fatal(err)
	}
	compare("after a delete")
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	compare("after the drain")

	// And a queue whose jobs run is listed with the same count.
	held, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: "holder", Queues: []string{"delta"}, Limit: 5, Lease: time.Minute})
	if err != nil || len(held) != 0 {
		t.Fatalf("claim of an empty queue: %v, %d jobs", err, len(held))
	}
	for range 3 {
		testutil.InsertJob(t, f.ctx, f.client, testutil.Job{Kind: "noop", Queue: "delta"})
	}
	if held, err = f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: "holder", Queues: []string{"delta"}, Limit: 2, Lease: time.Minute}); err != nil || len(held) != 2 {
		t.Fatalf("claim: %v, %d jobs", err, len(held))
	}
	compare("two of delta held")
	list, err := f.client.Queues(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range list {
		if q.Name == "delta" && (q.Running != 2 || q.Pending != 1) {
			t.Fatalf("delta listed with %d running, %d pending; want 2 and 1", q.Running, q.Pending)
		}
	}
	one, err := f.client.Queue(f.ctx, "delta")
	if err != nil || one.Running != 2 {
		t.Fatalf("Queue(delta) = %+v, %v; want 2 running", one, err)
	}
}
