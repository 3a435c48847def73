package maintenance_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/maintenance"
)

// A standby reaper waits for as long as the active one lives. While it
// waits, neither it nor the holder may hold a snapshot: one that does pins
// the database's xmin horizon, and nothing anywhere can then be pruned or
// vacuumed (a waiting pg_advisory_lock() statement did exactly that).
func TestReaperStandbyHoldsNoSnapshot(t *testing.T) {
	t.Parallel()
	f := setup(t, 8)
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	r1 := maintenance.NewReaper(f.pool, maintenance.ReaperConfig{})
	r2 := maintenance.NewReaper(f.pool, maintenance.ReaperConfig{})
	ctx1, crash := context.WithCancel(ctx)
	defer crash()
	go func() { _ = r1.Run(ctx1) }()
	waitFor(t, "first reaper active", r1.Active)
	go func() { _ = r2.Run(ctx) }()

	// Both lock connections are up: the holder's, and the standby's,
	// which keeps trying.
	waitFor(t, "standby connected", func() bool {
		var n int
		err := f.pool.QueryRow(f.ctx, `
			SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&n)
		return err == nil && n == 2
	})
	// Sample for a while: no backend of the database holds a snapshot but
	// for the moment of a statement. The samples may catch a keep-alive
	// or a try of the lock now and then, the more often the busier the
	// machine; a statement that waits shows in every sample, held by the
	// same backend. So what fails is one backend holding a snapshot in 8
	// samples in a row (200 ms and more), not the count of brief ones.
	run := map[int32]int{}
	longest, brief := 0, 0
	for range 40 {
		var withXmin []int32
		var holders int
		err := f.pool.QueryRow(f.ctx, `
			SELECT (SELECT coalesce(array_agg(pid), '{}') FROM pg_stat_activity
			        WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_xmin IS NOT NULL),
			       (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
			        AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))`).Scan(&withXmin, &holders)
		if err != nil {
			t.Fatal(err)
		}
		if holders != 1 {
			t.Fatalf("%d holders of the reaper lock, want 1", holders)
		}
		next := map[int32]int{}
		for _, pid := range withXmin {
			next[pid] = run[pid] + 1
			longest = max(longest, next[pid])
			brief++
		}
		run = next
		time.Sleep(25 * time.Millisecond)
	}
	if longest >= 8 {
		t.Fatalf("a backend held a snapshot in %d samples in a row (25 ms apart): something waits inside a statement", longest)
	}
	t.Logf("snapshots seen in %d backend-samples of 40, at most %d in a row", brief, longest)
	if r2.Active() {
		t.Fatal("two reapers active at once")
	}

	// The holder's process crashes: its connection dies with it, and it
	// never comes back (a process whose connection alone died takes the
	// role again at its next keep-alive, and may beat the standby to it).
	// The standby takes over within a second, and the old one stops
	// reaping.
	var killed bool
	start := time.Now()
	if err := f.pool.QueryRow(f.ctx, `
		SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND granted
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminating the holder: %v", err)
	}
	crash()
	waitFor(t, "standby active", r2.Active)
	if took := time.Since(start); took > time.Second {
		t.Fatalf("hand-over took %v, want under a second", took)
	}
	waitFor(t, "old holder stands down", func() bool { return !r1.Active() })
}

// Ten standby reapers (as ten direct workers' would be) try the lock
// about as often together as one did alone, not ten times as often:
// each tries every leaderStandbyPoll times the number of standbys it
// counts. Each try restarts its session's query_start, so sampling
// pg_stat_activity every 10 ms sees every try (a standby's tries are at
// least 125 ms apart). And when the holder dies, one of them still
// takes over well within a second or two.
func TestStandbysTryTogetherAsOneWould(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	holder := maintenance.NewReaper(f.pool, maintenance.ReaperConfig{})
	holderCtx, crash := context.WithCancel(ctx)
	defer crash()
	go func() { _ = holder.Run(holderCtx) }()
	waitFor(t, "first reaper active", holder.Active)
	const standbys = 10
	var others []*maintenance.Reaper
	for range standbys {
		r := maintenance.NewReaper(f.pool, maintenance.ReaperConfig{})
		others = append(others, r)
		go func() { _ = r.Run(ctx) }()
	}
	// The standbys' sessions: their last statement tried the lock. Matched
	// by the statement's first words, as the standbys count each other: a
	// pattern found anywhere in the text also matched this very query,
	// left as the last statement of the pool's other idle connections,
	// and the count could stay at 11 until the test timed out.
	lockSessions := func() map[int32]time.Time {
		rows, err := f.pool.Query(f.ctx, `
			SELECT pid, query_start FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '/* leasehold standby %'`)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int32]time.Time{}
		for rows.Next() {
			var pid int32
			var at time.Time
			if err := rows.Scan(&pid, &at); err != nil {
				t.Fatal(err)
			}
			seen[pid] = at
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return seen
	}
	waitFor(t, "every standby connected and counting the others", func() bool { return len(lockSessions()) == standbys })
	// Let each count the others once more (their first tries counted
	// those connected before them), then sample for 3 s.
	time.Sleep(4 * time.Second)
	last := lockSessions()
	tries := 0
	window := 3 * time.Second
	for start := time.Now(); time.Since(start) < window; time.Sleep(10 * time.Millisecond) {
		now := lockSessions()
		for pid, at := range now {
			if !at.Equal(last[pid]) {
				tries++
			}
		}
		last = now
	}
	// Together about 4 a second (12 in 3 s); each at 4 a second alone
	// would make 120.
	t.Logf("%d standbys tried the lock %d times in %v", standbys, tries, window)
	if tries > 40 {
		t.Fatalf("%d standbys tried the lock %d times in %v, want about 12 (each every 250 ms × %d)", standbys, tries, window, standbys)
	}
	if tries == 0 {
		t.Fatal("no standby tried the lock in 3 s")
	}

	killed := time.Now()
	var ok bool
	if err := f.pool.QueryRow(f.ctx, `
		SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND granted
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&ok); err != nil || !ok {
		t.Fatalf("terminating the holder: %v", err)
	}
	crash() // as above: the holder's process is gone, not only its connection
	waitFor(t, "a standby active", func() bool {
		for _, r := range others {
			if r.Active() {
				return true
			}
		}
		return false
	})
	took := time.Since(killed)
	t.Logf("a standby took over %v after the holder's end", took.Round(time.Millisecond))
	if took > 2*time.Second {
		t.Fatalf("hand-over took %v, want about 250 ms and at most 2 s", took)
	}
}
