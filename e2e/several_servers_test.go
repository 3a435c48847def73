package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/queue"
)

// replica is one of several servers on one database.
type replica struct {
	*proc
	url string
}

// startReplica starts another server on the env's database, on a port of
// its own, and waits until it is ready.
func (e *env) startReplica(name, artifacts string) *replica {
	e.t.Helper()
	return e.startReplicaIn("", name, "LEASEHOLD_ARTIFACTS="+artifacts)
}

// startReplicaIn is startReplica with dir as its working directory and
// more environment (its artifact storage among it).
func (e *env) startReplicaIn(dir, name string, extraEnv ...string) *replica {
	e.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r := &replica{proc: e.spawnIn(dir, "server "+name, nil, append([]string{"LEASEHOLD_ADDR=" + addr}, extraEnv...)...), url: "http://" + addr}
	e.eventually(name+" ready", 30*time.Second, func() bool {
		resp, err := http.Get(r.url + "/health/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return r
}

// holds reports whether the replica's /metrics says it holds role.
func (r *replica) holds(role string) bool {
	if !r.alive() {
		return false
	}
	resp, err := http.Get(r.url + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	want := fmt.Sprintf(`leasehold_role_active{role=%q} 1`, role)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if sc.Text() == want {
			return true
		}
	}
	return false
}

// holder waits until exactly one replica holds role and returns it.
func (e *env) holder(role string, rs []*replica, timeout time.Duration) *replica {
	e.t.Helper()
	var h *replica
	e.eventually("one "+role, timeout, func() bool {
		h = nil
		n := 0
		for _, r := range rs {
			if r.holds(role) {
				h, n = r, n+1
			}
		}
		return n == 1
	})
	return h
}

// Three servers on one database: an @every 1s schedule makes exactly one
// job per tick (none missing, none doubled); kill -9 of the server holding
// the scheduler role hands it to another within about a second, and the
// ticks go on. Then kill -9 of the reaper's holder while a lease runs out:
// another server's reaper reclaims it within a second of its deadline.
func TestSeveralServersSchedulerAndReaperTakeOver(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	artifacts := t.TempDir()
	rs := []*replica{e.startReplica("a", artifacts)}
	// The first has migrated the database; the others start together.
	started := make(chan *replica, 2)
	for _, name := range []string{"b", "c"} {
		go func() { started <- e.startReplica(name, artifacts) }()
	}
	rs = append(rs, <-started, <-started)
	api := client.New(rs[0].url, e.token)

	sched := e.holder("scheduler", rs, 10*time.Second)
	for _, role := range []string{"reaper", "pruner"} {
		e.holder(role, rs, 10*time.Second)
	}
	created := time.Now()
	if _, err := api.CreateSchedule(e.ctx, client.NewSchedule{
		Name: "tick", Cron: "@every 1s", Job: client.NewJob{Kind: "noop", Queue: "scheduled"},
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Second)

	sched.signal(t, syscall.SIGKILL)
	killed := time.Now()
	_ = sched.wait(t, 5*time.Second)
	var alive []*replica
	for _, r := range rs {
		if r != sched {
			alive = append(alive, r)
		}
	}
	next := e.holder("scheduler", alive, 5*time.Second)
	takeover := time.Since(killed)
	t.Logf("scheduler role taken over %v after kill -9", takeover.Round(time.Millisecond))
	if takeover > 1500*time.Millisecond {
		t.Errorf("the scheduler role was taken over %v after its holder died, want about a second", takeover)
	}
	time.Sleep(4 * time.Second)
	paused := true
	if _, err := client.New(next.url, e.token).UpdateSchedule(e.ctx, "tick", client.SchedulePatch{Paused: &paused}); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()

	// One job per tick, each within a second or so of its tick, from the
	// first tick after the schedule was made to the last before the pause.
	rows, err := e.pool.Query(e.ctx, `SELECT idempotency_key, created_at FROM jobs WHERE schedule = 'tick' ORDER BY idempotency_key`)
	if err != nil {
		t.Fatal(err)
	}
	var ticks []time.Time
	for rows.Next() {
		var key string
		var at time.Time
		if err := rows.Scan(&key, &at); err != nil {
			t.Fatal(err)
		}
		tick, err := time.Parse(time.RFC3339, strings.TrimPrefix(key, "schedule:tick:"))
		if err != nil || queue.ScheduleKey("tick", tick) != key {
			t.Fatalf("job key %q is not schedule:tick:TICK in whole seconds", key)
		}
		if late := at.Sub(tick); late > 1500*time.Millisecond || late < -100*time.Millisecond {
			t.Errorf("tick %s enqueued %v after it", tick.Format(time.TimeOnly), late)
		}
		ticks = append(ticks, tick)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(ticks) < 12 {
		t.Fatalf("%d ticks in %v", len(ticks), stopped.Sub(created))
	}
	for i := 1; i < len(ticks); i++ {
		if d := ticks[i].Sub(ticks[i-1]); d != time.Second {
			t.Errorf("ticks %s then %s: a tick missing or doubled around the kill at %s",
				ticks[i-1].Format(time.TimeOnly), ticks[i].Format(time.TimeOnly), killed.Format("15:04:05.000"))
		}
	}
	if first, last := ticks[0], ticks[len(ticks)-1]; first.Sub(created) > 1500*time.Millisecond || stopped.Sub(last) > 1500*time.Millisecond {
		t.Errorf("ticks from %s to %s; the schedule ran from %s to %s", first.Format(time.TimeOnly), last.Format(time.TimeOnly),
			created.Format("15:04:05.000"), stopped.Format("15:04:05.000"))
	}
	if n := e.count(`SELECT count(*) FROM jobs WHERE schedule = 'tick'`); n != len(ticks) {
		t.Errorf("%d jobs for %d ticks", n, len(ticks))
	}
	t.Logf("%d ticks, one job each, across the kill", len(ticks))

	// The reaper: a lease of 2 s, its holder killed shortly before the
	// deadline.
	reaper := e.holder("reaper", alive, 5*time.Second)
	q := queue.NewClient(e.pool, nil)
	job, err := client.New(alive[0].url, e.token).Submit(e.ctx, client.NewJob{Kind: "noop", Queue: "reap", BackoffBaseMs: new(int32(0))})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := q.Claim(e.ctx, queue.ClaimParams{WorkerID: "gone", Queues: []string{"reap"}, Limit: 1, Lease: 2 * time.Second})
	if err != nil || len(claimed) != 1 || claimed[0].ID != job.ID {
		t.Fatalf("claiming: %v %+v", err, claimed)
	}
	deadline := *claimed[0].LeaseUntil
	time.Sleep(time.Until(deadline.Add(-200 * time.Millisecond)))
	reaper.signal(t, syscall.SIGKILL)
	_ = reaper.wait(t, 5*time.Second)
	var last *replica
	for _, r := range alive {
		if r != reaper {
			last = r
		}
	}
	e.eventually("the lease reclaimed", 10*time.Second, func() bool {
		return e.count(`SELECT count(*) FROM jobs WHERE id = $1 AND state = 'pending' AND attempt = 1`, job.ID) == 1
	})
	var lateNs float64 // a float: pgx refuses to put 1.966e6 into an int64
	if err := e.pool.QueryRow(e.ctx, `SELECT EXTRACT(EPOCH FROM ended_at - lease_until)::float8 * 1e9
		FROM attempts WHERE job_id = $1 AND outcome = 'lease_expired'`, job.ID).Scan(&lateNs); err != nil {
		t.Fatal(err)
	}
	late := time.Duration(lateNs)
	t.Logf("lease reclaimed %v past its deadline by the surviving server, its holder killed 200ms before", late.Round(time.Millisecond))
	if late > time.Second || late < 0 {
		t.Errorf("reclaimed %v past the deadline, want within a second", late)
	}
	// Its log line may reach the test's reader a moment after the row.
	e.eventually("the surviving server logs the reclaim", 5*time.Second, func() bool {
		return strings.Contains(last.out.String(), "reclaimed expired lease")
	})
	if strings.Contains(reaper.out.String(), "reclaimed expired lease") {
		t.Error("the killed server reclaimed the lease")
	}
	if !last.holds("reaper") {
		t.Error("the surviving server does not hold the reaper role")
	}
}
