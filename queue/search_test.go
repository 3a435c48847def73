package queue_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// A search finds its text, as a substring and whatever its case, in a
// job's app, payload, last error and result, running jobs included,
// combined with the other filters, page by page; % and _ are themselves.
// The newest jobs are read first and the index asked for a rarer term:
// both give what a plain scan of every job gives.
func TestSearchFindsTextInEveryFieldAndPages(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	// An old job with rare text, then more jobs than a search reads one
	// by one, so that it must ask the index for the rare term.
	rare := f.insert(t, jobOpts{kind: "app_investigation", payload: `{"app":"com.example.rare","instructions":"Log in as R5CT-Tester"}`})
	filler := make([]queue.NewJob, 5_050)
	for i := range filler {
		filler[i] = queue.NewJob{Kind: "report", Payload: json.RawMessage(fmt.Sprintf(`{"app":"com.example.app%d","instructions":"walk through onboarding"}`, i%100))}
	}
	for b := range slices.Chunk(filler, 5_000) {
		if _, err := f.client.InsertMany(f.ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	// Newer: one that fails, one that succeeds, one that stays running,
	// and literal % and _.
	failed := f.insert(t, jobOpts{kind: "app_investigation", queue: "phones", payload: `{"app":"com.example.crashy"}`, maxAttempts: 1})
	l := f.claimFrom(t, "phones")
	if _, err := f.client.Fail(f.ctx, l, "stuck on the Login Screen after 3 taps", false); err != nil {
		t.Fatal(err)
	}
	done := f.insert(t, jobOpts{kind: "app_investigation", queue: "phones", payload: `{"app":"com.example.ok"}`})
	l = f.claimFrom(t, "phones")
	if _, err := f.client.Complete(f.ctx, l, json.RawMessage(`{"summary":"found the EXPORT button"}`)); err != nil {
		t.Fatal(err)
	}
	running := f.insert(t, jobOpts{kind: "app_investigation", queue: "phones", payload: `{"app":"com.example.busy","instructions":"look for dark mode"}`})
	f.claimFrom(t, "phones")
	percent := f.insert(t, jobOpts{kind: "report", payload: `{"note":"100% done_now"}`})

	search := func(q string, filter queue.Filter, limit int) []int64 {
		t.Helper()
		filter.Text = q
		var ids []int64
		var before int64
		for range 2_000 {
			jobs, next, err := f.client.List(f.ctx, filter, before, limit)
			if err != nil {
				t.Fatalf("search %q: %v", q, err)
			}
			for _, j := range jobs {
				ids = append(ids, j.ID)
			}
			if next == nil {
				return ids
			}
			before = *next
		}
		t.Fatalf("search %q: more than 2,000 pages", q)
		return nil
	}
	scan := func(q string) []int64 {
		t.Helper()
		rows, err := f.pool.Query(f.ctx, `SELECT id FROM jobs WHERE strpos(job_search_text(app, payload, last_error, result), lower($1)) > 0 ORDER BY id DESC`, q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		return ids
	}
	for _, tc := range []struct {
		q    string
		want []int64 // nil: as many as the scan finds (checked > 100)
	}{
		{"r5ct-tester", []int64{rare.ID}},         // old and rare: through the index
		{"login screen", []int64{failed.ID}},      // the last error, case aside
		{"export button", []int64{done.ID}},       // the result
		{"dark mode", []int64{running.ID}},        // a running job
		{"com.example.busy", []int64{running.ID}}, // its app
		{"100% done_", []int64{percent.ID}},       // % and _ as themselves
		{"0%_d", []int64{}},                       // which match nothing else
		{"onboarding", nil},                       // common: a page from the newest jobs
		{"com.example.app7", nil},
	} {
		for _, limit := range []int{7, 500} {
			got := search(tc.q, queue.Filter{}, limit)
			want := tc.want
			if want == nil {
				want = scan(tc.q)
				if len(want) < 100 {
					t.Fatalf("scan of %q found %d jobs: the test's data is wrong", tc.q, len(want))
				}
			}
			if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Errorf("search %q (pages of %d): %d jobs %v…, want %d %v…", tc.q, limit, len(got), got[:min(5, len(got))], len(want), want[:min(5, len(want))])
			}
		}
	}
	// Combined with the other filters.
	if got := search("com.example", queue.Filter{State: queue.StateDead}, 50); !slices.Equal(got, []int64{failed.ID}) {
		t.Errorf("dead jobs with com.example: %v, want [%d]", got, failed.ID)
	}
	if got := search("onboarding", queue.Filter{Queue: "phones"}, 50); len(got) != 0 {
		t.Errorf("onboarding in queue phones: %v, want none", got)
	}
	// Refused: too short, too long, control characters.
	for _, q := range []string{"ab", string(make([]byte, 201)), "abc\x00", "tab\there"} {
		_, _, err := f.client.List(f.ctx, queue.Filter{Text: q}, 0, 10)
		var ve *queue.ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("search %q: %v, want a ValidationError", q, err)
		}
	}
}

func (f *fixture) claimFrom(t *testing.T, queueName string) queue.Lease {
	t.Helper()
	jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: "w", Queues: []string{queueName}, Limit: 1, Lease: time.Minute})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claiming from %s: %v (%d jobs)", queueName, err, len(jobs))
	}
	return queue.Lease{JobID: jobs[0].ID, Token: jobs[0].LeaseToken, WorkerID: "w"}
}
