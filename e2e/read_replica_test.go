package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
)

// The server reads its pages and the admin API's lists from a streaming
// standby (pgPair), given as LEASEHOLD_READ_DATABASE_URL.

// pageClient is a signed-in person's browser over plain HTTP: its
// cookies (the session, the primary pin), and the CSRF token of the last
// page it was shown.
type pageClient struct {
	t    *testing.T
	ctx  context.Context
	base string
	http *http.Client
	csrf string
}

var pageCSRF = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// signInPages signs in as admin at base (a server, or Caddy before
// several) with password.
func (e *env) signInPages(base, password string) *pageClient {
	e.t.Helper()
	jar, _ := cookiejar.New(nil)
	b := &pageClient{t: e.t, ctx: e.ctx, base: base, http: &http.Client{
		Jar: jar, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	if status, _ := b.post("/login", url.Values{"username": {"admin"}, "password": {password}}); status != http.StatusSeeOther {
		e.t.Fatalf("signing in: status %d", status)
	}
	return b
}

// get fetches a page: its status and body (status 0: no answer).
func (b *pageClient) get(path string) (int, string) {
	req, _ := http.NewRequestWithContext(b.ctx, http.MethodGet, b.base+path, nil)
	res, err := b.http.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if m := pageCSRF.FindSubmatch(body); m != nil {
		b.csrf = string(m[1])
	}
	return res.StatusCode, string(body)
}

// post submits a form from a page of this site; it returns the status
// and where it redirects.
func (b *pageClient) post(path string, form url.Values) (int, string) {
	b.t.Helper()
	if b.csrf != "" {
		form.Set("_csrf", b.csrf)
	}
	req, _ := http.NewRequestWithContext(b.ctx, http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := b.http.Do(req)
	if err != nil {
		b.t.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode, res.Header.Get("Location")
}

// submitForm submits an investigation of app through /jobs/new and
// returns where it was sent (/jobs/ID).
func (b *pageClient) submitForm(app string) string {
	b.t.Helper()
	status, body := b.get("/jobs/new")
	m := regexp.MustCompile(`name="idempotency_key" value="([0-9a-f]{32})"`).FindStringSubmatch(body)
	if status != http.StatusOK || m == nil {
		b.t.Fatalf("the submit form: status %d", status)
	}
	status, loc := b.post("/jobs/new", url.Values{
		"app": {app}, "store_url": {""}, "device": {""}, "instructions": {"Open settings"},
		"priority": {"0"}, "max_attempts": {"3"}, "idempotency_key": {m[1]},
	})
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/jobs/") {
		b.t.Fatalf("submitting: status %d, to %q", status, loc)
	}
	return loc
}

var readFromLine = regexp.MustCompile(`data-testid="read-from"[^>]*>\s*Reading from\s+([^<]*?)\s*<`)

// readFrom is what the overview says of where it read ("" if nothing).
func (b *pageClient) readFrom() string {
	_, body := b.get("/")
	if m := readFromLine.FindStringSubmatch(body); m != nil {
		return m[1]
	}
	return ""
}

// listsApp says whether GET /api/v1/jobs (of api, the admin token's)
// lists a job of app among the newest 500.
func listsApp(ctx context.Context, t *testing.T, api *client.Client, app string) bool {
	t.Helper()
	page, err := api.ListPage(ctx, client.ListOptions{App: app, PageSize: 500}, 0)
	if err != nil {
		t.Fatalf("listing jobs: %v", err)
	}
	return len(page.Jobs) > 0
}

// metric is the value of a sample line of the server's /metrics ("" if
// absent).
func metric(t *testing.T, base, name string) string {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		return ""
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

// pageProbe requests pages and API lists of base over and over until
// stopped, and keeps every answer that was not a 200.
type pageProbe struct {
	stop    chan struct{}
	done    sync.WaitGroup
	mu      sync.Mutex
	n       int
	refused []string
}

func probePages(b *pageClient, api *client.Client, paths ...string) *pageProbe {
	p := &pageProbe{stop: make(chan struct{})}
	p.done.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-p.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			path := paths[i%len(paths)]
			status, body := b.get(path)
			var err error
			if status == http.StatusOK {
				_, err = api.Stats(b.ctx)
			}
			p.mu.Lock()
			p.n++
			if status != http.StatusOK {
				p.refused = append(p.refused, fmt.Sprintf("GET %s: %d %.200s", path, status, body))
			}
			if err != nil {
				p.refused = append(p.refused, "GET /api/v1/stats: "+err.Error())
			}
			p.mu.Unlock()
		}
	})
	return p
}

// end stops the probe and returns how many rounds it made and what
// failed.
func (p *pageProbe) end() (int, []string) {
	close(p.stop)
	p.done.Wait()
	return p.n, p.refused
}

// One server on a primary and its streaming standby. Pages and lists
// come from the standby: with its replay paused, a job written on the
// primary is not listed and the overview shows the lag growing; past
// --read-max-lag they come from the primary and list it. A browser that
// submits sees its job at once on the page it is sent to, and in the
// list. A remote worker runs a job meanwhile, on the primary alone. Then
// the standby is killed (kill -9): every page keeps answering 200 from
// the primary, readiness stays 200, the overview says why.
func TestReadReplicaServesPagesAndFallsBack(t *testing.T) {
	pair := newPGPair(t, pgPairOptions{})
	e := newEnvOn(t, pair.URL())
	const password = "correct-horse-battery"
	maxLag := 4 * time.Second
	e.startServerWith("LEASEHOLD_READ_DATABASE_URL="+pair.readURL(), "LEASEHOLD_READ_MAX_LAG="+maxLag.String(),
		"LEASEHOLD_ADMIN_PASSWORD="+password)
	api := e.client()
	reader := e.signInPages(e.apiURL, password)
	e.eventually("the overview read from the replica", 10*time.Second, func() bool {
		return reader.readFrom() == "replica, lag 0s"
	})
	if v := metric(t, e.apiURL, "leasehold_read_replica_reading"); v != "1" {
		t.Errorf("leasehold_read_replica_reading %q, want 1", v)
	}

	// Replay paused: the primary's new job is not on the replica.
	pair.execSQL(pair.standby, "SELECT pg_wal_replay_pause()")
	paused := time.Now()
	if _, err := api.Submit(e.ctx, client.NewJob{Kind: "probe", Queue: "probe", Payload: []byte(`{"app":"com.written.on.primary"}`)}); err != nil {
		t.Fatal(err)
	}
	if listsApp(e.ctx, t, api, "com.written.on.primary") {
		t.Fatal("GET /api/v1/jobs lists a job the replica has not replayed: it read the primary")
	}
	if _, body := reader.get("/jobs"); strings.Contains(body, "com.written.on.primary") {
		t.Fatal("/jobs shows a job the replica has not replayed: it read the primary")
	}
	e.eventually("the overview shows the lag", maxLag, func() bool {
		return regexp.MustCompile(`^replica, lag [1-4]s$`).MatchString(reader.readFrom())
	})
	t.Logf("with replay paused %v: the overview says %q", time.Since(paused).Round(100*time.Millisecond), reader.readFrom())

	// Past the bound, the primary.
	e.eventually("reads fall back to the primary past the bound", maxLag+3*time.Second, func() bool {
		return listsApp(e.ctx, t, api, "com.written.on.primary")
	})
	fellBack := time.Since(paused)
	t.Logf("fell back to the primary %v after the replay paused (bound %v)", fellBack.Round(100*time.Millisecond), maxLag)
	if fellBack < maxLag {
		t.Errorf("fell back after %v, before the bound %v", fellBack, maxLag)
	}
	if got := reader.readFrom(); !strings.HasPrefix(got, "primary: replica lag ") {
		t.Errorf("overview past the bound says %q", got)
	}
	if _, body := reader.get("/jobs"); !strings.Contains(body, "com.written.on.primary") {
		t.Error("/jobs past the bound does not show the primary's job")
	}
	if v, err := strconv.ParseFloat(metric(t, e.apiURL, "leasehold_read_replica_lag_seconds"), 64); err != nil || v <= maxLag.Seconds() {
		t.Errorf("leasehold_read_replica_lag_seconds %v (%v), want past %v", v, err, maxLag.Seconds())
	}

	// Replay resumed: back to the replica.
	pair.execSQL(pair.standby, "SELECT pg_wal_replay_resume()")
	e.eventually("reads back on the replica", 5*time.Second, func() bool { return reader.readFrom() == "replica, lag 0s" })

	// Read-your-writes: replay paused again, a browser submits.
	pair.execSQL(pair.standby, "SELECT pg_wal_replay_pause()")
	writer := e.signInPages(e.apiURL, password)
	loc := writer.submitForm("com.submitted.by.browser")
	if status, body := writer.get(loc); status != http.StatusOK || !strings.Contains(body, "com.submitted.by.browser") {
		t.Errorf("the job page after the submit: %d, shows the job: %v", status, strings.Contains(body, "com.submitted.by.browser"))
	}
	if _, body := writer.get("/jobs"); !strings.Contains(body, "com.submitted.by.browser") {
		t.Error("/jobs right after the submit does not show it to the browser that submitted")
	}
	if _, body := reader.get("/jobs"); strings.Contains(body, "com.submitted.by.browser") {
		t.Error("another browser sees the submit at once: it did not read the replica")
	}

	// A remote worker runs a job with replay still paused: its calls
	// never wait for the replica.
	token := e.workerToken("phone-1")
	e.startRemoteWorker("phone-1", token, "--id", "phone-1", "--spool-dir", t.TempDir())
	job, err := api.Submit(e.ctx, client.NewJob{Kind: "noop"})
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor(job.ID, 20*time.Second, client.StateSucceeded)
	pair.execSQL(pair.standby, "SELECT pg_wal_replay_resume()")
	e.eventually("reads back on the replica", 5*time.Second, func() bool { return reader.readFrom() == "replica, lag 0s" })

	// The replica killed: every page answers, from the primary.
	probe := probePages(reader, api, "/", "/jobs", "/dead", "/workers", "/queues", "/schedules", loc)
	time.Sleep(500 * time.Millisecond)
	pair.kill(pair.standby)
	killed := time.Now()
	time.Sleep(3 * time.Second)
	rounds, refused := probe.end()
	if len(refused) > 0 {
		t.Errorf("%d of %d rounds failed across the replica's kill: %s", len(refused), rounds, strings.Join(refused, "\n"))
	}
	t.Logf("%d page+stats rounds across the kill, none failed", rounds)
	if got := reader.readFrom(); !strings.HasPrefix(got, "primary: replica unreachable") {
		t.Errorf("overview %v after the kill says %q", time.Since(killed).Round(time.Second), got)
	}
	res, err := http.Get(e.apiURL + "/health/ready")
	if err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("readiness with the replica gone: %v %v", res, err)
	}
	if v := metric(t, e.apiURL, "leasehold_read_replica_lag_seconds"); v != "-1" {
		t.Errorf("leasehold_read_replica_lag_seconds %q with the replica gone, want -1", v)
	}
}

// A server given the standby as its DATABASE_URL says so and stops,
// instead of failing on its first write of the start.
func TestServerRefusesAStandbyAsItsDatabase(t *testing.T) {
	pair := newPGPair(t, pgPairOptions{})
	e := newEnvOn(t, pair.readURL())
	p := e.spawn("server", nil, "LEASEHOLD_ADDR=127.0.0.1:0", "LEASEHOLD_ARTIFACTS="+t.TempDir())
	if err := p.wait(t, 30*time.Second); err == nil {
		t.Fatal("the server started on a standby")
	}
	if out := p.out.String(); !strings.Contains(out, "DATABASE_URL reaches a standby") || !strings.Contains(out, "LEASEHOLD_READ_DATABASE_URL") {
		t.Errorf("the server's output does not say what is wrong:\n%s", out)
	}
}
