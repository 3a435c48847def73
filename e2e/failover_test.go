package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
)

// These tests run Leasehold on a primary and a streaming standby (see
// pgPair) and take the primary away: lost for good and replaced by the
// standby, read-only for a while, frozen for 20 s. They are not
// parallel: their time bounds (readiness back within 1 s) are measured on
// a machine that other tests would otherwise share.

// haRequestTimeout is the server's --request-timeout in these tests: a
// database that is frozen, which no statement_timeout can end, costs a
// request this much, answered 503.
const haRequestTimeout = 3 * time.Second

// haRequestBound is how long any request may take while the database
// is away: the request timeout, with slack for a loaded machine.
const haRequestBound = haRequestTimeout + 2*time.Second

// startHAServer starts the server with the request bound of these tests.
func (e *env) startHAServer() *proc {
	e.t.Helper()
	return e.startServerWith("LEASEHOLD_REQUEST_TIMEOUT=" + haRequestTimeout.String())
}

// httpAnswer is one request of a test and how it was answered.
type httpAnswer struct {
	key        string
	start, end time.Time
	status     int // 0: no answer (err says why)
	err        error
	retryAfter string
	id         int64
	body       string
}

func (a httpAnswer) took() time.Duration { return a.end.Sub(a.start) }

func (a httpAnswer) String() string {
	if a.status == 0 {
		return fmt.Sprintf("no answer after %v (%v)", a.took().Round(time.Millisecond), a.err)
	}
	return fmt.Sprintf("%d after %v: %s", a.status, a.took().Round(time.Millisecond), strings.TrimSpace(a.body))
}

// do sends one request to the server with the admin token, giving up
// after timeout as an impatient client does.
func (e *env) do(method, path, key string, body any, timeout time.Duration) httpAnswer {
	a := httpAnswer{key: key, start: time.Now()}
	defer func() { a.end = time.Now() }()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			e.t.Error(err)
			return a
		}
		rd = bytes.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(e.ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, e.apiURL+path, rd)
	if err != nil {
		a.err = err
		return a
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.err = err
		a.end = time.Now()
		return a
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	a.end = time.Now()
	if err != nil {
		a.err = err
		return a
	}
	a.status, a.retryAfter, a.body = resp.StatusCode, resp.Header.Get("Retry-After"), string(raw)
	var job struct {
		ID int64 `json:"id"`
	}
	if json.Unmarshal(raw, &job) == nil {
		a.id = job.ID
	}
	return a
}

// submitKeyed submits a sim job under an idempotency key.
func (e *env) submitKeyed(key string, sim map[string]any, timeout time.Duration) httpAnswer {
	return e.do(http.MethodPost, "/api/v1/jobs", key, map[string]any{
		"kind": "app_investigation", "backoff_base_ms": 0,
		"payload": map[string]any{"app": "com.example.ha", "sim": sim},
	}, timeout)
}

// recorder repeats a request until stopped, one at a time, and keeps
// every answer.
type recorder struct {
	mu      sync.Mutex
	answers []httpAnswer
	stop    chan struct{}
	done    chan struct{}
}

func (e *env) record(every time.Duration, req func() httpAnswer) *recorder {
	r := &recorder{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			a := req()
			r.mu.Lock()
			r.answers = append(r.answers, a)
			r.mu.Unlock()
			select {
			case <-r.stop:
				return
			case <-time.After(every):
			}
		}
	}()
	e.t.Cleanup(r.halt)
	return r
}

func (r *recorder) halt() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
}

// all stops the recorder and returns its answers.
func (r *recorder) all() []httpAnswer {
	r.halt()
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.answers)
}

// sofar is the answers recorded until now; the recording goes on.
func (r *recorder) sofar() []httpAnswer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.answers)
}

func (e *env) probeReady() httpAnswer {
	return e.do(http.MethodGet, "/health/ready", "", nil, 10*time.Second)
}

// between returns the answers to requests sent at or after from and
// answered by to.
func between(as []httpAnswer, from, to time.Time) []httpAnswer {
	var out []httpAnswer
	for _, a := range as {
		if !a.start.Before(from) && !a.end.After(to) {
			out = append(out, a)
		}
	}
	return out
}

// sentBetween returns the answers to requests sent from from to to.
func sentBetween(as []httpAnswer, from, to time.Time) []httpAnswer {
	var out []httpAnswer
	for _, a := range as {
		if !a.start.Before(from) && a.start.Before(to) {
			out = append(out, a)
		}
	}
	return out
}

