package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/internal/testutil"
)

// wantRateLimited fails unless r is a 429 of code rate_limited with a
// Retry-After.
func wantRateLimited(t *testing.T, what string, status int, header http.Header, body []byte) {
	t.Helper()
	var e struct{ Error, Code string }
	_ = json.Unmarshal(body, &e)
	if status != http.StatusTooManyRequests || e.Code != "rate_limited" || header.Get("Retry-After") == "" {
		t.Fatalf("%s: %d %q Retry-After %q: %s, want 429 rate_limited with Retry-After", what, status, e.Code, header.Get("Retry-After"), body)
	}
}

// A worker token may have only a few claims open at once: the next one
// is refused at once (429), nothing claimed, while another token's
// claims go on; once one ends, the token may claim again.
func TestClaimsPerTokenBounded(t *testing.T) {
	t.Parallel()
	f := setup(t, setupOpts{maxClaimsPerToken: 2})
	other, _, err := f.tokens.Create(f.ctx, "worker-2", apitoken.RoleWorker)
	if err != nil {
		t.Fatal(err)
	}
	polls, stop := context.WithCancel(f.ctx)
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	first, cancelFirst := context.WithCancel(polls)
	for i := range 2 {
		ctx := polls
		if i == 0 {
			ctx = first
		}
		// A poll refused because the probe below held a slot for a
		// moment tries again, until two polls wait.
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.srv.URL+"/api/v1/worker/claim",
					strings.NewReader(`{"queues":["nothing"],"wait_ms":30000}`))
				req.Header.Set("Authorization", "Bearer "+f.worker)
				req.Header.Set("Content-Type", "application/json")
				res, err := f.srv.Client().Do(req)
				if err != nil {
					return
				}
				res.Body.Close()
				if res.StatusCode != http.StatusTooManyRequests {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	claim := func(token string) *response {
		return f.do(t, call{method: http.MethodPost, path: "/api/v1/worker/claim", token: token, body: `{"queues":["nothing"]}`})
	}
	var refused *response
	testutil.Eventually(t, 5*time.Second, "a third claim refused", func() bool {
		start := time.Now()
		r := claim(f.worker)
		if r.status == http.StatusTooManyRequests && time.Since(start) > time.Second {
			t.Fatalf("a refused claim took %s: it must be refused at once", time.Since(start))
		}
		refused = r
		return r.status == http.StatusTooManyRequests
	})
	wantRateLimited(t, "a third claim", refused.status, refused.header, refused.body)
	if !strings.Contains(string(refused.body), "2 claims open") {
		t.Errorf("the refusal does not say the bound: %s", refused.body)
	}
	claim(other).want(t, http.StatusOK)

	cancelFirst()
	testutil.Eventually(t, 5*time.Second, "a claim after one ended", func() bool {
		return claim(f.worker).status == http.StatusOK
	})
}

// openStreams opens n event streams of b's session at once and returns
// how many were served; the others must be refused 429, at once. The
// served ones stay open until the test ends.
func (b *browser) openStreams(t *testing.T, n int) int {
	t.Helper()
	ctx, cancel := context.WithCancel(b.f.ctx)
	t.Cleanup(cancel)
	var (
		mu     sync.Mutex
		served int
		wg     sync.WaitGroup
	)
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.f.srv.URL+"/events", nil)
			res, err := b.client.Do(req)
			if err != nil {
				t.Errorf("GET /events: %v", err)
				return
			}
			if res.StatusCode == http.StatusOK {
				mu.Lock()
				served++
				mu.Unlock()
				t.Cleanup(func() { res.Body.Close() })
				return
			}
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			wantRateLimited(t, "a stream past the session's bound", res.StatusCode, res.Header, body)
		})
	}
	wg.Wait()
	return served
}

// A thousand streams from one session take only its own few: another
// person's page still opens its stream and hears what changes.
func TestEventsPerSessionBounded(t *testing.T) {
	t.Parallel()
	f := setup(t, setupOpts{maxStreams: 1000})
	alice := f.signIn(t, "alice")
	if served := alice.openStreams(t, 1000); served != 8 {
		t.Fatalf("%d of 1,000 streams of one session served, want the default bound of 8", served)
	}
	bob := f.signIn(t, "bob")
	s := bob.openEvents(t, "/events", nil)
	j := f.submit(t, `{"kind":"report"}`)
	s.waitFor(t, 2*time.Second, "jobs", strconv.FormatInt(j.ID, 10))
}

// Signing out ends the session's open streams: at once on the server
// that signed it out, and at the next keep-alive on any other (here: the
// session deleted behind this server's back).
func TestEventsEndOnSignOut(t *testing.T) {
	t.Parallel()
	t.Run("ThisServer", func(t *testing.T) {
		t.Parallel()
		f := setup(t, setupOpts{keepAlive: time.Hour})
		alice := f.signIn(t, "alice")
		streams := []*sseStream{alice.openEvents(t, "/events", nil), alice.openEvents(t, "/events?job=1", nil)}
		bob := f.signIn(t, "bob")
		other := bob.openEvents(t, "/events", nil)
		alice.get(t, "/")
		alice.post(t, "/logout", url.Values{}).want(t, http.StatusSeeOther)
		for _, s := range streams {
			s.ended(t, time.Second)
		}
		j := f.submit(t, `{"kind":"report"}`)
		other.waitFor(t, 2*time.Second, "jobs", strconv.FormatInt(j.ID, 10))
	})
	t.Run("AnotherServer", func(t *testing.T) {
		t.Parallel()
		f := setup(t, setupOpts{keepAlive: 100 * time.Millisecond})
		alice := f.signIn(t, "alice")
		s := alice.openEvents(t, "/events", nil)
		base, _ := http.NewRequest(http.MethodGet, f.srv.URL, nil)
		var token string
		for _, c := range alice.client.Jar.Cookies(base.URL) {
			if c.Name == "lh_session" {
				token = c.Value
			}
		}
		if err := f.auth.SignOut(f.ctx, token); err != nil {
			t.Fatal(err)
		}
		s.ended(t, 2*time.Second)
	})
}
