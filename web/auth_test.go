package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/apitoken"
)

func TestAuth(t *testing.T) {
	t.Parallel()
	f := setup(t)
	endpoints := []call{
		{method: http.MethodPost, path: "/api/v1/jobs", body: `{"kind":"noop"}`},
		{method: http.MethodPost, path: "/api/v1/jobs/batch", body: `{"jobs":[{"kind":"noop"}]}`},
		{method: http.MethodGet, path: "/api/v1/jobs"},
		{method: http.MethodGet, path: "/api/v1/jobs/1"},
		{method: http.MethodPost, path: "/api/v1/jobs/1/retry"},
		{method: http.MethodPost, path: "/api/v1/jobs/1/cancel"},
		{method: http.MethodPost, path: "/api/v1/jobs/retry", body: `{"ids":[1]}`},
		{method: http.MethodPost, path: "/api/v1/jobs/cancel", body: `{"ids":[1]}`},
		{method: http.MethodGet, path: "/api/v1/stats"},
	}
	for _, tc := range []struct {
		name   string
		token  string
		header string // a raw Authorization header, instead of token
		status int
	}{
		{name: "Missing", token: "-", status: http.StatusUnauthorized},
		{name: "Unknown", token: "lh_not-a-real-token", status: http.StatusUnauthorized},
		{name: "BasicScheme", header: "Basic YWRtaW46cGFzc3dvcmQ=", status: http.StatusUnauthorized},
		{name: "EmptyBearer", header: "Bearer ", status: http.StatusUnauthorized},
		{name: "WorkerToken", token: f.worker, status: http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, ep := range endpoints {
				ep.token = tc.token
				if tc.header != "" {
					ep.header = map[string]string{"Authorization": tc.header}
				}
				res := f.do(t, ep)
				if res.status != tc.status {
					t.Errorf("%s %s: status %d, want %d", ep.method, ep.path, res.status, tc.status)
					continue
				}
				if e := res.json(t); e["error"] == "" {
					t.Errorf("%s %s: body %s", ep.method, ep.path, res.body)
				}
				if tc.status == http.StatusUnauthorized && res.header.Get("WWW-Authenticate") != "Bearer" {
					t.Errorf("%s %s: WWW-Authenticate = %q", ep.method, ep.path, res.header.Get("WWW-Authenticate"))
				}
			}
		})
	}
	if n := f.totalJobs(t); n != 0 {
		t.Errorf("%d jobs were made without a valid admin token", n)
	}

	// Lower-case scheme is still Bearer (RFC 9110: case-insensitive).
	f.do(t, call{method: http.MethodGet, path: "/api/v1/stats", header: map[string]string{"Authorization": "bearer " + f.admin}}).
		want(t, http.StatusOK)

	// Open endpoints need no token.
	for _, path := range []string{"/health/live", "/health/ready", "/metrics"} {
		f.do(t, call{method: http.MethodGet, path: path, token: "-"}).want(t, http.StatusOK)
	}

	if strings.Contains(f.logs.String(), f.admin) || strings.Contains(f.logs.String(), f.worker) {
		t.Error("a token secret reached the log")
	}
}

func TestAuthRevoked(t *testing.T) {
	t.Parallel()
	f := setup(t)
	secret, _, err := f.tokens.Create(f.ctx, "ci", apitoken.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	stats := call{method: http.MethodGet, path: "/api/v1/stats", token: secret}
	f.do(t, stats).want(t, http.StatusOK)
	if _, _, err := f.tokens.Revoke(f.ctx, "ci"); err != nil {
		t.Fatal(err)
	}
	res := f.do(t, stats).want(t, http.StatusUnauthorized)
	if e := res.json(t); e["error"] == "" || res.header.Get("WWW-Authenticate") != "Bearer" {
		t.Errorf("revoked: %v %s", res.header, res.body)
	}
	// Other tokens are unaffected.
	f.get(t, "/api/v1/stats").want(t, http.StatusOK)
}

func TestActorIsTokenName(t *testing.T) {
	t.Parallel()
	f := setup(t)
	secret, _, err := f.tokens.Create(f.ctx, "ops@example.com", apitoken.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	j := f.submit(t, `{"kind":"noop"}`)
	f.do(t, call{method: http.MethodPost, path: "/api/v1/jobs/cancel", body: `{"kind":"noop"}`, token: secret}).
		want(t, http.StatusOK)
	detail := f.get(t, "/api/v1/jobs/"+itoa(j.ID)).want(t, http.StatusOK)
	if !strings.Contains(string(detail.body), `"by":"token:ops@example.com"`) {
		t.Errorf("cancel event does not name the token: %s", detail.body)
	}
}
