package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestPagesNeedASession(t *testing.T) {
	t.Parallel()
	f := setup(t)
	anon := &browser{f: f, client: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	for _, path := range []string{"/", "/jobs", "/jobs/1", "/dead", "/workers", "/jobs/new"} {
		req, _ := http.NewRequest(http.MethodGet, f.srv.URL+path, nil)
		r := anon.do(t, req)
		if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/login") {
			t.Fatalf("GET %s without a session: %d → %q, want a redirect to /login", path, r.status, r.header.Get("Location"))
		}
	}
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/jobs", nil)
	req.Header.Set("HX-Request", "true")
	r := anon.do(t, req)
	if r.status != http.StatusUnauthorized || r.header.Get("HX-Redirect") != "/login?next=%2Fjobs" {
		t.Fatalf("htmx request without a session: %d HX-Redirect %q", r.status, r.header.Get("HX-Redirect"))
	}
	f.do(t, call{method: http.MethodGet, path: "/login", token: "-"}).want(t, http.StatusOK)
}

func TestSignInRotatesSessionAndSignsOut(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	page := b.get(t, "/").want(t, http.StatusOK)
	if !strings.Contains(string(page.body), `data-testid="current-user">alice<`) {
		t.Fatalf("overview does not show the user: %.500s", page.body)
	}
	if csp := page.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Fatalf("CSP %q", csp)
	}
	before := cookieOf(b, f)
	b.post(t, "/login", url.Values{"username": {"alice"}, "password": {testPassword}}).want(t, http.StatusSeeOther)
	after := cookieOf(b, f)
	if before == "" || after == "" || before == after {
		t.Fatal("signing in again did not rotate the session cookie")
	}
	// The old session is gone.
	stale := &browser{f: f, client: &http.Client{CheckRedirect: b.client.CheckRedirect}}
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/", nil)
	req.AddCookie(&http.Cookie{Name: "lh_session", Value: before})
	if r := stale.do(t, req); r.status != http.StatusSeeOther {
		t.Fatalf("the replaced session still works: %d", r.status)
	}
	b.get(t, "/")
	b.post(t, "/logout", url.Values{}).want(t, http.StatusSeeOther)
	if r := b.get(t, "/"); r.status != http.StatusSeeOther {
		t.Fatalf("after sign-out: %d", r.status)
	}
}

func TestSignInFailuresAreThrottledPerAccount(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.signIn(t, "bob")
	anon := &browser{f: f, client: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	for i := range 5 {
		r := anon.post(t, "/login", url.Values{"username": {"bob"}, "password": {"wrong"}})
		if r.status != http.StatusUnauthorized || !strings.Contains(string(r.body), `aria-invalid="true"`) {
			t.Fatalf("failure %d: status %d", i+1, r.status)
		}
	}
	r := anon.post(t, "/login", url.Values{"username": {"bob"}, "password": {testPassword}})
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("right password during the lock: %d, want 429", r.status)
	}
	// Another account is not locked by bob's failures.
	f.signIn(t, "carol")
	// An unknown user is told the same as a wrong password.
	if r := anon.post(t, "/login", url.Values{"username": {"nobody"}, "password": {"x"}}); r.status != http.StatusUnauthorized {
		t.Fatalf("unknown user: %d", r.status)
	}
}

func TestCrossSiteFormsAreRefused(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	b.get(t, "/")
	// Without the CSRF token.
	r := b.post(t, "/logout", url.Values{"_csrf": {"wrong"}})
	if r.status != http.StatusForbidden {
		t.Fatalf("wrong CSRF token: %d", r.status)
	}
	// With the token but from another site.
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/logout", strings.NewReader(url.Values{"_csrf": {b.csrf}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Origin", "https://evil.example")
	if r := b.do(t, req); r.status != http.StatusForbidden {
		t.Fatalf("cross-site post: %d", r.status)
	}
	// A sign-in form posted from another site signs nobody in.
	req, _ = http.NewRequest(http.MethodPost, f.srv.URL+"/login", strings.NewReader("username=alice&password="+url.QueryEscape(testPassword)))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if r := b.do(t, req); r.status != http.StatusForbidden {
		t.Fatalf("cross-site sign-in: %d", r.status)
	}
	b.get(t, "/").want(t, http.StatusOK) // still signed in: nothing changed
}

func TestSignInRedirectStaysOnThisSite(t *testing.T) {
	t.Parallel()
	f := setup(t)
	if err := f.auth.SetPassword(f.ctx, "alice", testPassword); err != nil {
		t.Fatal(err)
	}
	anon := &browser{f: f, client: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	for next, want := range map[string]string{"/dead": "/dead", "//evil.example": "/", "https://evil.example": "/", "/\\evil": "/"} {
		r := anon.post(t, "/login", url.Values{"username": {"alice"}, "password": {testPassword}, "next": {next}})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != want {
			t.Fatalf("next=%q: %d → %q, want %q", next, r.status, r.header.Get("Location"), want)
		}
	}
}

func cookieOf(b *browser, f *fixture) string {
	u, _ := url.Parse(f.srv.URL)
	for _, c := range b.client.Jar.Cookies(u) {
		if c.Name == "lh_session" {
			return c.Value
		}
	}
	return ""
}
