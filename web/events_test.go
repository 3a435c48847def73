package web_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
)

// sseEvent is one message of an event stream as a browser parses it; a
// comment is an event with only Comment set.
type sseEvent struct {
	ID, Name, Data, Comment, Retry string
}

// sseStream is an open GET /events.
type sseStream struct {
	res    *http.Response
	events chan sseEvent
	cancel context.CancelFunc
}

// openEvents opens the event stream with b's session, and fails unless
// its headers arrive within a second, before any event.
func (b *browser) openEvents(t *testing.T, path string, header map[string]string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(b.f.ctx)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.f.srv.URL+path, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	got := make(chan *http.Response, 1)
	errs := make(chan error, 1)
	go func() {
		res, err := b.client.Do(req)
		if err != nil {
			errs <- err
			return
		}
		got <- res
	}()
	var res *http.Response
	select {
	case res = <-got:
	case err := <-errs:
		t.Fatalf("GET %s: %v", path, err)
	case <-time.After(time.Second):
		t.Fatalf("GET %s: no headers within a second: they must be flushed at once", path)
	}
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", path, res.StatusCode)
	}
	s := &sseStream{res: res, events: make(chan sseEvent, 1000), cancel: cancel}
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(res.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev != (sseEvent{}) {
					s.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				ev.Comment = strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "retry: "):
				ev.Retry = line[7:]
			case strings.HasPrefix(line, "id: "):
				ev.ID = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.Name = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.Data = line[6:]
			}
		}
	}()
	return s
}

// next is the stream's next event (comments and retry: lines skipped
// unless comments), failing after within.
func (s *sseStream) next(t *testing.T, within time.Duration, comments bool) sseEvent {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatal("the stream ended")
			}
			if ev.Name == "" && !comments {
				continue
			}
			return ev
		case <-deadline:
			t.Fatalf("no event within %s", within)
		}
	}
}

// waitFor reads events until one named name whose data contains data.
func (s *sseStream) waitFor(t *testing.T, within time.Duration, name, data string) sseEvent {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("no %s event with %q within %s", name, data, within)
		}
		ev := s.next(t, left, false)
		if ev.Name == name && strings.Contains(ev.Data, data) {
			return ev
		}
	}
}

func (s *sseStream) ended(t *testing.T, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case _, ok := <-s.events:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("the stream did not end within %s", within)
		}
	}
}

func TestEventsNeedsASession(t *testing.T) {
	t.Parallel()
	f := setup(t)
	// A bearer token is not a session: the stream is for pages.
	jar, _ := cookiejar.New(nil)
	anon := &browser{f: f, client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
	req, _ := http.NewRequestWithContext(f.ctx, http.MethodGet, f.srv.URL+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+f.admin)
	r := anon.do(t, req)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/login?next=%2Fevents" {
		t.Fatalf("without a session: %d %v", r.status, r.header)
	}
	if ct := r.header.Get("Content-Type"); strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("without a session: a stream (%s)", ct)
	}
	req, _ = http.NewRequestWithContext(f.ctx, http.MethodGet, f.srv.URL+"/events", nil)
	req.Header.Set("HX-Request", "true")
	r = anon.do(t, req)
	if r.status != http.StatusUnauthorized || r.header.Get("HX-Redirect") == "" {
		t.Fatalf("htmx request without a session: %d %v", r.status, r.header)
	}
}

