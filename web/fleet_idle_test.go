package web_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/queue"
)

// What keeps an idle fleet free (tokens from memory, presence in batches,
// polls that skip a claim nothing can have changed) must not keep a
// revoked token working: with both servers' memories warm, a revoke made
// by another process (as `server token revoke` is) refuses the token's
// next claim and presence on either server at once, ends the long poll it
// has waiting, and its whoami within the moment the notification takes,
// even with its leases never ended.
func TestRevokeRefusesAtOnceOnEveryServerWithWarmMemory(t *testing.T) {
	t.Parallel()
	a := setup(t)
	b := setup(t, setupOpts{sharing: a})
	as := func(f *fixture, method, path, body string) *response {
		return f.do(t, call{method: method, path: path, body: body, token: f.worker})
	}
	for _, f := range []*fixture{a, b} {
		for range 3 { // remembered, and the claim known empty
			as(f, http.MethodGet, "/api/v1/worker/whoami", "").want(t, http.StatusOK)
			as(f, http.MethodPost, "/api/v1/worker/presence", `{}`).want(t, http.StatusNoContent)
			as(f, http.MethodPost, "/api/v1/worker/claim", `{"wait_ms":50}`).want(t, http.StatusOK)
		}
	}
	polled := make(chan *response, 1)
	go func() {
		polled <- b.do(t, call{method: http.MethodPost, path: "/api/v1/worker/claim", body: `{"wait_ms":20000}`, token: b.worker})
	}()
	time.Sleep(200 * time.Millisecond) // the poll waits

	revoked := time.Now()
	if _, _, err := apitoken.NewStore(a.pool).Revoke(a.ctx, "worker"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []*fixture{b, a} {
		as(f, http.MethodPost, "/api/v1/worker/claim", `{"wait_ms":20000}`).want(t, http.StatusUnauthorized)
		as(f, http.MethodPost, "/api/v1/worker/presence", `{}`).want(t, http.StatusUnauthorized)
		as(f, http.MethodPost, "/api/v1/worker/claim", `{"wait_ms":0}`).want(t, http.StatusUnauthorized)
	}
	if took := time.Since(revoked); took > 2*time.Second {
		t.Fatalf("the refusals took %v after the revoke", took)
	}
	select {
	case r := <-polled:
		r.want(t, http.StatusUnauthorized)
	case <-time.After(2 * time.Second):
		t.Fatal("the waiting long poll did not end within 2s of the revoke")
	}
	for _, f := range []*fixture{a, b} {
		deadline := time.Now().Add(2 * time.Second)
		for as(f, http.MethodGet, "/api/v1/worker/whoami", "").status != http.StatusUnauthorized {
			if time.Now().After(deadline) {
				t.Fatal("whoami still accepted 2s after the revoke")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	var seen int
	if err := a.pool.QueryRow(a.ctx, "SELECT count(*) FROM workers WHERE id = 'worker' AND last_seen > now() - interval '1 second' * $1",
		time.Since(revoked).Seconds()).Scan(&seen); err != nil || seen != 0 {
		t.Fatalf("a presence after the revoke was recorded (%d, %v)", seen, err)
	}
}

// A server writes its remote workers' presence in batches, yet each
// report's last_seen is when the server received it: a worker killed
// after its last report shows offline one online window after that
// report, not a batch later.
func TestPresenceBatchKeepsWhenEachReportArrived(t *testing.T) {
	t.Parallel()
	f := setup(t)
	secrets := map[string]string{}
	for _, name := range []string{"w1", "w2"} {
		s, _, err := f.tokens.Create(f.ctx, name, apitoken.RoleWorker)
		if err != nil {
			t.Fatal(err)
		}
		secrets[name] = s
	}
	presence := func(name string) {
		f.do(t, call{method: http.MethodPost, path: "/api/v1/worker/presence", body: `{"queues":["q"]}`, token: secrets[name]}).
			want(t, http.StatusNoContent)
	}
	presence("w1") // written at once: the batch was quiet
	var sent time.Time
	if err := f.pool.QueryRow(f.ctx, "SELECT clock_timestamp()").Scan(&sent); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	presence("w2") // waits for the next statement of the batch
	if took := time.Since(began); took < queue.PresenceBatchEvery/2 {
		t.Fatalf("the second report took %v: not batched (want about %v)", took, queue.PresenceBatchEvery)
	}
	var lag time.Duration
	var ms float64
	if err := f.pool.QueryRow(f.ctx, "SELECT extract(epoch FROM last_seen - $1::timestamptz) * 1000 FROM workers WHERE id = 'w2'", sent).Scan(&ms); err != nil {
		t.Fatal(err)
	}
	lag = time.Duration(ms * float64(time.Millisecond))
	if lag < -50*time.Millisecond || lag > 500*time.Millisecond {
		t.Fatalf("w2's last_seen is %v after its report was sent, want when the server received it (the batch wrote it %v later)",
			lag, queue.PresenceBatchEvery)
	}
	// Online for the window after that report, then offline.
	online := func(name string) bool {
		var n int
		if err := f.pool.QueryRow(f.ctx, "SELECT count(*) FROM workers WHERE id = $1 AND last_seen >= $2::timestamptz - $3 * interval '1 millisecond'",
			name, sent.Add(queue.OnlineWindow-100*time.Millisecond), queue.OnlineWindow.Milliseconds()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	if !online("w2") {
		t.Fatal("w2 is not online until the end of the window after its report")
	}
	var offlineAt time.Time
	if err := f.pool.QueryRow(f.ctx, "SELECT last_seen + $1 * interval '1 millisecond' FROM workers WHERE id = 'w2'",
		queue.OnlineWindow.Milliseconds()).Scan(&offlineAt); err != nil {
		t.Fatal(err)
	}
	if late := offlineAt.Sub(sent.Add(queue.OnlineWindow)); late > 500*time.Millisecond {
		t.Fatalf("w2 would show offline %v after one online window from its report", late)
	}
	var list struct {
		Workers []struct {
			ID string `json:"id"`
		} `json:"workers"`
	}
	f.get(t, "/api/v1/workers").want(t, http.StatusOK).decode(t, &list)
	if len(list.Workers) != 2 {
		t.Fatalf("workers listed: %+v, want w1 and w2", list.Workers)
	}
}

// A paused queue claims nothing, however the polls of its workers are
// spared their claims: the poll after a known-empty one skips its claim,
// and still nothing is handed out; resuming wakes a waiting poll, which
// takes the job.
func TestPausedQueueClaimsNothingWhileItsPollsSkip(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.patchQueue(t, "phones", `{"paused":true}`)
	job := f.submit(t, `{"kind":"noop","queue":"phones"}`)
	for i := range 3 {
		if jobs := f.claimAs(t, f.worker, `{"queues":["phones"],"wait_ms":100}`); len(jobs) != 0 {
			t.Fatalf("poll %d claimed %+v from a paused queue", i, jobs)
		}
	}
	polled := make(chan []jobJSON, 1)
	go func() { polled <- f.claimAs(t, f.worker, `{"queues":["phones"],"wait_ms":10000}`) }()
	time.Sleep(200 * time.Millisecond) // the poll waits, its claim skipped
	f.patchQueue(t, "phones", `{"paused":false}`)
	select {
	case jobs := <-polled:
		if len(jobs) != 1 || jobs[0].ID != job.ID {
			t.Fatalf("after the resume the waiting poll got %+v, want job %d", jobs, job.ID)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the waiting poll did not get job %d within 5s of the resume", job.ID)
	}
}
