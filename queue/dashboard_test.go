package queue_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
)

// dashScreenshot records a fake screenshot of l's attempt.
func dashScreenshot(t *testing.T, f *fixture, l queue.Lease, name string) queue.Artifact {
	t.Helper()
	a, err := f.client.RecordArtifact(f.ctx, l, queue.Artifact{
		Kind: queue.ArtifactScreenshot, Name: name, ContentType: "image/png", Size: 10,
		SHA256: fmt.Sprintf("%064x", time.Now().UnixNano()),
	})
	if err != nil {
		t.Fatalf("recording %s: %v", name, err)
	}
	return a
}

func TestRecentDeadByWhenTheyDied(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	older := f.insert(t, jobOpts{maxAttempts: 1})
	newer := f.insert(t, jobOpts{maxAttempts: 1})
	f.insert(t, jobOpts{}) // pending: never listed
	a, b := f.claimOne(t, "w1", time.Minute), f.claimOne(t, "w1", time.Minute)
	if a.ID != older.ID || b.ID != newer.ID {
		t.Fatalf("claimed %d, %d", a.ID, b.ID)
	}
	// The newer job dies first: the older one is the most recent death.
	for _, j := range []queue.Job{b, a} {
		if _, err := f.client.Fail(f.ctx, testutil.LeaseOf(j), "boom", false); err != nil {
			t.Fatal(err)
		}
	}
	dead, err := f.client.RecentDead(f.ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(dead); !slices.Equal(got, []int64{older.ID, newer.ID}) {
		t.Fatalf("recent dead %v, want %v", got, []int64{older.ID, newer.ID})
	}
	if one, _ := f.client.RecentDead(f.ctx, 1); len(one) != 1 || one[0].ID != older.ID {
		t.Fatalf("limit 1: %v", ids(one))
	}
}

func TestLatestScreenshots(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	job := f.insert(t, jobOpts{maxAttempts: 3})
	bare := f.insert(t, jobOpts{queue: "other"})

	// Attempt 1: two screenshots and a text file.
	j := f.claimOne(t, "w1", time.Minute)
	dashScreenshot(t, f, testutil.LeaseOf(j), "1a.png")
	dashScreenshot(t, f, testutil.LeaseOf(j), "1b.png")
	if _, err := f.client.RecordArtifact(f.ctx, testutil.LeaseOf(j), queue.Artifact{
		Kind: queue.ArtifactText, Name: "log.txt", ContentType: "text/plain", Size: 1, SHA256: fmt.Sprintf("%064x", 1),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Fail(f.ctx, testutil.LeaseOf(j), "first", true); err != nil {
		t.Fatal(err)
	}
	// Attempt 2: three screenshots.
	j = f.claimOne(t, "w1", time.Minute)
	dashScreenshot(t, f, testutil.LeaseOf(j), "2a.png")
	b := dashScreenshot(t, f, testutil.LeaseOf(j), "2b.png")
	c := dashScreenshot(t, f, testutil.LeaseOf(j), "2c.png")
	if _, err := f.client.Fail(f.ctx, testutil.LeaseOf(j), "second", true); err != nil {
		t.Fatal(err)
	}
	// Attempt 3 lost its lease before taking any: attempt 2's are shown.
	j = f.claimOne(t, "w1", time.Minute)
	if _, err := f.client.Fail(f.ctx, testutil.LeaseOf(j), "third", true); err != nil {
		t.Fatal(err)
	}

	shots, err := f.client.LatestScreenshots(f.ctx, []int64{job.ID, bare.ID, 999999}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(shots) != 1 {
		t.Fatalf("screenshots for %d jobs, want 1: %+v", len(shots), shots)
	}
	s := shots[job.ID]
	if s.Attempt != 2 || s.Total != 3 || len(s.Artifacts) != 2 || s.Artifacts[0].ID != b.ID || s.Artifacts[1].ID != c.ID {
		t.Fatalf("latest screenshots %+v, want the last two of attempt 2 (%d, %d) of 3", s, b.ID, c.ID)
	}
	if s.Artifacts[1].Name != "2c.png" || s.Artifacts[1].Kind != queue.ArtifactScreenshot {
		t.Fatalf("artifact %+v", s.Artifacts[1])
	}
	if none, err := f.client.LatestScreenshots(f.ctx, nil, 2); err != nil || len(none) != 0 {
		t.Fatalf("no ids: %v %v", none, err)
	}
}

func TestWorkerStatuses(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	for _, w := range []string{"w-online", "w-quiet", "w-gone"} {
		if err := f.client.WorkerSeen(f.ctx, queue.Presence{ID: w, Devices: []string{"pixel7"}, Queues: []string{"default"}}); err != nil {
			t.Fatal(err)
		}
	}
	for w, ago := range map[string]string{"w-quiet": "10 minutes", "w-gone": "2 days"} {
		if _, err := f.pool.Exec(f.ctx, "UPDATE workers SET last_seen = now() - $1::interval WHERE id = $2", ago, w); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		f.insert(t, jobOpts{})
	}
	claim := func(worker string, n int) []queue.Job {
		jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: worker, Queues: []string{"default"}, Limit: n, Lease: time.Minute})
		if err != nil || len(jobs) != n {
			t.Fatalf("claiming %d for %s: %v, %d", n, worker, err, len(jobs))
		}
		return jobs
	}
	online, quiet := claim("w-online", 2), claim("w-quiet", 1)
	claim("w-gone", 1)

	ws, err := f.client.WorkerStatuses(f.ctx, 24*time.Hour, time.Minute, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || ws[0].ID != "w-online" || ws[1].ID != "w-quiet" {
		t.Fatalf("workers %+v", ws)
	}
	if !ws[0].Online || ws[1].Online {
		t.Fatalf("online: %v, %v", ws[0].Online, ws[1].Online)
	}
	var held []int64
	for _, j := range ws[0].Jobs {
		held = append(held, j.ID)
		if j.LeaseUntil == nil || j.Attempt != 1 {
			t.Fatalf("held job %+v", j)
		}
	}
	if !slices.Equal(held, ids(online)) || ws[0].Running != 2 {
		t.Fatalf("w-online holds %v (running %d), want %v", held, ws[0].Running, ids(online))
	}
	if len(ws[1].Jobs) != 1 || ws[1].Jobs[0].ID != quiet[0].ID || ws[1].Running != 1 {
		t.Fatalf("w-quiet holds %+v", ws[1].Jobs)
	}
	if *ws[0].Device != "pixel7" || !slices.Equal(ws[0].Queues, []string{"default"}) {
		t.Fatalf("device and queues %+v", ws[0])
	}
}

// A worker's completed jobs of the last 24 h are exact across the hours
// of the window, and each past hour is counted once: a job removed from
// an hour already counted stays in this client's figure, while jobs
// completed since are counted at once.
func TestWorkerStatusesCountsEachPastHourOnce(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	f.seen(t, "w-idle")
	jobs := f.holding(t, "w-busy", 40)
	for _, j := range jobs {
		if _, err := f.client.Complete(f.ctx, testutil.LeaseOf(j), nil); err != nil {
			t.Fatal(err)
		}
	}
	// Job k finished k·41 minutes ago: 0 … 35 are within 24 h (35·41 min
	// is 23.9 h), 36 … 39 are not (24.6 h and more).
	if _, err := f.pool.Exec(f.ctx, `UPDATE jobs SET finished_at = now() - k * interval '41 minutes'
FROM (SELECT id, row_number() OVER (ORDER BY id) - 1 AS k FROM jobs) o WHERE o.id = jobs.id`); err != nil {
		t.Fatal(err)
	}
	succeeded := func(c *queue.Client) map[string]int64 {
		t.Helper()
		ws, err := c.WorkerStatuses(f.ctx, 24*time.Hour, time.Minute, 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, w := range ws {
			got[w.ID] = w.Succeeded
		}
		return got
	}
	want := map[string]int64{"w-busy": 36, "w-idle": 0}
	for try := range 2 {
		if got := succeeded(f.client); !maps.Equal(got, want) {
			t.Fatalf("look %d: completed jobs %v, want %v", try+1, got, want)
		}
	}
	// Job 15 (10.25 h ago, a past hour already counted) goes; a new job
	// is completed now.
	if _, err := f.pool.Exec(f.ctx, "DELETE FROM jobs WHERE id = $1", jobs[15].ID); err != nil {
		t.Fatal(err)
	}
	f.insert(t, jobOpts{})
	if _, err := f.client.Complete(f.ctx, testutil.LeaseOf(f.claimOne(t, "w-busy", time.Minute)), nil); err != nil {
		t.Fatal(err)
	}
	if got, want := succeeded(f.client), (map[string]int64{"w-busy": 37, "w-idle": 0}); !maps.Equal(got, want) {
		t.Errorf("after a removal and a completion: %v, want %v (the removed job's hour was counted before)", got, want)
	}
	if got, want := succeeded(queue.NewClient(f.pool, nil)), (map[string]int64{"w-busy": 36, "w-idle": 0}); !maps.Equal(got, want) {
		t.Errorf("a new client: %v, want %v", got, want)
	}
}

// A worker holding more jobs than the page lists shows its newest ones,
// oldest first, with its exact count.
func TestWorkerStatusesListsNewestHeldJobs(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	const n = 25
	jobs := f.holding(t, "w-many", n)
	all := ids(jobs)
	slices.Sort(all)
	ws, err := f.client.WorkerStatuses(f.ctx, time.Hour, time.Minute, 24*time.Hour)
	if err != nil || len(ws) != 1 {
		t.Fatalf("workers %+v: %v", ws, err)
	}
	var held []int64
	for _, j := range ws[0].Jobs {
		held = append(held, j.ID)
	}
	if want := all[n-20:]; !slices.Equal(held, want) || ws[0].Running != n || ws[0].LastJobID != all[n-1] {
		t.Fatalf("held %v (running %d, last %d), want %v (running %d, last %d)", held, ws[0].Running, ws[0].LastJobID, want, n, all[n-1])
	}
}

// seen records a direct worker's presence on the default queue.
func (f *fixture) seen(t *testing.T, worker string) {
	t.Helper()
	if err := f.client.WorkerSeen(f.ctx, queue.Presence{ID: worker, Queues: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
}

// holding makes worker seen and holding n new jobs of the default queue.
func (f *fixture) holding(t *testing.T, worker string, n int) []queue.Job {
	t.Helper()
	f.seen(t, worker)
	for range n {
		f.insert(t, jobOpts{})
	}
	jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: worker, Queues: []string{"default"}, Limit: n, Lease: time.Minute})
	if err != nil || len(jobs) != n {
		t.Fatalf("claimed %d of %d: %v", len(jobs), n, err)
	}
	return jobs
}
