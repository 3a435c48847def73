package queue_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/leasehold/leasehold/queue"
)

// The listing indexes leave running jobs out (migration 15), so List reads
// them apart: every filter must still list exactly the jobs a plain scan
// finds, running ones included, newest first, page by page.
func TestListMatchesAPlainScanInEveryState(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	// 240 jobs over two kinds, two queues and three apps, in every state.
	if _, err := f.pool.Exec(f.ctx, `
		INSERT INTO jobs (kind, queue, app, state, attempt, lease_owner, lease_until, finished_at)
		SELECT CASE WHEN i % 3 = 0 THEN 'report' ELSE 'investigate' END,
		       CASE WHEN i % 4 = 0 THEN 'phones' ELSE 'default' END,
		       CASE WHEN i % 5 = 0 THEN NULL ELSE 'com.example.app' || (i % 3) END,
		       s, 1,
		       CASE WHEN s = 'running' THEN 'w' END,
		       CASE WHEN s = 'running' THEN now() + interval '1 hour' END,
		       CASE WHEN s IN ('succeeded', 'dead', 'cancelled') THEN now() END
		FROM generate_series(1, 240) i,
		     LATERAL (SELECT (ARRAY['pending', 'running', 'succeeded', 'dead', 'cancelled'])[1 + (i * 7) % 5]::job_state AS s) st`); err != nil {
		t.Fatal(err)
	}
	var filters []queue.Filter
	for _, state := range append([]queue.State{""}, queue.States...) {
		for _, kind := range []string{"", "report"} {
			for _, q := range []string{"", "phones"} {
				for _, app := range []string{"", "com.example.app1"} {
					filters = append(filters, queue.Filter{State: state, Kind: kind, Queue: q, App: app})
				}
			}
		}
	}
	for _, flt := range filters {
		var want []int64
		rows, err := f.pool.Query(f.ctx, `
			SELECT id FROM jobs
			WHERE ($1 = '' OR state::text = $1) AND ($2 = '' OR kind = $2)
			  AND ($3 = '' OR queue = $3) AND ($4 = '' OR app = $4)
			ORDER BY id DESC`, string(flt.State), flt.Kind, flt.Queue, flt.App)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			want = append(want, id)
		}
		rows.Close()

		var got []int64
		before := int64(0)
		for page := 0; ; page++ {
			jobs, next, err := f.client.List(f.ctx, flt, before, 7)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range jobs {
				got = append(got, j.ID)
			}
			if next == nil {
				break
			}
			before = *next
			if page > 100 {
				t.Fatalf("%+v: more than 100 pages", flt)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("filter %s: listed %d jobs %v, a plain scan finds %d %v", fmt.Sprintf("%+v", flt), len(got), got, len(want), want)
		}
	}
}