func TestEventsStreamHeadersAndChanges(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	s := b.openEvents(t, "/events", nil)
	if ct := s.res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	if cc := s.res.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("cache control %q", cc)
	}
	if ev := s.next(t, time.Second, true); ev != (sseEvent{Retry: "1000"}) {
		t.Fatalf("first message %+v, want the reconnection delay", ev)
	}

	// A submission through the API, a claim and a failure as a direct
	// worker writes them: the stream hears of each from PostgreSQL.
	j := f.submit(t, `{"kind":"report","queue":"live","max_attempts":1}`)
	id := strconv.FormatInt(j.ID, 10)
	ev := s.waitFor(t, 2*time.Second, "jobs", "["+id+"]")
	if !strings.Contains(ev.Data, `"states":["pending"]`) || ev.ID == "" {
		t.Fatalf("submission event %+v", ev)
	}
	jobs, err := f.queue.Claim(f.ctx, queue.ClaimParams{WorkerID: "w1", Queues: []string{"live"}, Limit: 1, Lease: time.Minute})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	s.waitFor(t, 2*time.Second, "jobs", `"states":["pending","running"]`)
	if _, err := f.queue.Fail(f.ctx, queue.Lease{JobID: j.ID, Token: jobs[0].LeaseToken, WorkerID: "w1"}, "boom", false); err != nil {
		t.Fatal(err)
	}
	// Coalescing may hold the jobs event back, and not the dead one.
	for got := map[string]bool{}; !got["jobs"] || !got["dead"]; {
		ev := s.next(t, 2*time.Second, false)
		got[ev.Name] = got[ev.Name] || ev.Name == "dead" || strings.Contains(ev.Data, `"states":["dead","running"]`)
	}
	if err := f.queue.WorkerSeen(f.ctx, queue.Presence{ID: "phone-1", Queues: []string{"live"}}); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, 2*time.Second, "workers", "")
}

func TestEventsJobStreamHearsProgressAndArtifacts(t *testing.T) {
	t.Parallel()
	f := setup(t, setupOpts{coalesce: -1}) // each change its own event
	b := f.signIn(t, "alice")
	j := f.submitInvestigation(t, "com.example.notes")
	other := f.submitInvestigation(t, "com.example.other")
	l := f.claimInvestigation(t, j.ID)
	s := b.openEvents(t, "/events?job="+strconv.FormatInt(j.ID, 10), nil)

	// Another job's news is not this page's.
	if _, err := f.queue.CancelOne(f.ctx, other.ID, "test"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := f.queue.Progress(f.ctx, l, 0.5, "opened settings"); err != nil {
		t.Fatal(err)
	}
	// The claim's own state change may reach the hub after the stream
	// opened (notifications arrive a moment after their commit): it is
	// this job's news too, and not what this test waits for.
	ev := s.next(t, time.Second, false)
	if ev.Name == "job" && strings.Contains(ev.Data, `"states":["pending","running"]`) {
		ev = s.next(t, time.Second, false)
	}
	if ev.Name != "job" || ev.Data != `{"ids":[`+strconv.FormatInt(j.ID, 10)+`]}` {
		t.Fatalf("after progress: %+v", ev)
	}
	if _, err := f.queue.RecordArtifact(f.ctx, l, queue.Artifact{Kind: queue.ArtifactScreenshot, Name: "s.png", ContentType: "image/png", Size: 1, SHA256: strings.Repeat("a", 64)}); err != nil {
		t.Fatal(err)
	}
	if ev := s.next(t, time.Second, false); ev.Name != "job" {
		t.Fatalf("after an artifact: %+v", ev)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("two updates took %s", d)
	}
}

func TestEventsKeepAlive(t *testing.T) {
	t.Parallel()
	f := setup(t, setupOpts{keepAlive: 50 * time.Millisecond})
	b := f.signIn(t, "alice")
	s := b.openEvents(t, "/events", nil)
	for range 3 {
		ev := s.next(t, time.Second, true)
		for ev.Comment == "" {
			ev = s.next(t, time.Second, true)
		}
		if ev.Comment != "keep-alive" {
			t.Fatalf("comment %+v", ev)
		}
	}
}

// The server's own deadlines (a WriteTimeout, a ReadTimeout) would cut a
// stream that stays open; the stream outlives them.
func TestEventsOutliveServerDeadlines(t *testing.T) {
	t.Parallel()
	f := setup(t, setupOpts{keepAlive: time.Hour, server: func(s *http.Server) {
		s.WriteTimeout, s.ReadTimeout = 300*time.Millisecond, 300*time.Millisecond
	}})
	// A session opened without POST /login: its argon2id hash can take
	// longer than the 300 ms write deadline under -race on a busy machine.
	if err := f.auth.SetPassword(f.ctx, "alice", testPassword); err != nil {
		t.Fatal(err)
	}
	token, _, err := f.auth.SignIn(f.ctx, netip.MustParseAddr("127.0.0.1"), "alice", testPassword)
	if err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	base, _ := url.Parse(f.srv.URL)
	jar.SetCookies(base, []*http.Cookie{{Name: "lh_session", Value: token, Path: "/"}})
	b := &browser{f: f, client: &http.Client{Jar: jar}}
	s := b.openEvents(t, "/events", nil)
	time.Sleep(time.Second)
	// The job goes in beside the server: a submit through it would have
	// the same 300 ms to answer, which a loaded CI machine overran.
	j, _, err := f.queue.Insert(f.ctx, queue.NewJob{Kind: "report"})
	if err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, 2*time.Second, "jobs", strconv.FormatInt(j.ID, 10))
}

