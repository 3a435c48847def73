package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/role"
	"github.com/leasehold/leasehold/web"
)

// Every route declares the role it needs (web/routes.go), and answers
// every kind of caller accordingly: no credentials, a token of each role,
// a signed-in user of each role. A caller whose role allows the route
// gets past the check (whatever the handler then says of an empty
// request); one whose role does not gets 403; one without credentials
// 401, or the sign-in page. The API's description names the same role.
func TestEveryRouteWithEveryRole(t *testing.T) {
	t.Parallel()
	f := setup(t)
	e := f.srv.Config.Handler.(*echo.Echo)
	job := f.submit(t, `{"kind":"noop"}`)

	tokens := map[role.Role]string{role.Admin: f.admin, role.Worker: f.worker}
	for _, r := range []role.Role{role.Viewer, role.Operator} {
		secret, _, err := f.tokens.Create(f.ctx, "token-"+string(r), apitoken.Role(r))
		if err != nil {
			t.Fatal(err)
		}
		tokens[r] = secret
	}
	sessions := map[role.Role]*browser{}
	for _, r := range role.People {
		name := "user-" + string(r)
		if _, err := f.auth.AddUser(f.ctx, name, r, testPassword); err != nil {
			t.Fatal(err)
		}
		sessions[r] = f.signInAs(t, name)
	}

	described := describedRoles(t)
	params := strings.NewReplacer(":id", strconv.FormatInt(job.ID, 10), ":n", "1", ":name", "nobody",
		":scope", "device", ":key", "llm", "*", "app.js")
	routes := e.Routes()
	// Signing out ends the session the later routes use: last.
	slices.SortStableFunc(routes, func(a, b *echo.Route) int {
		return strings.Compare(a.Path, b.Path) + 10*boolInt(a.Path == "/logout") - 10*boolInt(b.Path == "/logout")
	})
	walked := 0
	for _, rt := range routes {
		need, by, ok := web.RouteNeed(*rt)
		if !ok {
			t.Errorf("%s %s declares no role", rt.Method, rt.Path)
			continue
		}
		// The rule routes.go follows: reading needs a viewer, changing
		// something an operator (the submit form too); users and the
		// audit trail an admin; signing out any signed-in user; the
		// worker API a worker token.
		wantNeed := role.Operator
		switch {
		case need == web.Open || strings.HasPrefix(rt.Path, "/api/v1/worker/"):
			wantNeed = need
		case rt.Path == "/users" || strings.HasPrefix(rt.Path, "/users/") || rt.Path == "/audit" || rt.Path == "/api/v1/audit":
			wantNeed = role.Admin
		case rt.Path == "/logout" || (rt.Method == http.MethodGet || rt.Method == http.MethodHead) && rt.Path != "/jobs/new":
			wantNeed = role.Viewer
		}
		if need != wantNeed || strings.HasPrefix(rt.Path, "/api/v1/worker/") != (need == role.Worker) {
			t.Errorf("%s %s needs %q; the rule says %q", rt.Method, rt.Path, need, wantNeed)
		}
		path := params.Replace(rt.Path)
		if d, isAPI := described[rt.Method+" "+rt.Path]; isAPI && d != need {
			t.Errorf("%s %s needs %q; the API description says x-leasehold-role %q", rt.Method, rt.Path, need, d)
		}
		ask := func(auth func(*http.Request)) int {
			t.Helper()
			status := f.askRoute(t, rt.Method, path, auth)
			walked++
			return status
		}
		if need == web.Open {
			// (POST /login answers 401 to the empty form: wrong name or
			// password, not a missing credential.)
			if s := ask(nil); s == http.StatusForbidden || s == http.StatusSeeOther {
				t.Errorf("%s %s is open, but nobody got %d", rt.Method, path, s)
			}
			continue
		}
		if s := ask(nil); s != http.StatusUnauthorized && s != http.StatusSeeOther {
			t.Errorf("%s %s needs %s; nobody got %d, want 401 or the sign-in page", rt.Method, path, need, s)
		}
		if by == "token" || by == "session or token" {
			for r, secret := range tokens {
				s := ask(func(req *http.Request) { req.Header.Set("Authorization", "Bearer "+secret) })
				checkRole(t, rt, path, need, "a "+string(r)+" token", r, s)
			}
		}
		if by == "session" || by == "session or token" {
			for r, b := range sessions {
				s := ask(b.authorize)
				checkRole(t, rt, path, need, "a "+string(r)+" user", r, s)
			}
		}
	}
	// 81 routes when this was written: 9 open, 39 by token, 3 by
	// session or token, 30 by session.
	if len(routes) < 81 || walked < 300 {
		t.Fatalf("walked %d requests over %d routes: the walk missed most of the server", walked, len(routes))
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func checkRole(t *testing.T, rt *echo.Route, path string, need role.Role, who string, has role.Role, status int) {
	t.Helper()
	allowed := has.Allows(need)
	switch {
	case allowed && (status == http.StatusUnauthorized || status == http.StatusForbidden):
		t.Errorf("%s %s needs %s; %s got %d", rt.Method, path, need, who, status)
	case !allowed && status != http.StatusForbidden:
		t.Errorf("%s %s needs %s; %s got %d, want 403", rt.Method, path, need, who, status)
	}
}

// askRoute sends one request and returns its status; a response that
// streams (live updates) is not read.
func (f *fixture) askRoute(t *testing.T, method, path string, auth func(*http.Request)) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, f.srv.URL+path, http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	if auth != nil {
		auth(req)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	res.Body.Close()
	if res.StatusCode == http.StatusSeeOther && strings.HasPrefix(res.Header.Get("Location"), "/login") {
		return http.StatusSeeOther
	}
	if res.StatusCode == http.StatusSeeOther {
		return http.StatusOK // a form's answer: where to go next
	}
	return res.StatusCode
}

// signInAs signs in a user that exists already.
func (f *fixture) signInAs(t *testing.T, username string) *browser {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	b := &browser{f: f, client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
	if r := b.post(t, "/login", url.Values{"username": {username}, "password": {testPassword}}); r.status != http.StatusSeeOther {
		t.Fatalf("sign-in of %s: status %d: %s", username, r.status, r.body)
	}
	b.get(t, "/").want(t, http.StatusOK)
	if b.csrf == "" {
		t.Fatalf("%s's overview has no CSRF token (the sign-out form carries one)", username)
	}
	return b
}

// authorize makes req the browser's: its cookie, and for a form, the
// page's CSRF token as this site's pages send it.
func (b *browser) authorize(req *http.Request) {
	for _, c := range b.client.Jar.Cookies(req.URL) {
		req.AddCookie(c)
	}
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		req.Header.Set("X-CSRF-Token", b.csrf)
		req.Header.Set("Origin", b.f.srv.URL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
}

var pathParam = regexp.MustCompile(`\{(\w+)\}`)

// describedRoles is x-leasehold-role of every operation of
// web/openapi.json, by "METHOD /echo/:path"; "" for an operation
// without one (open).
func describedRoles(t *testing.T) map[string]role.Role {
	t.Helper()
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	roles := map[string]role.Role{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			var o struct {
				OperationID string    `json:"operationId"`
				Role        role.Role `json:"x-leasehold-role"`
			}
			if json.Unmarshal(op, &o) != nil || o.OperationID == "" {
				continue // parameters shared by a path's operations
			}
			roles[strings.ToUpper(method)+" "+pathParam.ReplaceAllString(path, ":$1")] = o.Role
		}
	}
	return roles
}