// firstOK returns the first answer 200 to a request sent at or after t.
func firstOK(as []httpAnswer, t time.Time) (httpAnswer, bool) {
	for _, a := range as {
		if !a.start.Before(t) && a.status == http.StatusOK {
			return a, true
		}
	}
	return httpAnswer{}, false
}

func statusCounts(as []httpAnswer) map[int]int {
	m := map[int]int{}
	for _, a := range as {
		m[a.status]++
	}
	return m
}

// effectReceiver counts the calls of the sim's external effect by
// idempotency key (one per job).
type effectReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string]int
}

func newEffectReceiver(t *testing.T) *effectReceiver {
	r := &effectReceiver{calls: map[string]int{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.calls[req.Header.Get("Idempotency-Key")]++
		r.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(r.Close)
	return r
}

// keyedSubmitter submits jobs under keys ha-0, ha-1, … one after the
// other, each retried under its key until acknowledged (201 or 200), as
// README tells clients to.
type keyedSubmitter struct {
	mu      sync.Mutex
	acked   map[string]int64
	order   []string
	answers []httpAnswer
	stop    chan struct{}
	done    chan struct{}
}

func (e *env) submitUnderLoad(prefix string, every time.Duration, sim map[string]any) *keyedSubmitter {
	s := &keyedSubmitter{acked: map[string]int64{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for n := 0; ; n++ {
			key := fmt.Sprintf("%s-%d", prefix, n)
			for {
				a := e.submitKeyed(key, sim, 5*time.Second)
				s.mu.Lock()
				s.answers = append(s.answers, a)
				if a.status == http.StatusCreated || a.status == http.StatusOK {
					s.acked[key] = a.id
					s.order = append(s.order, key)
				}
				s.mu.Unlock()
				if a.status == http.StatusCreated || a.status == http.StatusOK || e.ctx.Err() != nil {
					break
				}
				if a.status >= 400 && a.status < 500 {
					e.t.Errorf("submitting %s: %s", key, a)
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			select {
			case <-s.stop:
				return
			case <-time.After(every):
			}
		}
	}()
	e.t.Cleanup(s.halt)
	return s
}

func (s *keyedSubmitter) halt() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// The primary is lost under load (kill -9 of every process of its
// cluster) and the synchronous standby promoted: nothing acknowledged is
// lost, nothing runs twice, no attempt fails because of the outage,
// readiness says 503 while there is no primary and 200 within 1 s of the
// promotion, and the reaper takes back a lease that expired meanwhile
// within 1 s of the promotion.
func TestFailoverToSynchronousStandbyLosesNothing(t *testing.T) {
	pair := newPGPair(t, pgPairOptions{Synchronous: true})
	e := newEnvOn(t, pair.URL())
	effects := newEffectReceiver(t)
	e.startHAServer()
	// The leases outlast the outage (kill, 2 s without a primary, the
	// promotion) with room for a loaded machine.
	direct := e.startWorker("ha-direct", "--concurrency", "4", "--lease", "10s", "--heartbeat", "1s", "--artifacts", e.artifacts,
		"--spool-dir", t.TempDir())
	remote := e.startRemoteWorker("ha-remote", e.workerToken("ha-remote"), "--id", "ha-remote",
		"--concurrency", "4", "--lease", "10s", "--heartbeat", "1s", "--spool-dir", t.TempDir())

	sim := map[string]any{"steps": 4, "step_ms": 300, "effect_url": effects.URL}
	subs := e.submitUnderLoad("ha", 150*time.Millisecond, sim)
	e.eventually("jobs succeed on both workers", 30*time.Second, func() bool {
		return e.count("SELECT count(DISTINCT a.worker_id) FROM job_attempts a WHERE a.outcome = 'succeeded'") == 2 &&
			e.count("SELECT count(*) FROM jobs WHERE state = 'succeeded'") >= 8
	})

	// A lease nobody renews, expiring while there is no primary: the
	// reaper must take it back as soon as there is one again.
	q := queue.NewClient(e.pool, slog.New(slog.DiscardHandler))
	ghost := testutil.InsertJob(t, e.ctx, q, testutil.Job{Queue: "ha-ghost"})
	testutil.ClaimJob(t, e.ctx, q, "ha-ghost-worker", "ha-ghost", 2*time.Second)
	ghostExpires := time.Now().Add(2 * time.Second)

	// Completions the database acknowledged before the loss: with
	// synchronous replication the standby has every one of them.
	before := map[int64]int32{}
	rows, err := e.pool.Query(e.ctx, "SELECT id, attempt FROM jobs WHERE state = 'succeeded' AND idempotency_key LIKE 'ha-%'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var attempt int32
		if err := rows.Scan(&id, &attempt); err != nil {
			t.Fatal(err)
		}
		before[id] = attempt
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	ready := e.record(50*time.Millisecond, e.probeReady)
	time.Sleep(200 * time.Millisecond)
	pair.killPrimary()
	lost := time.Now()
	time.Sleep(time.Until(ghostExpires.Add(500 * time.Millisecond)))
	if time.Since(lost) < 2*time.Second {
		time.Sleep(2*time.Second - time.Since(lost))
	}
	// The outage lasts until readiness has answered a probe sent during
	// it: the probe in flight at the loss may wait out the server's 3 s
	// readiness bound, and under the race detector on a loaded CI the one
	// after it did not end before the promotion (stop 30's CI: 25 probes
	// in all, none inside a 3.7 s outage).
	for deadline := time.Now().Add(15 * time.Second); len(between(ready.sofar(), lost, time.Now())) == 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	promoting := time.Now()
	pair.promote()
	promoted := time.Now()
	t.Logf("primary lost; standby promoted %v later", promoted.Sub(lost).Round(time.Millisecond))

	// The reaper is back: the ghost's lease, expired before the promotion,
	// is taken back (its attempt ends lease_expired).
	watch, err := pgxpool.New(e.ctx, pair.standby.url("leasehold"))
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	var reaped time.Time
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var n int
		if err := watch.QueryRow(e.ctx, "SELECT count(*) FROM job_attempts WHERE job_id = $1 AND outcome = 'lease_expired'", ghost.ID).Scan(&n); err == nil && n == 1 {
			reaped = time.Now()
			break
		}
	}
	switch {
	case reaped.IsZero():
		t.Errorf("the lease that expired during the outage was not taken back within 15s of the promotion")
	case reaped.Sub(promoted) > 10*time.Second:
		// Back at once, not after the reaper's longest sleep (30 s): the
		// role is retaken within 250 ms of the database answering and its
		// first pass runs then. The bound leaves room for a loaded CI,
		// where every statement after the failover queued for a fresh pool
		// connection (1.4 s there, the reap itself 1.05 s after "reaper
		// active"), and for one twice as slow again (a 48-minute CI run:
		// 6.85 s); a reaper that slept its longest is still caught.
		t.Errorf("the lease that expired during the outage was taken back %v after the promotion, want within 10s",
			reaped.Sub(promoted).Round(time.Millisecond))
	default:
		t.Logf("the reaper took back the expired lease %v after the promotion", reaped.Sub(promoted).Round(time.Millisecond))
	}

	time.Sleep(4 * time.Second) // load goes on after the failover
	subs.halt()
	probes := ready.all()
	// Readiness opens a fresh connection to the promoted server (and
	// checks it is writable): 1.06 s after the promotion on a CI whose
	// load average was 12. A readiness that cached "down", or a pool
	// backing off for its longest delay, takes far longer than this bound.
	checkReadiness(t, probes, lost, promoting, promoted, 2*time.Second)

	subs.mu.Lock()
	acked, order, answers := subs.acked, subs.order, subs.answers
	subs.mu.Unlock()
	t.Logf("%d submissions acknowledged; answers by status: %v", len(acked), statusCounts(answers))
	checkAnswers(t, "submissions", answers, lost, promoting)

	ids := make([]int64, 0, len(acked))
	for _, key := range order {
		ids = append(ids, acked[key])
	}
	var unfinished []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		unfinished = unfinished[:0]
		rows, err := e.pool.Query(e.ctx, "SELECT id, state FROM jobs WHERE id = ANY($1) AND state <> 'succeeded' ORDER BY id", ids)
		if err == nil {
			for rows.Next() {
				var id int64
				var state string
				if rows.Scan(&id, &state) == nil {
					unfinished = append(unfinished, fmt.Sprintf("%d %s", id, state))
				}
			}
			rows.Close()
		}
		if err == nil && len(unfinished) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(unfinished) > 0 {
		t.Errorf("60s after the failover %d acknowledged jobs have not succeeded: %v", len(unfinished), unfinished)
	}

	// No acknowledged submission lost: each key still names the job it
	// was acknowledged with, and no key made a second one.
	for _, key := range order {
		var id int64
		err := e.pool.QueryRow(e.ctx, "SELECT id FROM jobs WHERE idempotency_key = $1", key).Scan(&id)
		if err != nil || id != acked[key] {
			t.Errorf("submission %s was acknowledged as job %d; after the failover: job %d (%v)", key, acked[key], id, err)
		}
	}
	if n := e.count("SELECT count(*) FROM jobs WHERE idempotency_key LIKE 'ha-%'"); n < len(acked) {
		t.Errorf("%d jobs under the test's keys, fewer than the %d acknowledged", n, len(acked))
	}
	// No acknowledged completion lost: what had succeeded still has, in
	// the same attempt.
	for id, attempt := range before {
		var state string
		var now int32
		if err := e.pool.QueryRow(e.ctx, "SELECT state, attempt FROM jobs WHERE id = $1", id).Scan(&state, &now); err != nil || state != "succeeded" || now != attempt {
			t.Errorf("job %d had succeeded in attempt %d before the loss; after the failover: %s in attempt %d (%v)", id, attempt, state, now, err)
		}
	}
	// No job ran twice, and no attempt failed: the outage is the only
	// thing that could have failed one.
	rows, err = e.pool.Query(e.ctx, `SELECT a.job_id, a.number, a.worker_id, a.outcome::text, coalesce(a.error, '')
		FROM job_attempts a WHERE a.job_id = ANY($1) AND (a.outcome IS DISTINCT FROM 'succeeded' OR a.number > 1)
		ORDER BY a.job_id, a.number`, ids)
	if err != nil {
		t.Fatal(err)
	}
	others := map[string]int{}
	for rows.Next() {
		var job int64
		var number int32
		var worker, outcome, msg string
		if err := rows.Scan(&job, &number, &worker, &outcome, &msg); err != nil {
			t.Fatal(err)
		}
		others[outcome]++
		if outcome == "failed" {
			t.Errorf("job %d attempt %d on %s failed: %s", job, number, worker, msg)
		}
	}
	rows.Close()
	if n := e.count("SELECT count(*) FROM job_attempts WHERE job_id = ANY($1) AND outcome = 'succeeded'", ids); n != len(ids) {
		t.Errorf("%d succeeded attempts for %d jobs", n, len(ids))
	}
	for _, id := range ids {
		if n := e.count("SELECT count(*) FROM job_attempts WHERE job_id = $1 AND outcome = 'succeeded'", id); n > 1 {
			t.Errorf("job %d succeeded in %d attempts", id, n)
		}
	}
	effects.mu.Lock()
	for key, n := range effects.calls {
		if n != 1 {
			t.Errorf("the effect under key %s was performed %d times", key, n)
		}
	}
	if len(effects.calls) != len(ids) {
		t.Errorf("effects of %d jobs performed, want %d (one per job)", len(effects.calls), len(ids))
	}
	effects.mu.Unlock()
	byWorker := map[string]int{}
	rows, err = e.pool.Query(e.ctx, "SELECT worker_id, count(*) FROM job_attempts WHERE job_id = ANY($1) AND started_at < $2 AND coalesce(ended_at, now()) > $3 GROUP BY 1", ids, promoted, lost)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var w string
		var n int
		if err := rows.Scan(&w, &n); err != nil {
			t.Fatal(err)
		}
		byWorker[w] = n
	}
	rows.Close()
	t.Logf("%d jobs; attempts spanning the outage by worker: %v; attempts other than a first that succeeded, by outcome: %v",
		len(ids), byWorker, others)
	if byWorker["ha-direct"] == 0 || byWorker["ha-remote"] == 0 {
		t.Errorf("attempts spanning the outage by worker: %v, want both workers: the test proved nothing for the other", byWorker)
	}
	if !direct.alive() || !remote.alive() {
		t.Error("a worker exited during the failover")
	}
}

// What asynchronous replication loses, and how a client finds out: the
// standby falls 3 s behind (its WAL receiver stopped) while submissions
// and completions go on, the primary is lost and the standby promoted.
// The test measures what vanished (acknowledged submissions, ids given
// to other jobs afterwards, acknowledged completions run again) and
// shows the reconciliation README gives: resubmitting every acknowledged
// submission under its idempotency key leaves each key with exactly one
// job, where an id may name another job than the one acknowledged.
func TestFailoverToAsynchronousStandbyLosesAcknowledgedWork(t *testing.T) {
	pair := newPGPair(t, pgPairOptions{})
	e := newEnvOn(t, pair.URL())
	effects := newEffectReceiver(t)
	e.startHAServer()
	// A remote worker alone, so that every run again is a lost
	// completion's (a direct one may also fail attempts in the outage).
	e.startRemoteWorker("as-remote", e.workerToken("as-remote"), "--id", "as-remote",
		"--concurrency", "4", "--lease", "6s", "--heartbeat", "1s", "--spool-dir", t.TempDir())
	sim := map[string]any{"steps": 3, "step_ms": 200, "effect_url": effects.URL}
	subs := e.submitUnderLoad("as", 100*time.Millisecond, sim)
	e.eventually("jobs succeed", 30*time.Second, func() bool {
		return e.count("SELECT count(*) FROM jobs WHERE state = 'succeeded'") >= 5
	})
	resume := pair.stallReplication()
	time.Sleep(3 * time.Second)
	succeeded := map[int64]bool{}
	rows, err := e.pool.Query(e.ctx, "SELECT id FROM jobs WHERE state = 'succeeded' AND idempotency_key LIKE 'as-%'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		succeeded[id] = true
	}
	rows.Close()
	pair.killPrimary()
	resume()
	pair.promote()
	time.Sleep(2 * time.Second)
	subs.halt()
	subs.mu.Lock()
	acked, order := subs.acked, subs.order
	subs.mu.Unlock()

	// What the new primary has of what was acknowledged.
	var vanished []string
	reused := 0
	for _, key := range order {
		var id int64
		err := e.pool.QueryRow(e.ctx, "SELECT id FROM jobs WHERE idempotency_key = $1", key).Scan(&id)
		if err == nil {
			continue
		}
		vanished = append(vanished, fmt.Sprintf("%s (job %d)", key, acked[key]))
		var other string
		if e.pool.QueryRow(e.ctx, "SELECT coalesce(idempotency_key, '') FROM jobs WHERE id = $1", acked[key]).Scan(&other) == nil {
			reused++
		}
	}
	// Completions lost come back as leases that expire (6 s), and run
	// again.
	time.Sleep(8 * time.Second)
	ranAgain := 0
	for id := range succeeded {
		if e.count("SELECT count(*) FROM job_attempts WHERE job_id = $1", id) > 1 ||
			e.count("SELECT count(*) FROM jobs WHERE id = $1 AND state <> 'succeeded'", id) == 1 {
			ranAgain++
		}
	}
	effects.mu.Lock()
	twice := 0
	for _, n := range effects.calls {
		if n > 1 {
			twice++
		}
	}
	effects.mu.Unlock()
	t.Logf("%d submissions acknowledged, %d of them vanished (%d of their ids now name other jobs): %v; "+
		"of the %d jobs that had succeeded just before the loss, %d ran again; %d effects were performed twice",
		len(acked), len(vanished), reused, vanished, len(succeeded), ranAgain, twice)
	if len(vanished) == 0 {
		t.Fatal("nothing acknowledged vanished: the standby did not lag, and the test proved nothing")
	}

	// Reconciliation by key: every acknowledged submission is sent again
	// under its key; the ones that vanished are made anew.
	made := 0
	for _, key := range order {
		a := e.submitKeyed(key, sim, 10*time.Second)
		switch a.status {
		case http.StatusCreated:
			made++
		case http.StatusOK:
			if a.id != acked[key] {
				t.Errorf("%s: acknowledged as job %d, now job %d", key, acked[key], a.id)
			}
		default:
			t.Errorf("resubmitting %s: %s", key, a)
		}
	}
	if made != len(vanished) {
		t.Errorf("resubmitting under the keys made %d jobs anew, want the %d that vanished", made, len(vanished))
	}
	if n := e.count("SELECT count(DISTINCT idempotency_key) FROM jobs WHERE idempotency_key = ANY($1)", order); n != len(order) {
		t.Errorf("after reconciling, %d of the %d acknowledged keys have a job", n, len(order))
	}
}

// checkReadiness checks that every probe sent after down and answered
// before the database could be back (from) was answered 503 within the
// request bound, and that readiness said 200 again within within of the
// moment it was back (up).
func checkReadiness(t *testing.T, probes []httpAnswer, down, from, up time.Time, within time.Duration) {
	t.Helper()
	during := between(probes, down, from)
	if len(during) == 0 {
		t.Errorf("no readiness probe was answered during the outage (%d probes in all)", len(probes))
	}
	for _, a := range during {
		if a.status != http.StatusServiceUnavailable {
			t.Errorf("readiness %v into the outage: %s, want 503", a.start.Sub(down).Round(time.Millisecond), a)
		}
	}
	for _, a := range probes {
		if a.start.After(down) && a.start.Before(from) && (a.status == 0 || a.took() > haRequestBound) {
			t.Errorf("readiness %v into the outage: %s, want an answer within %v", a.start.Sub(down).Round(time.Millisecond), a, haRequestBound)
		}
	}
	// Probes are sent one after another, so one that was already waiting
	// on the database when it came back may still end 503 (up to the
	// server's 3 s readiness bound, under load): the bound runs from
	// when that probe ended, and the probe after it must say 200.
	since := up
	for _, a := range probes {
		if a.start.Before(up) && a.end.After(since) {
			since = a.end
		}
	}
	ok, found := firstOK(probes, down)
	switch {
	case !found:
		after := between(probes, up, time.Now())
		t.Errorf("readiness never said 200 after the outage (%d probes after it: %v)", len(after), statusCounts(after))
	case ok.end.Before(from):
		t.Errorf("readiness said 200 %v into the outage, before the database was back", ok.start.Sub(down).Round(time.Millisecond))
	case ok.end.Sub(since) > within:
		t.Errorf("readiness said 200 %v after the database was back (%v after the probe in flight then ended), want within %v",
			ok.end.Sub(up).Round(time.Millisecond), ok.end.Sub(since).Round(time.Millisecond), within)
	default:
		t.Logf("readiness: %d probes during the outage %v, 200 again %v after the database was back (%v after the probe in flight then)",
			len(during), statusCounts(during), ok.end.Sub(up).Round(time.Millisecond), ok.end.Sub(since).Round(time.Millisecond))
	}
	if len(during) > 0 {
		t.Logf("readiness during the outage, first and last: %s; %s", during[0], during[len(during)-1])
	}
}

// checkAnswers checks that each answer to a request sent during an
// outage (from down to up) is a 503 with Retry-After, given within the
// request bound: never a 500, never left hanging.
func checkAnswers(t *testing.T, what string, as []httpAnswer, down, up time.Time) {
	t.Helper()
	var bad []string
	for _, a := range as {
		if a.start.Before(down) || a.start.After(up) {
			continue
		}
		switch {
		case a.status == 0 || a.took() > haRequestBound:
			bad = append(bad, fmt.Sprintf("%v in: %s, want an answer within %v", a.start.Sub(down).Round(time.Millisecond), a, haRequestBound))
		case a.status != http.StatusServiceUnavailable || a.retryAfter == "":
			bad = append(bad, fmt.Sprintf("%v in: %s (Retry-After %q), want 503 with Retry-After", a.start.Sub(down).Round(time.Millisecond), a, a.retryAfter))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d of the %s during the outage were answered wrongly; the first: %s", len(bad), what, strings.Join(bad[:min(5, len(bad))], "; "))
	}
}

// checkNothingCommitted checks that no job exists under the keys of
// submissions that were not acknowledged (no answer, or not 2xx).
func (e *env) checkNothingCommitted(as []httpAnswer) {
	e.t.Helper()
	var keys []string
	for _, a := range as {
		if a.status != http.StatusCreated && a.status != http.StatusOK {
			keys = append(keys, a.key)
		}
	}
	rows, err := e.pool.Query(e.ctx, "SELECT id, idempotency_key FROM jobs WHERE idempotency_key = ANY($1)", keys)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var key string
		if err := rows.Scan(&id, &key); err != nil {
			e.t.Fatal(err)
		}
		for _, a := range as {
			if a.key == key {
				e.t.Errorf("submission %s was not acknowledged (%s), yet job %d exists under its key", key, a, id)
				break
			}
		}
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
}

// waitRunning waits until n jobs run, each on a different one of
// workers, and have reported progress.
func (e *env) waitRunning(ids []int64, workers ...string) {
	e.t.Helper()
	e.eventually("the jobs run on every worker", 30*time.Second, func() bool {
		return e.count(`SELECT count(DISTINCT lease_owner) FROM jobs j WHERE id = ANY($1) AND state = 'running' AND lease_owner = ANY($2)
			AND EXISTS (SELECT 1 FROM job_timeline t WHERE t.job_id = j.id AND t.type = 'progress')`, ids, workers) == len(workers)
	})
}

// checkOneAttempt checks that each job succeeded in its first attempt.
func (e *env) checkOneAttempt(ids []int64) {
	e.t.Helper()
	for _, id := range ids {
		var state string
		var attempt int32
		var lastError *string
		if err := e.pool.QueryRow(e.ctx, "SELECT state, attempt, last_error FROM jobs WHERE id = $1", id).Scan(&state, &attempt, &lastError); err != nil {
			e.t.Fatal(err)
		}
		if state != "succeeded" || attempt != 1 {
			rows, _ := e.pool.Query(e.ctx, "SELECT number, worker_id, coalesce(outcome::text, 'running'), coalesce(error, '') FROM job_attempts WHERE job_id = $1 ORDER BY number", id)
			var hist []string
			for rows.Next() {
				var n int32
				var w, o, msg string
				if rows.Scan(&n, &w, &o, &msg) == nil {
					hist = append(hist, fmt.Sprintf("#%d on %s %s %s", n, w, o, msg))
				}
			}
			rows.Close()
			e.t.Errorf("job %d is %s in attempt %d, want succeeded in its first; attempts: %v", id, state, attempt, hist)
		}
	}
}

// waitDone waits until every job of ids has ended (succeeded, dead or
// cancelled), or gives up after timeout.
func (e *env) waitDone(ids []int64, timeout time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var n int
		err := e.pool.QueryRow(e.ctx, "SELECT count(*) FROM jobs WHERE id = ANY($1) AND state IN ('succeeded', 'dead', 'cancelled')", ids).Scan(&n)
		if err == nil && n == len(ids) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The primary refuses writes for 12 s (default_transaction_read_only,
// reloaded, every session ended so that none keeps the old setting):
// readiness says 503 during and 200 after, submissions are answered 503
// with Retry-After (not 500) and none commits, and the jobs running on a
// direct and a remote worker ride it out in their first attempt.
func TestReadOnlyPrimaryAnswers503AndJobsRideItOut(t *testing.T) {
	pair := newPGPair(t, pgPairOptions{})
	e := newEnvOn(t, pair.URL())
	e.startHAServer()
	// The leases outlast the window: this is about writes refused, not
	// about leases running out.
	e.startWorker("ro-direct", "--lease", "30s", "--heartbeat", "1s", "--artifacts", e.artifacts, "--spool-dir", t.TempDir())
	e.startRemoteWorker("ro-remote", e.workerToken("ro-remote"), "--id", "ro-remote", "--lease", "30s", "--heartbeat", "1s",
		"--spool-dir", t.TempDir())
	sim := map[string]any{"steps": 18, "step_ms": 1000}
	var ids []int64
	for i := range 2 {
		a := e.submitKeyed(fmt.Sprintf("ro-job-%d", i), sim, 10*time.Second)
		if a.status != http.StatusCreated {
			t.Fatalf("submitting: %s", a)
		}
		ids = append(ids, a.id)
	}
	e.waitRunning(ids, "ro-direct", "ro-remote")

	ready := e.record(100*time.Millisecond, e.probeReady)
	n := 0
	subs := e.record(250*time.Millisecond, func() httpAnswer {
		n++
		return e.submitKeyed(fmt.Sprintf("ro-%d", n), map[string]any{"steps": 0}, 10*time.Second)
	})
	reads := e.record(250*time.Millisecond, func() httpAnswer {
		return e.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", ids[0]), "", nil, 10*time.Second)
	})
	time.Sleep(300 * time.Millisecond)
	pair.execSQL(pair.primary, "ALTER SYSTEM SET default_transaction_read_only = on", "SELECT pg_reload_conf()")
	time.Sleep(200 * time.Millisecond) // every backend has the reload
	pair.execSQL(pair.primary, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = 'leasehold' AND pid <> pg_backend_pid() AND backend_type = 'client backend'`)
	readOnly := time.Now()
	time.Sleep(12 * time.Second)
	// The reset takes effect somewhere between these two moments (on a
	// loaded machine, execSQL took over 100 ms): a request answered
	// before resetting met a read-only primary, one answered after
	// writable a writable one, and one in between either.
	resetting := time.Now()
	pair.execSQL(pair.primary, "ALTER SYSTEM RESET default_transaction_read_only", "SELECT pg_reload_conf()")
	writable := time.Now()
	time.Sleep(3 * time.Second)

	probes := ready.all()
	checkReadiness(t, probes, readOnly, resetting, writable, 2*time.Second)
	submissions := subs.all()
	var readOnlyAnswers []httpAnswer
	for _, a := range sentBetween(submissions, readOnly, writable) {
		switch {
		case a.end.Before(resetting) || a.status == 0 || a.took() > haRequestBound:
			readOnlyAnswers = append(readOnlyAnswers, a)
		case a.status != http.StatusCreated && a.status != http.StatusServiceUnavailable:
			t.Errorf("submission %v into the window, answered as the primary became writable: %s, want 201 or 503",
				a.start.Sub(readOnly).Round(time.Millisecond), a)
		}
	}
	checkAnswers(t, "submissions", readOnlyAnswers, readOnly, writable)
	t.Logf("submissions by status: during the window %v, after it %v",
		statusCounts(between(submissions, readOnly, writable)), statusCounts(between(submissions, writable, time.Now())))
	got := reads.all()
	for _, a := range between(got, readOnly, writable) {
		if a.status != http.StatusOK && a.status != http.StatusServiceUnavailable || a.took() > haRequestBound {
			t.Errorf("reading a job %v into the window: %s, want 200 or 503 within %v", a.start.Sub(readOnly).Round(time.Millisecond), a, haRequestBound)
			break
		}
	}
	t.Logf("reads by status during the window: %v", statusCounts(between(got, readOnly, writable)))
	e.checkNothingCommitted(submissions)
	e.waitDone(ids, 30*time.Second)
	e.checkOneAttempt(ids)
}

// The primary freezes for 20 s (SIGSTOP of every process of its
// cluster, as a hung machine): readiness says 503 within the request
// bound throughout, every API request is answered within it, and a
// submission whose client gave up (or that was answered 503) is not
// committed when the primary goes on.
func TestFrozenPrimaryBoundsRequestsAndCommitsNothingAbandoned(t *testing.T) {
	pair := newPGPair(t, pgPairOptions{})
	e := newEnvOn(t, pair.URL())
	e.startHAServer()
	seed := e.submitKeyed("fz-seed", map[string]any{"steps": 0}, 10*time.Second)
	if seed.status != http.StatusCreated {
		t.Fatalf("submitting: %s", seed)
	}

	// Requests at once leave the server's pool with idle sessions, which
	// the freeze leaves on frozen backends: the first requests after it
	// reach PostgreSQL and wait for it, as a primary that hangs mid-way.
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() { e.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", seed.id), "", nil, 10*time.Second) })
	}
	wg.Wait()

	pair.freeze(pair.primary)
	frozen := time.Now()
	// A patient client waits longer than the freeze; an impatient one
	// gives up after a second, before any bound the server has. The
	// first request after the freeze is an impatient one, so that it
	// surely has a session on a frozen backend.
	m := 0
	impatient := e.record(2*time.Second, func() httpAnswer {
		m++
		return e.submitKeyed(fmt.Sprintf("fz-impatient-%d", m), map[string]any{"steps": 0}, time.Second)
	})
	time.Sleep(50 * time.Millisecond)
	ready := e.record(100*time.Millisecond, e.probeReady)
	reads := e.record(250*time.Millisecond, func() httpAnswer {
		return e.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", seed.id), "", nil, 25*time.Second)
	})
	n := 0
	patient := e.record(500*time.Millisecond, func() httpAnswer {
		n++
		return e.submitKeyed(fmt.Sprintf("fz-patient-%d", n), map[string]any{"steps": 0}, 25*time.Second)
	})
	time.Sleep(time.Until(frozen.Add(20 * time.Second)))
	pair.thaw(pair.primary)
	thawed := time.Now()
	time.Sleep(3 * time.Second)

	probes := ready.all()
	checkReadiness(t, probes, frozen, thawed, thawed, 5*time.Second)
	got := reads.all()
	for _, a := range between(got, frozen, thawed.Add(haRequestBound)) {
		if a.start.After(thawed) {
			break
		}
		if a.status == 0 || a.took() > haRequestBound || a.status == http.StatusInternalServerError {
			t.Errorf("reading a job %v into the freeze: %s, want 200 or 503 within %v", a.start.Sub(frozen).Round(time.Millisecond), a, haRequestBound)
			break
		}
	}
	t.Logf("reads by status during the freeze: %v", statusCounts(sentBetween(got, frozen, thawed)))
	subs := patient.all()
	checkAnswers(t, "patient submissions", subs, frozen, thawed.Add(-haRequestBound))
	t.Logf("patient submissions by status: during the freeze %v", statusCounts(sentBetween(subs, frozen, thawed)))
	gaveUp := impatient.all()
	t.Logf("impatient submissions by status (0: the client gave up): during the freeze %v, after it %v",
		statusCounts(sentBetween(gaveUp, frozen, thawed)), statusCounts(sentBetween(gaveUp, thawed, time.Now())))
	// Anything a frozen backend still held has run by now. A submission
	// whose answer or give-up came while the primary was frozen must have
	// left nothing. One that was still open at the thaw may have committed
	// before its client gave up or the server's bound answered 503, as
	// with any answer that never came: its client resends its key.
	time.Sleep(2 * time.Second)
	if len(between(gaveUp, frozen, thawed)) == 0 {
		t.Fatal("no impatient client gave up while the primary was frozen")
	}
	e.checkNothingCommitted(between(append(subs, gaveUp...), frozen, thawed))
}