func TestEventsReplayAndReset(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	s := b.openEvents(t, "/events", nil)
	first := f.submit(t, `{"kind":"report"}`)
	seen := s.waitFor(t, 2*time.Second, "jobs", strconv.FormatInt(first.ID, 10))
	s.cancel()

	// Missed while away, replayed on reconnecting with Last-Event-ID.
	missed := f.submit(t, `{"kind":"report"}`)
	f.eventually(t, func() bool { return f.hub.LastID() != seen.ID })
	s = b.openEvents(t, "/events", map[string]string{"Last-Event-ID": seen.ID})
	ev := s.next(t, time.Second, false)
	if ev.Name != "jobs" || !strings.Contains(ev.Data, strconv.FormatInt(missed.ID, 10)) {
		t.Fatalf("replay: %+v", ev)
	}
	s.cancel()
	// The id a page was rendered with works as well, as a query parameter.
	s = b.openEvents(t, "/events?last_event_id="+seen.ID, nil)
	if ev := s.next(t, time.Second, false); ev.ID != f.hub.LastID() {
		t.Fatalf("replay by query: %+v, latest %s", ev, f.hub.LastID())
	}
	s.cancel()

	for name, id := range map[string]string{
		"OtherServer": "0123456789ab-5",
		"Garbage":     "<script>alert(1)</script>",
		"Overlong":    strings.Repeat("9", 10_000),
	} {
		t.Run(name, func(t *testing.T) {
			s := b.openEvents(t, "/events", map[string]string{"Last-Event-ID": id})
			if ev := s.next(t, time.Second, false); ev.Name != "reset" || ev.ID != f.hub.LastID() {
				t.Fatalf("after %.20q: %+v, want a reset", id, ev)
			}
		})
	}
}

func TestEventsBadInput(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	for _, q := range []string{"job=abc", "job=0", "job=-3", "job=99999999999999999999", "job=" + strings.Repeat("1", 5000)} {
		req, _ := http.NewRequestWithContext(f.ctx, http.MethodGet, f.srv.URL+"/events?"+q, nil)
		r := b.do(t, req)
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "job must be a job id") {
			t.Errorf("?%.30s: %d %s", q, r.status, r.body)
		}
	}
	for _, m := range []string{http.MethodPost, http.MethodDelete} {
		req, _ := http.NewRequestWithContext(f.ctx, m, f.srv.URL+"/events", nil)
		req.Header.Set("Origin", f.srv.URL)
		if r := b.do(t, req); r.status != http.StatusMethodNotAllowed {
			t.Errorf("%s /events: %d", m, r.status)
		}
	}
}

// Past the most streams a server keeps open, a browser is told to come
// back later; a closed stream makes room.
func TestEventsTooManyStreams(t *testing.T) {
	t.Parallel()
	f := setup(t, setupOpts{maxStreams: 2})
	b := f.signIn(t, "alice")
	first := b.openEvents(t, "/events", nil)
	b.openEvents(t, "/events?job=3", nil)
	req, _ := http.NewRequestWithContext(f.ctx, http.MethodGet, f.srv.URL+"/events", nil)
	r := b.do(t, req)
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || !strings.Contains(string(r.body), "too many open event streams") {
		t.Fatalf("a third stream: %d %v %s", r.status, r.header, r.body)
	}
	first.cancel()
	f.eventually(t, func() bool { return f.hub.Streams() < 2 })
	b.openEvents(t, "/events", nil)
}

// Shutting down ends the streams, so that the server does not wait for
// browsers to leave.
func TestEventsEndOnShutdown(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	streams := []*sseStream{b.openEvents(t, "/events", nil), b.openEvents(t, "/events?job=1", nil)}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- f.srv.Config.Shutdown(ctx)
	}()
	for _, s := range streams {
		s.ended(t, 2*time.Second)
	}
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

func (f *fixture) eventually(t *testing.T, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, "the condition", cond)
}
