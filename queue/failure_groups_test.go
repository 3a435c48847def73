package queue_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// Errors that differ only in what the signature masks (numbers, ids,
// times, paths, a URL's path) have one signature; errors that differ in
// their words do not.
func TestErrorSignatureMasksWhatVaries(t *testing.T) {
	t.Parallel()
	f := setup(t, 2)
	sig := func(s string) string {
		t.Helper()
		out, err := f.client.ErrorSignature(f.ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	same := [][2]string{
		{"lease expired: worker w-3 sent no heartbeat after 2026-12-06 20:11:00.123+00",
			"lease expired: worker w-17 sent no heartbeat after 2026-12-05 01:02:03+00"},
		{"element not found after 3000 ms at /data/local/tmp/run-81/step3.png",
			"element not found after 12 ms at /sdcard/Pictures/x.png"},
		{"GET https://api.example.com/v1/users/123?x=1 failed: 503",
			"GET https://api.example.com/v2/orders failed: 502"},
		{"request 550e8400-e29b-41d4-a716-446655440000 refused at 12:04:05, object 0xDEADbeef, sha 9f86d081884c7d65",
			"request 6ba7b810-9dad-11d1-80b4-00c04fd430c8 refused at 7:00, object 0x1, sha 2c26b46b68ffc68f"},
		{"  stuck\ton the login   screen (step 3)\n", "stuck on the login screen (step 12)"},
		{`crash in C:\agents\run-1\log.txt`, `crash in D:\other\log.txt`},
	}
	for _, p := range same {
		if a, b := sig(p[0]), sig(p[1]); a != b {
			t.Errorf("signatures differ:\n  %q -> %q\n  %q -> %q", p[0], a, p[1], b)
		}
	}
	differ := [][2]string{
		{"stuck on the login screen", "stuck on the settings screen"},
		{"GET https://api.example.com/v1 failed", "GET https://cdn.example.com/v1 failed"},
		{"I/O error", "IO error"},
		{"app crashed", "app froze"},
	}
	for _, p := range differ {
		if a, b := sig(p[0]), sig(p[1]); a == b {
			t.Errorf("%q and %q share the signature %q", p[0], p[1], a)
		}
	}
	if got := sig("   "); got != "" {
		t.Errorf("blank error: signature %q, want none", got)
	}
	if got := sig("worker w-3 at 12:04:05 read /a/b/c.txt"); got != "worker w-# at <time> read <path>" {
		t.Errorf("signature = %q", got)
	}
}

// failWith claims a job of queue q and fails it with msg, after
// recording a screenshot with hash screen when it is not nil.
func (f *fixture) failWith(t *testing.T, q string, screen *int64, msg string, retryable bool) queue.Job {
	t.Helper()
	l := f.claimFrom(t, q)
	if screen != nil {
		// An earlier screenshot of another screen: the last one counts.
		other := ^*screen
		for _, h := range []*int64{&other, screen} {
			if _, err := f.client.RecordArtifact(f.ctx, l, queue.Artifact{
				Kind: queue.ArtifactScreenshot, Name: "s.png", ContentType: "image/png", Size: 1,
				SHA256: fmt.Sprintf("%064x", uint64(*h)), ScreenHash: h,
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	j, err := f.client.Fail(f.ctx, l, msg, retryable)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// An attempt joins its failure group when it ends: by its masked error
// and the screen of its last screenshot (near hashes are one screen, far
// ones two, none is its own group); reaped attempts too. The dead-letter
// listing counts each group's dead letters, apps and attempts, and a
// group is retried and cancelled as one selection.
func TestFailureGroupsByErrorAndScreen(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	login := int64(0x0f0f_3c3c_5a5a_9696)
	nearLogin := login ^ 0b1011 // three bits: a clock, a badge
	crash := int64(0x7777_0000_ffff_1234)
	jobIn := func(q, app string, attempts int32) queue.Job {
		return f.insert(t, jobOpts{kind: "app_investigation", queue: q, payload: fmt.Sprintf(`{"app":%q}`, app), maxAttempts: attempts})
	}
	job := func(app string, attempts int32) queue.Job { return jobIn("fg", app, attempts) }

	job("com.example.a", 1)
	a := f.failWith(t, "fg", &login, "element 'Sign in' not found after 3000 ms on w-3 at 2026-12-06 10:00:01", false)
	job("com.example.b", 1)
	b := f.failWith(t, "fg", &nearLogin, "element 'Sign in' not found after 4500 ms on w-17 at 2026-12-06 11:20:00", false)
	job("com.example.a", 1)
	c := f.failWith(t, "fg", &crash, "element 'Sign in' not found after 10 ms on w-1 at 2026-12-06 12:00:00", false)
	job("com.example.a", 1)
	d := f.failWith(t, "fg", nil, "element 'Sign in' not found after 10 ms on w-1 at 2026-12-06 12:00:00", false)
	job("com.example.a", 1)
	e := f.failWith(t, "fg", &login, "the app crashed", false)
	job("com.example.c", 5)
	retrying := f.failWith(t, "fg", &login, "element 'Sign in' not found after 1 ms on w-9 at 2026-12-06 13:00:00", true)

	for _, j := range []queue.Job{a, b, c, d, e, retrying} {
		if j.FailureGroup == nil {
			t.Fatalf("job %d (%s) has no failure group", j.ID, j.State)
		}
	}
	ga := *a.FailureGroup
	if *b.FailureGroup != ga || *retrying.FailureGroup != ga {
		t.Errorf("near screens, same cause: groups %d, %d, %d; want one", ga, *b.FailureGroup, *retrying.FailureGroup)
	}
	distinct := map[int64]bool{ga: true, *c.FailureGroup: true, *d.FailureGroup: true, *e.FailureGroup: true}
	if len(distinct) != 4 {
		t.Errorf("another screen, no screen and another error should be three more groups: %v", distinct)
	}
	if retrying.State != queue.StatePending {
		t.Fatalf("the retryable failure is %s", retrying.State)
	}
	// The attempt row carries the group too.
	var attemptGroup int64
	if err := f.pool.QueryRow(f.ctx, `SELECT failure_group FROM attempts WHERE job_id = $1 AND number = 1`, b.ID).Scan(&attemptGroup); err != nil || attemptGroup != ga {
		t.Errorf("b's attempt: group %d, %v; want %d", attemptGroup, err, ga)
	}

	// A reaped attempt: two workers' leases expire at different times;
	// their errors differ in worker and time only.
	r1 := jobIn("fgr", "com.example.r", 1)
	r2 := jobIn("fgr", "com.example.r", 1)
	now := time.Now()
	for _, w := range []string{"w-4", "w-55"} {
		if _, err := f.client.At(now).Claim(f.ctx, queue.ClaimParams{WorkerID: w, Queues: []string{"fgr"}, Limit: 1, Lease: time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	if reaped := f.reapAt(t, now.Add(time.Minute)); len(reaped) != 2 {
		t.Fatalf("reaped %d jobs, want 2", len(reaped))
	}
	r1, r2 = f.detail(t, r1.ID).Job, f.detail(t, r2.ID).Job
	if r1.FailureGroup == nil || r2.FailureGroup == nil || *r1.FailureGroup != *r2.FailureGroup || distinct[*r1.FailureGroup] {
		t.Errorf("reaped jobs' groups: %v, %v; want one new group", r1.FailureGroup, r2.FailureGroup)
	}

	groups, err := f.client.FailureGroups(f.ctx, queue.FailureGroupQuery{Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[int64]queue.FailureGroup{}
	for _, g := range groups {
		byID[g.ID] = g
	}
	if len(groups) != 5 {
		t.Errorf("%d dead-letter groups, want 5 (login, crash screen, no screen, crash error, reaped)", len(groups))
	}
	g := byID[ga]
	if g.Dead != 2 || g.Attempts != 3 || !slices.Equal(g.Apps, []string{"com.example.a", "com.example.b"}) || g.AppCount != 2 {
		t.Errorf("login group: dead %d, attempts %d, apps %v (%d); want 2, 3, [a b] (2)", g.Dead, g.Attempts, g.Apps, g.AppCount)
	}
	if g.ScreenHash == nil || *g.ScreenHash != login || g.ScreenshotID == nil || g.JobID != a.ID {
		t.Errorf("login group's sample: hash %v, shot %v, job %d", g.ScreenHash, g.ScreenshotID, g.JobID)
	}
	if g.Signature != "element 'Sign in' not found after # ms on w-# at <time>" {
		t.Errorf("signature %q", g.Signature)
	}
	if !groups[0].LastSeen.After(groups[len(groups)-1].LastSeen) || groups[0].ID != *r1.FailureGroup {
		t.Errorf("groups are not newest first: %d first", groups[0].ID)
	}
	recent, err := f.client.FailureGroups(f.ctx, queue.FailureGroupQuery{Since: now.Add(-time.Hour), Limit: 50})
	if err != nil || len(recent) != 5 {
		t.Fatalf("recent groups: %d, %v", len(recent), err)
	}

	dead, _, err := f.client.List(f.ctx, queue.Filter{FailureGroup: ga}, 0, 10)
	if err != nil || len(dead) != 2 || dead[0].ID != b.ID || dead[1].ID != a.ID {
		t.Fatalf("the login group's dead letters: %d, %v", len(dead), err)
	}
	if _, _, err := f.client.List(f.ctx, queue.Filter{FailureGroup: ga, State: queue.StatePending}, 0, 10); err == nil {
		t.Error("a group's list in state pending was not refused")
	}

	retried, err := f.client.Retry(f.ctx, queue.Selection{FailureGroup: ga, State: queue.StateDead}, "test")
	if err != nil || len(retried) != 2 {
		t.Fatalf("retrying the group: %d jobs, %v", len(retried), err)
	}
	cancelled, err := f.client.Cancel(f.ctx, queue.Selection{FailureGroup: ga}, "test")
	if err != nil || len(cancelled) != 3 {
		t.Fatalf("cancelling the group: %d jobs, %v (want a, b and the retrying one)", len(cancelled), err)
	}
	for _, j := range []queue.Job{c, d, e} {
		if got := f.detail(t, j.ID).Job.State; got != queue.StateDead {
			t.Errorf("job %d of another group is %s", j.ID, got)
		}
	}
}

// Many attempts that end at once with one new cause make one group.
func TestFailureGroupOneGroupUnderConcurrentFailures(t *testing.T) {
	t.Parallel()
	f := setup(t, 24)
	const n = 20
	for range n {
		f.insert(t, jobOpts{kind: "report", queue: "fgc", maxAttempts: 1})
	}
	screen := int64(42)
	leases := make([]queue.Lease, n)
	for i := range leases {
		leases[i] = f.claimFrom(t, "fgc")
		if i%2 == 0 {
			if _, err := f.client.RecordArtifact(f.ctx, leases[i], queue.Artifact{
				Kind: queue.ArtifactScreenshot, Name: "s.png", ContentType: "image/png", Size: 1,
				SHA256: fmt.Sprintf("%064x", i), ScreenHash: &screen,
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, n)
	for i, l := range leases {
		wg.Go(func() {
			<-start
			_, err := f.client.Fail(f.ctx, l, fmt.Sprintf("timeout %d waiting for device emulator-%d", i*100, 5554+i), false)
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	rows, err := f.pool.Query(f.ctx, `SELECT failure_group, count(*) FROM jobs WHERE queue = 'fgc' GROUP BY 1 ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var counts []int
	for rows.Next() {
		var g *int64
		var c int
		if err := rows.Scan(&g, &c); err != nil {
			t.Fatal(err)
		}
		if g == nil {
			t.Fatal("a failed job has no group")
		}
		counts = append(counts, c)
	}
	if !slices.Equal(counts, []int{n / 2, n / 2}) {
		t.Errorf("jobs per group: %v, want two groups (screen, none) of %d", counts, n/2)
	}
	var groups int
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM failure_groups`).Scan(&groups); err != nil || groups != 2 {
		t.Errorf("%d groups, %v; want 2", groups, err)
	}
}

// Migration 31 groups the dead letters a database already holds, by their
// errors alone (no screenshot had a hash), with their last attempts; its
// down migration removes every trace, and up again regroups them.
func TestFailureGroupMigrationGroupsExistingDeadLetters(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	mg := f.migratedTo(t, 30)
	for _, sql := range []string{
		`INSERT INTO jobs (id, kind, app, state, attempt, counted_attempts, last_error, finished_at) OVERRIDING SYSTEM VALUE
		 VALUES (1, 't', 'com.example.a', 'dead', 2, 2, 'timed out after 30 s on emulator-5554', now() - interval '2 h'),
		        (2, 't', 'com.example.b', 'dead', 1, 1, 'timed out after 45 s on emulator-5556', now() - interval '1 h'),
		        (3, 't', 'com.example.a', 'dead', 1, 1, 'the app crashed', now()),
		        (4, 't', 'com.example.a', 'pending', 1, 1, 'timed out after 5 s on emulator-5554', NULL),
		        (5, 't', 'com.example.a', 'dead', 0, 0, NULL, now())`,
		`INSERT INTO attempts (job_id, number, worker_id, lease_token, started_at, ended_at, outcome, error)
		 VALUES (1, 1, 'w', 1, now(), now(), 'failed', 'timed out after 10 s on emulator-5554'),
		        (1, 2, 'w', 2, now(), now(), 'failed', 'timed out after 30 s on emulator-5554'),
		        (2, 1, 'w', 3, now(), now(), 'lease_expired', 'timed out after 45 s on emulator-5556'),
		        (3, 1, 'w', 4, now(), now(), 'failed', 'the app crashed'),
		        (4, 1, 'w', 5, now(), now(), 'failed', 'timed out after 5 s on emulator-5554')`,
	} {
		if _, err := f.pool.Exec(f.ctx, sql); err != nil {
			t.Fatalf("%v\n%s", err, sql)
		}
	}
	check := func() {
		t.Helper()
		groups, err := f.client.FailureGroups(f.ctx, queue.FailureGroupQuery{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(groups) != 2 || groups[0].Signature != "the app crashed" || groups[1].Dead != 2 || groups[1].Attempts != 2 ||
			groups[1].Signature != "timed out after # s on emulator-#" || !slices.Equal(groups[1].Apps, []string{"com.example.a", "com.example.b"}) {
			t.Fatalf("groups after the migration: %+v", groups)
		}
		// The pending job's failure and job 1's first attempt are history
		// the migration leaves ungrouped; the next failure groups them.
		var ungrouped int
		if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM attempts WHERE failure_group IS NULL`).Scan(&ungrouped); err != nil || ungrouped != 2 {
			t.Errorf("%d attempts ungrouped, %v; want 2", ungrouped, err)
		}
	}
	if err := mg.Up(); err != nil {
		t.Fatal(err)
	}
	check()
	if err := mg.To(30); err != nil {
		t.Fatal(err)
	}
	var left bool
	if err := f.pool.QueryRow(f.ctx, `SELECT to_regclass('failure_groups') IS NOT NULL
		OR EXISTS (SELECT 1 FROM information_schema.columns WHERE column_name IN ('failure_group', 'screen_hash'))`).Scan(&left); err != nil || left {
		t.Fatalf("down migration left failure groups behind (%v)", err)
	}
	if err := mg.Up(); err != nil {
		t.Fatal(err)
	}
	check()
}
