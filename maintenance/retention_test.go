package maintenance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/maintenance"
	"github.com/leasehold/leasehold/queue"
)

func TestParseRetention(t *testing.T) {
	t.Parallel()
	const d = 24 * time.Hour
	cases := []struct {
		in   string
		want maintenance.Retention
	}{
		{"", maintenance.Retention{queue.StateSucceeded: 7 * d, queue.StateCancelled: 7 * d, queue.StateDead: 30 * d}},
		{maintenance.DefaultRetentionSpec, maintenance.Retention{queue.StateSucceeded: 7 * d, queue.StateCancelled: 7 * d, queue.StateDead: 30 * d}},
		{"off", maintenance.Retention{}},
		{"succeeded=2s", maintenance.Retention{queue.StateSucceeded: 2 * time.Second, queue.StateCancelled: 7 * d, queue.StateDead: 30 * d}},
		{"dead=36h, cancelled=1d", maintenance.Retention{queue.StateSucceeded: 7 * d, queue.StateCancelled: d, queue.StateDead: 36 * time.Hour}},
		{"succeeded=off", maintenance.Retention{queue.StateCancelled: 7 * d, queue.StateDead: 30 * d}},
		{"succeeded=1h30m", maintenance.Retention{queue.StateSucceeded: 90 * time.Minute, queue.StateCancelled: 7 * d, queue.StateDead: 30 * d}},
	}
	for _, c := range cases {
		got, err := maintenance.ParseRetention(c.in)
		if err != nil {
			t.Fatalf("ParseRetention(%q): %v", c.in, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) || len(got) != len(c.want) {
			t.Errorf("ParseRetention(%q) = %v, want %v", c.in, got, c.want)
		}
	}
	for _, bad := range []string{"7d", "pending=1d", "running=1h", "succeeded", "succeeded=", "succeeded=7", "succeeded=1.5d",
		"succeeded=-1d", "succeeded=500ms", "succeeded=7days", "dead=1w"} {
		_, err := maintenance.ParseRetention(bad)
		if err == nil {
			t.Errorf("ParseRetention(%q) accepted", bad)
			continue
		}
		// The message names what was wrong.
		item := bad
		if _, v, ok := strings.Cut(bad, "="); ok && v != "" {
			item = v
		}
		if !strings.Contains(err.Error(), item) {
			t.Errorf("ParseRetention(%q): %q does not name %q", bad, err, item)
		}
	}
	if s := maintenance.DefaultRetention().String(); s != maintenance.DefaultRetentionSpec {
		t.Errorf("default retention prints as %q", s)
	}
}

// age backdates a job: created and (if finished) finished ago.
func (f *fixture) age(t *testing.T, id int64, ago time.Duration) {
	t.Helper()
	_, err := f.pool.Exec(f.ctx, `
		UPDATE jobs SET created_at = now() - $2 * interval '1 millisecond',
		       finished_at = CASE WHEN finished_at IS NOT NULL THEN now() - $2 * interval '1 millisecond' END
		WHERE id = $1`, id, ago.Milliseconds())
	if err != nil {
		t.Fatal(err)
	}
}

// history counts the rows a job's history holds in each table.
func (f *fixture) history(t *testing.T, id int64) string {
	t.Helper()
	var jobs, attempts, events, effects, artifacts int
	err := f.pool.QueryRow(f.ctx, `
		SELECT (SELECT count(*) FROM jobs WHERE id = $1), (SELECT count(*) FROM attempts WHERE job_id = $1),
		       (SELECT count(*) FROM events WHERE job_id = $1), (SELECT count(*) FROM effects WHERE job_id = $1),
		       (SELECT count(*) FROM artifacts WHERE job_id = $1)`, id).Scan(&jobs, &attempts, &events, &effects, &artifacts)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("jobs=%d attempts=%d events=%d effects=%d artifacts=%d", jobs, attempts, events, effects, artifacts)
}

// finishWithHistory runs a job to succeeded through one failed attempt,
// leaving an attempt row, events, an effect and an artifact naming sum.
func (f *fixture) finishWithHistory(t *testing.T, sum string) queue.Job {
	t.Helper()
	f.insert(t, testutil.Job{MaxAttempts: 3})
	j := f.claimOne(t, "w1", time.Minute)
	if _, err := f.client.Fail(f.ctx, testutil.LeaseOf(j), "boom", true); err != nil {
		t.Fatal(err)
	}
	j = f.claimOne(t, "w1", time.Minute)
	l := testutil.LeaseOf(j)
	if err := f.client.Progress(f.ctx, l, 0.5, "half"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.StartEffect(f.ctx, l, "mail"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.RecordArtifact(f.ctx, l, queue.Artifact{Kind: queue.ArtifactText, Name: "log.txt",
		ContentType: "text/plain", Size: 3, SHA256: sum}); err != nil {
		t.Fatal(err)
	}
	done, err := f.client.Complete(f.ctx, l, json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	return done
}

// fakeFiles records what the pruner hands the file collector.
type fakeFiles struct{ reqs []queue.FileGCRequest }

func (c *fakeFiles) CollectFiles(_ context.Context, req queue.FileGCRequest) (queue.FileGCResult, error) {
	c.reqs = append(c.reqs, req)
	return queue.FileGCResult{Files: int64(len(req.Candidates))}, nil
}

func TestPruneDeletesOnlyExpired(t *testing.T) {
	t.Parallel()
	f := setup(t, 8)
	const day = 24 * time.Hour
	sumOld := strings.Repeat("a", 64)
	sumShared := strings.Repeat("b", 64)

	// Created long ago, finished lately (a retry after a long backoff):
	// kept, by finished_at.
	lateFinish := f.finishWithHistory(t, strings.Repeat("c", 64))
	f.age(t, lateFinish.ID, 9*day)
	if _, err := f.pool.Exec(f.ctx, "UPDATE jobs SET finished_at = now() - interval '1 day' WHERE id = $1", lateFinish.ID); err != nil {
		t.Fatal(err)
	}
	oldDone := f.finishWithHistory(t, sumOld)
	f.age(t, oldDone.ID, 8*day)
	oldShared := f.finishWithHistory(t, sumShared)
	f.age(t, oldShared.ID, 8*day)
	young := f.finishWithHistory(t, sumShared) // keeps sumShared referenced
	f.age(t, young.ID, 6*day)

	oldPending := f.insert(t, testutil.Job{})
	f.age(t, oldPending.ID, 60*day)
	oldRunning := f.insert(t, testutil.Job{})
	f.age(t, oldRunning.ID, 60*day)
	var cancelled, deadYoung, deadOld queue.Job
	// Ids follow creation, as they do in use: the older dead job first.
	for i, ago := range []time.Duration{8 * day, 31 * day, 10 * day} {
		j := f.insert(t, testutil.Job{MaxAttempts: 1})
		if i == 0 {
			var err error
			if cancelled, err = f.client.CancelOne(f.ctx, j.ID, "test"); err != nil {
				t.Fatal(err)
			}
			f.age(t, j.ID, ago)
			continue
		}
		f.age(t, j.ID, ago)
		if i == 1 {
			deadOld = j
		} else {
			deadYoung = j
		}
	}
	// Claim every pending job and put each where it belongs: the dead
	// ones fail for good, one goes back to pending, one stays running.
	claimed, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: "w2", Queues: []string{"default"}, Limit: 10, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range claimed {
		switch j.ID {
		case deadYoung.ID, deadOld.ID:
			if _, err := f.client.Fail(f.ctx, testutil.LeaseOf(j), "permanent", false); err != nil {
				t.Fatal(err)
			}
		case oldPending.ID:
			if _, err := f.client.Release(f.ctx, testutil.LeaseOf(j)); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.age(t, deadYoung.ID, 10*day)
	f.age(t, deadOld.ID, 31*day)
	f.age(t, oldPending.ID, 60*day)
	f.age(t, oldRunning.ID, 60*day)
	if j, _ := f.client.Get(f.ctx, oldRunning.ID); j.State != queue.StateRunning {
		t.Fatalf("setup: job %d is %s, want running", j.ID, j.State)
	}
	if j, _ := f.client.Get(f.ctx, oldPending.ID); j.State != queue.StatePending {
		t.Fatalf("setup: job %d is %s, want pending", j.ID, j.State)
	}

	before := map[int64]string{}
	all := []int64{lateFinish.ID, oldDone.ID, oldShared.ID, young.ID, oldPending.ID, oldRunning.ID, cancelled.ID, deadYoung.ID, deadOld.ID}
	for _, id := range all {
		before[id] = f.history(t, id)
	}
	files := &fakeFiles{}
	p := maintenance.NewPruner(f.pool, maintenance.PrunerConfig{Retention: maintenance.DefaultRetention(), Files: files, Batch: 2, Pause: time.Millisecond})
	want := map[queue.State]int64{queue.StateSucceeded: 2, queue.StateCancelled: 1, queue.StateDead: 1}

	t.Run("DryRunDeletesNothing", func(t *testing.T) {
		res, err := p.Prune(f.ctx, maintenance.PruneOptions{DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(res.Jobs) != fmt.Sprint(want) {
			t.Fatalf("dry run would prune %v, want %v", res.Jobs, want)
		}
		for _, id := range all {
			if got := f.history(t, id); got != before[id] {
				t.Fatalf("dry run changed job %d: %s, was %s", id, got, before[id])
			}
		}
		// Only the file no kept job names is offered, as unreferenced.
		if len(files.reqs) != 1 || !files.reqs[0].DryRun || fmt.Sprint(files.reqs[0].Candidates) != fmt.Sprint([]string{sumOld}) {
			t.Fatalf("dry run asked the collector %+v, want the candidate %s", files.reqs, sumOld)
		}
	})

	files.reqs = nil
	res, err := p.Prune(f.ctx, maintenance.PruneOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(res.Jobs) != fmt.Sprint(want) {
		t.Fatalf("pruned %v, want %v", res.Jobs, want)
	}
	gone := "jobs=0 attempts=0 events=0 effects=0 artifacts=0"
	for _, id := range []int64{oldDone.ID, oldShared.ID, cancelled.ID, deadOld.ID} {
		if got := f.history(t, id); got != gone {
			t.Errorf("expired job %d: %s, want %s", id, got, gone)
		}
	}
	if !strings.Contains(before[oldDone.ID], "attempts=1") || !strings.Contains(before[oldDone.ID], "effects=1") ||
		!strings.Contains(before[oldDone.ID], "artifacts=1") || strings.Contains(before[oldDone.ID], "events=0") {
		t.Fatalf("setup: the old job had no full history: %s", before[oldDone.ID])
	}
	for _, id := range []int64{lateFinish.ID, young.ID, oldPending.ID, oldRunning.ID, deadYoung.ID} {
		if got := f.history(t, id); got != before[id] {
			t.Errorf("kept job %d: %s, was %s", id, got, before[id])
		}
	}
	// The collector was offered both files of the deleted artifacts (it
	// checks the references itself).
	var offered []string
	for _, r := range files.reqs {
		if r.DryRun {
			t.Fatal("a real pass asked for a dry run")
		}
		offered = append(offered, r.Candidates...)
	}
	if !strings.Contains(fmt.Sprint(offered), sumOld) || !strings.Contains(fmt.Sprint(offered), sumShared) {
		t.Errorf("collector offered %v, want %s and %s", offered, sumOld, sumShared)
	}
	assertCountsExact(t, f)

	// A second pass finds nothing.
	res, err = p.Prune(f.ctx, maintenance.PruneOptions{})
	if err != nil || res.Total() != 0 {
		t.Fatalf("second pass: %v, %v", res.Jobs, err)
	}
}

func TestPruneOffKeepsEverything(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	j := f.insert(t, testutil.Job{})
	if _, err := f.client.CancelOne(f.ctx, j.ID, "test"); err != nil {
		t.Fatal(err)
	}
	f.age(t, j.ID, 400*24*time.Hour)
	off, _ := maintenance.ParseRetention("off")
	res, err := maintenance.NewPruner(f.pool, maintenance.PrunerConfig{Retention: off}).Prune(f.ctx, maintenance.PruneOptions{})
	if err != nil || res.Total() != 0 {
		t.Fatalf("prune with retention off: %v, %v", res.Jobs, err)
	}
	if got := f.history(t, j.ID); !strings.HasPrefix(got, "jobs=1") {
		t.Fatalf("job gone with retention off: %s", got)
	}
}

func TestPruneExpiredSessions(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	_, err := f.pool.Exec(f.ctx, `
		WITH u AS (INSERT INTO users (username, password_hash, role) VALUES ('alice', 'x', 'viewer') RETURNING id)
		INSERT INTO sessions (token_hash, user_id, csrf_token, expires_at)
		SELECT convert_to('old', 'UTF8'), id, 'c', now() - interval '1 minute' FROM u
		UNION ALL SELECT convert_to('live', 'UTF8'), id, 'c', now() + interval '1 hour' FROM u`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := maintenance.NewPruner(f.pool, maintenance.PrunerConfig{}).Prune(f.ctx, maintenance.PruneOptions{}); err != nil {
		t.Fatal(err)
	}
	var left string
	if err := f.pool.QueryRow(f.ctx, `SELECT string_agg(convert_from(token_hash, 'UTF8'), ',') FROM sessions`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != "live" {
		t.Fatalf("sessions left: %q, want live", left)
	}
}

// Two servers' pruners: one holds the role, the other waits; when the
// active one stops, the other takes over.
func TestPrunerOneActive(t *testing.T) {
	t.Parallel()
	f := setup(t, 8)
	ctx1, stop1 := context.WithCancel(f.ctx)
	defer stop1()
	ctx2, stop2 := context.WithCancel(f.ctx)
	defer stop2()
	p1 := maintenance.NewPruner(f.pool, maintenance.PrunerConfig{Retention: maintenance.DefaultRetention()})
	p2 := maintenance.NewPruner(f.pool, maintenance.PrunerConfig{Retention: maintenance.DefaultRetention()})
	done1 := make(chan struct{})
	go func() { _ = p1.Run(ctx1); close(done1) }()
	waitFor(t, "first pruner active", p1.Active)
	go func() { _ = p2.Run(ctx2) }()
	for range 20 {
		if p2.Active() {
			t.Fatal("two pruners active at once")
		}
		time.Sleep(25 * time.Millisecond)
	}
	stop1()
	<-done1
	waitFor(t, "second pruner takes over", p2.Active)
}
