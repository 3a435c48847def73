package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/role"
	"github.com/leasehold/leasehold/web"
)

// auditRow is a row of audit_log as a test reads it.
type auditRow struct {
	ID                                int64
	Actor, Role, Addr, Action, Target string
	Detail                            map[string]any
}

// auditSince reads the audit rows after id, oldest first.
func (f *fixture) auditSince(t *testing.T, id int64) []auditRow {
	t.Helper()
	rows, err := f.pool.Query(f.ctx, `SELECT id, actor, role, addr, action, target, detail FROM audit_log WHERE id > $1 ORDER BY id`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []auditRow
	for rows.Next() {
		var r auditRow
		var detail []byte
		if err := rows.Scan(&r.ID, &r.Actor, &r.Role, &r.Addr, &r.Action, &r.Target, &detail); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(detail, &r.Detail); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func (f *fixture) lastAuditID(t *testing.T) int64 {
	t.Helper()
	var id int64
	if err := f.pool.QueryRow(f.ctx, `SELECT coalesce(max(id), 0) FROM audit_log`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// Every route that changes something, by token and by session, writes
// exactly one audit row naming the caller, its role, its address, the
// action and its target; a refused change writes none. The list of
// routes is checked against the router, so that a new route that changes
// something cannot go unaudited without this test failing.
func TestEveryChangeRouteWritesOneAuditRow(t *testing.T) {
	t.Parallel()
	f := setup(t)
	dead := f.deadJob(t, "audited")
	pending := f.submit(t, `{"kind":"noop","queue":"later","run_at":"2099-01-01T00:00:00Z"}`)
	toCancel := f.submit(t, `{"kind":"noop","queue":"later","run_at":"2099-01-01T00:00:00Z"}`)
	if _, err := f.auth.AddUser(f.ctx, "otto", role.Operator, testPassword); err != nil {
		t.Fatal(err)
	}
	admin := f.signIn(t, "alice") // SetPassword makes alice an admin
	id := func(n int64) string { return itoa(n) }

	type change struct {
		method, path string
		do           func() *response
		status       int
		action       string // the row's action; "" for none
		target       string
		actor        string
	}
	api := func(method, path, body string, status int, action, target string) change {
		return change{method: method, path: path, status: status, action: action, target: target, actor: "token:admin",
			do: func() *response { return f.do(t, call{method: method, path: path, body: body}) }}
	}
	page := func(path string, form url.Values, status int, action, target string) change {
		return change{method: http.MethodPost, path: path, status: status, action: action, target: target, actor: "user:alice",
			do: func() *response { return admin.post(t, path, form) }}
	}
	newJob := admin.newJobForm(t)
	changes := []change{
		api("POST", "/api/v1/jobs", `{"kind":"noop","queue":"later","run_at":"2099-01-01T00:00:00Z"}`, 201, "job.submit", ""),
		api("POST", "/api/v1/jobs/batch", `{"jobs":[{"kind":"noop","queue":"later","run_at":"2099-01-01T00:00:00Z"},{"kind":"noop","queue":"later","run_at":"2099-01-01T00:00:00Z"}]}`, 201, "jobs.submit", ""),
		api("POST", "/api/v1/jobs/"+id(pending.ID)+"/retry", "", 409, "", ""), // pending: refused, no row
		api("POST", "/api/v1/jobs/"+id(dead.ID)+"/retry", "", 200, "job.retry", "job:"+id(dead.ID)),
		api("POST", "/api/v1/jobs/"+id(pending.ID)+"/cancel", "", 200, "job.cancel", "job:"+id(pending.ID)),
		api("POST", "/api/v1/jobs/cancel", `{"ids":[`+id(toCancel.ID)+`]}`, 200, "jobs.cancel", ""),
		api("POST", "/api/v1/jobs/retry", `{"state":"cancelled","queue":"later"}`, 200, "jobs.retry", ""),
		api("POST", "/api/v1/schedules", `{"name":"nightly","cron":"@daily","job":{"kind":"noop"}}`, 201, "schedule.create", "schedule:nightly"),
		api("PATCH", "/api/v1/schedules/nightly", `{"paused":true}`, 200, "schedule.update", "schedule:nightly"),
		api("DELETE", "/api/v1/schedules/nightly", "", 204, "schedule.delete", "schedule:nightly"),
		api("PATCH", "/api/v1/queues/later", `{"max_running":-1}`, 400, "", ""),
		api("PATCH", "/api/v1/queues/later", `{"paused":true,"max_running":3}`, 200, "queue.update", "queue:later"),
		api("PUT", "/api/v1/availability/device/pixel7", `{"window":"mon-fri 22:00-07:00 Europe/Berlin"}`, 200, "availability.set", "device:pixel7"),
		api("DELETE", "/api/v1/availability/device/pixel7", "", 204, "availability.clear", "device:pixel7"),
		api("PUT", "/api/v1/rate-limits/llm:openai", `{"budgets":["60/min"]}`, 200, "rate_limit.set", "rate_limit:llm:openai"),
		api("DELETE", "/api/v1/rate-limits/llm:openai", "", 204, "rate_limit.delete", "rate_limit:llm:openai"),
		{method: "PUT", path: "/api/v1/worker/availability", status: 204, action: "availability.set", target: "worker:worker", actor: "token:worker",
			do: func() *response {
				return f.do(t, call{method: "PUT", path: "/api/v1/worker/availability", body: `{"window":"sat-sun 00:00-24:00 UTC"}`, token: f.worker})
			}},
		page("/jobs/new", newJob, 303, "job.submit", ""),
		page("/jobs/"+id(dead.ID)+"/cancel", url.Values{}, 303, "job.cancel", "job:"+id(dead.ID)),
		page("/jobs/"+id(dead.ID)+"/retry", url.Values{}, 303, "job.retry", "job:"+id(dead.ID)),
		page("/jobs/cancel", url.Values{"ids": {id(dead.ID)}, "from": {"jobs"}}, 303, "jobs.cancel", ""),
		page("/jobs/retry", url.Values{"ids": {id(dead.ID)}, "from": {"jobs"}}, 303, "jobs.retry", ""),
		page("/workers/availability", url.Values{"scope": {"device"}, "name": {"pixel8"}, "window": {"mon-sun 00:00-24:00 UTC"}}, 303, "availability.set", "device:pixel8"),
		page("/workers/availability/delete", url.Values{"scope": {"device"}, "name": {"pixel8"}}, 303, "availability.clear", "device:pixel8"),
		page("/schedules", scheduleForm("weekly", "0 3 * * 1"), 303, "schedule.create", "schedule:weekly"),
		page("/schedules/weekly/pause", url.Values{}, 303, "schedule.update", "schedule:weekly"),
		page("/schedules/weekly/resume", url.Values{}, 303, "schedule.update", "schedule:weekly"),
		page("/queues/later/pause", url.Values{}, 303, "queue.update", "queue:later"),
		page("/queues/later/resume", url.Values{}, 303, "queue.update", "queue:later"),
		page("/queues/later/limit", url.Values{"max_running": {"5"}}, 303, "queue.update", "queue:later"),
		page("/rate-limits", url.Values{"key": {"llm:anthropic"}, "budgets": {"10/min"}}, 303, "rate_limit.set", "rate_limit:llm:anthropic"),
		page("/users", url.Values{"name": {"vera"}, "role": {"viewer"}, "password": {testPassword}}, 303, "user.add", "user:vera"),
		page("/users", url.Values{"name": {"vera"}, "role": {"viewer"}, "password": {testPassword}}, 409, "", ""), // taken
		page("/users/vera/role", url.Values{"role": {"operator"}}, 303, "user.set_role", "user:vera"),
		page("/users/vera/remove", url.Values{}, 303, "user.remove", "user:vera"),
	}

	covered := map[string]bool{}
	for _, c := range changes {
		last := f.lastAuditID(t)
		r := c.do()
		if r.status != c.status {
			t.Errorf("%s %s: status %d, want %d: %.300s", c.method, c.path, r.status, c.status, r.body)
			continue
		}
		rows := f.auditSince(t, last)
		if c.action == "" {
			if len(rows) != 0 {
				t.Errorf("%s %s was refused (%d) but wrote audit rows %+v", c.method, c.path, r.status, rows)
			}
			continue
		}
		covered[c.method+" "+routePattern(c.path)] = true
		if len(rows) != 1 {
			t.Errorf("%s %s: %d audit rows, want 1: %+v", c.method, c.path, len(rows), rows)
			continue
		}
		got := rows[0]
		if got.Action != c.action || got.Actor != c.actor || got.Addr != "127.0.0.1" || (c.target != "" && got.Target != c.target) {
			t.Errorf("%s %s: audit row %+v, want action %s, actor %s, target %q, addr 127.0.0.1", c.method, c.path, got, c.action, c.actor, c.target)
		}
		wantRole := "admin"
		if c.actor == "token:worker" {
			wantRole = "worker"
		}
		if got.Role != wantRole {
			t.Errorf("%s %s: audit row's role %q, want %q", c.method, c.path, got.Role, wantRole)
		}
		if c.action == "jobs.retry" || c.action == "jobs.cancel" {
			if n, _ := got.Detail["count"].(float64); n < 1 || got.Detail["selection"] == nil {
				t.Errorf("%s %s: a bulk action's row has no selection or count: %+v", c.method, c.path, got.Detail)
			}
		}
	}

	// Every route that changes something is in the list above, but those
	// that run jobs (the worker API's job routes: claims, heartbeats,
	// results, which the job's events record) and signing out.
	e := f.srv.Config.Handler.(*echo.Echo)
	for _, rt := range e.Routes() {
		need, _, _ := web.RouteNeed(*rt)
		if rt.Method == http.MethodGet || rt.Method == http.MethodHead || need == web.Open || rt.Path == "/logout" ||
			(strings.HasPrefix(rt.Path, "/api/v1/worker/") && rt.Path != "/api/v1/worker/availability") {
			continue
		}
		if !covered[rt.Method+" "+rt.Path] {
			t.Errorf("%s %s changes something but this test does not see it write its audit row", rt.Method, rt.Path)
		}
	}
}

// routePattern turns a path of this test back into its route's pattern.
func routePattern(path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		switch {
		case i > 0 && parts[i-1] == "jobs" && p != "" && strings.Trim(p, "0123456789") == "":
			parts[i] = ":id"
		case i > 0 && (parts[i-1] == "schedules" || parts[i-1] == "queues" || parts[i-1] == "users") && p != "":
			parts[i] = ":name"
		case i > 0 && parts[i-1] == "rate-limits" && p != "":
			parts[i] = ":key"
		case i > 1 && parts[i-2] == "availability" && p != "":
			parts[i] = ":name"
		case i > 0 && parts[i-1] == "availability" && p != "" && p != "delete" && parts[1] == "api":
			parts[i] = ":scope"
		}
	}
	return strings.Join(parts, "/")
}

// Behind a trusted proxy the audit row has the client's address from
// X-Forwarded-For, as the sign-in throttle does; from a peer that is not
// trusted the header is not believed.
func TestAuditAddressBehindAProxy(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, tc := range []struct {
		trusted, want string
	}{
		{trusted: "127.0.0.0/8", want: "203.0.113.9"},
		{trusted: "10.0.0.0/8", want: "127.0.0.1"},
	} {
		srv := behindProxy(t, f, tc.trusted)
		last := f.lastAuditID(t)
		req, _ := http.NewRequestWithContext(f.ctx, http.MethodPost, srv.URL+"/api/v1/jobs", strings.NewReader(`{"kind":"noop"}`))
		req.Header.Set("Authorization", "Bearer "+f.admin)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Forwarded-For", "203.0.113.9")
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("submit behind %s: %d", tc.trusted, res.StatusCode)
		}
		rows := f.auditSince(t, last)
		if len(rows) != 1 || rows[0].Addr != tc.want {
			t.Errorf("proxies %s trusted: audit rows %+v, want one from %s", tc.trusted, rows, tc.want)
		}
	}
}
