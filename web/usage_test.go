package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/templates/htmltest"
)

// usageJob submits body, claims it through the worker API and returns
// its id and the path of its writes with the lease token.
func (f *fixture) usageJob(t *testing.T, body string) (int64, string, int64) {
	t.Helper()
	job := f.submit(t, body)
	held := f.claimAs(t, f.worker, `{"queues":["default"],"lease_ms":60000}`)
	if len(held) != 1 || held[0].ID != job.ID {
		t.Fatalf("claimed %+v", held)
	}
	return job.ID, fmt.Sprintf("/api/v1/worker/jobs/%d/", job.ID), held[0].LeaseToken
}

// The worker API's usage action adds up on the job (its JSON has it per
// attempt and what is spent), GET /api/v1/usage sums it, /metrics counts
// it; a stale token is 409 lease_lost and adds nothing.
func TestUsageReportedThroughWorkerAPI(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id, base, tok := f.usageJob(t, `{"kind":"app_investigation","payload":{"app":"com.example.notes"},"max_cost":1000000}`)
	for range 2 {
		f.workerPost(t, base+"usage", fmt.Sprintf(`{"lease_token":%d,"model":"gpt-x","input_tokens":1200,"output_tokens":300,"cost_micros":4500,"counters":{"screens":3}}`, tok)).
			want(t, http.StatusNoContent)
	}
	stale := f.workerPost(t, base+"usage", fmt.Sprintf(`{"lease_token":%d,"model":"gpt-x","cost_micros":1}`, tok+1)).want(t, http.StatusConflict).json(t)
	if stale["code"] != "lease_lost" {
		t.Fatalf("stale usage answer %v", stale)
	}
	detail := f.get(t, fmt.Sprintf("/api/v1/jobs/%d", id)).want(t, http.StatusOK).json(t)
	usage, _ := detail["usage"].([]any)
	if len(usage) != 1 {
		t.Fatalf("usage %v", detail["usage"])
	}
	u := usage[0].(map[string]any)
	if u["model"] != "gpt-x" || u["currency"] != "USD" || u["input_tokens"] != 2400.0 || u["cost_micros"] != 9000.0 ||
		u["attempt"] != 1.0 || u["counters"].(map[string]any)["screens"] != 6.0 {
		t.Fatalf("usage entry %v", u)
	}
	if detail["cost_spent_micros"] != 9000.0 || detail["max_cost"] != 1e6 || detail["max_steps"] != nil || detail["steps_spent"] != 0.0 {
		t.Fatalf("job budget fields: max_cost %v max_steps %v spent %v steps %v", detail["max_cost"], detail["max_steps"], detail["cost_spent_micros"], detail["steps_spent"])
	}

	sum := f.get(t, "/api/v1/usage?group_by=app").want(t, http.StatusOK).json(t)
	rows, _ := sum["rows"].([]any)
	if len(rows) != 1 || rows[0].(map[string]any)["key"] != "com.example.notes" || rows[0].(map[string]any)["cost_micros"] != 9000.0 {
		t.Fatalf("usage by app %v", sum)
	}
	for _, g := range []string{"kind", "day"} {
		sum := f.get(t, "/api/v1/usage?group_by="+g).want(t, http.StatusOK).json(t)
		if rows, _ := sum["rows"].([]any); len(rows) != 1 || rows[0].(map[string]any)["jobs"] != 1.0 {
			t.Fatalf("usage by %s %v", g, sum)
		}
	}
	metrics := string(f.do(t, call{method: http.MethodGet, path: "/metrics", token: "-"}).want(t, http.StatusOK).body)
	for _, want := range []string{
		`leasehold_usage_cost_micros_total{currency="USD",model="gpt-x"} 9000`,
		`leasehold_usage_input_tokens_total{currency="USD",model="gpt-x"} 2400`,
		`leasehold_usage_output_tokens_total{currency="USD",model="gpt-x"} 600`,
	} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("/metrics lacks %s", want)
		}
	}
}

// The report that spends max_cost is recorded and answered 409
// budget_spent; the job is dead with reason "budget spent", and the
// lease is gone.
func TestUsageBudgetSpentThroughWorkerAPI(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id, base, tok := f.usageJob(t, `{"kind":"test","max_cost":5000,"max_steps":100}`)
	r := f.workerPost(t, base+"usage", fmt.Sprintf(`{"lease_token":%d,"model":"gpt-x","cost_micros":5000}`, tok)).want(t, http.StatusConflict).json(t)
	if r["code"] != "budget_spent" || r["error"] != "budget spent" {
		t.Fatalf("answer %v", r)
	}
	f.workerPost(t, base+"heartbeat", fmt.Sprintf(`{"lease_token":%d}`, tok)).want(t, http.StatusConflict)
	job := f.get(t, fmt.Sprintf("/api/v1/jobs/%d", id)).want(t, http.StatusOK).json(t)
	if job["state"] != "dead" || job["last_error"] != "budget spent" || job["cost_spent_micros"] != 5000.0 {
		t.Fatalf("job %v %v %v", job["state"], job["last_error"], job["cost_spent_micros"])
	}

	// Steps: the progress that names the last step of the budget.
	id, base, tok = f.usageJob(t, `{"kind":"test","max_steps":2}`)
	f.workerPost(t, base+"progress", fmt.Sprintf(`{"lease_token":%d,"progress":0.5,"message":"one","step":1}`, tok)).want(t, http.StatusNoContent)
	r = f.workerPost(t, base+"progress", fmt.Sprintf(`{"lease_token":%d,"progress":1,"message":"two","step":2}`, tok)).want(t, http.StatusConflict).json(t)
	if r["code"] != "budget_spent" {
		t.Fatalf("answer %v", r)
	}
	if job := f.get(t, fmt.Sprintf("/api/v1/jobs/%d", id)).json(t); job["state"] != "dead" || job["steps_spent"] != 2.0 {
		t.Fatalf("job %v, %v steps", job["state"], job["steps_spent"])
	}
}

// Bad reports, budgets and summary queries are 400 naming the field,
// an oversized body 413, never a 500.
func TestUsageHostileInput(t *testing.T) {
	t.Parallel()
	f := setup(t)
	_, base, tok := f.usageJob(t, `{"kind":"test"}`)
	for name, body := range map[string]string{
		"NegativeTokens": fmt.Sprintf(`{"lease_token":%d,"input_tokens":-1}`, tok),
		"FloatCost":      fmt.Sprintf(`{"lease_token":%d,"cost_micros":1.5}`, tok),
		"StringCost":     fmt.Sprintf(`{"lease_token":%d,"cost_micros":"9"}`, tok),
		"HugeCost":       fmt.Sprintf(`{"lease_token":%d,"cost_micros":99999999999999999999}`, tok),
		"BadModel":       fmt.Sprintf(`{"lease_token":%d,"model":"<script>"}`, tok),
		"BadCurrency":    fmt.Sprintf(`{"lease_token":%d,"currency":"dollars"}`, tok),
		"BadCounter":     fmt.Sprintf(`{"lease_token":%d,"counters":{"A B":1}}`, tok),
		"CounterArray":   fmt.Sprintf(`{"lease_token":%d,"counters":[1]}`, tok),
		"NoToken":        `{"model":"m"}`,
		"NotAnObject":    `[1,2]`,
		"Unknown":        fmt.Sprintf(`{"lease_token":%d,"modle":"m"}`, tok),
	} {
		t.Run(name, func(t *testing.T) {
			r := f.workerPost(t, base+"usage", body).want(t, http.StatusBadRequest).json(t)
			if r["error"] == "" {
				t.Fatalf("answer %v", r)
			}
		})
	}
	big := fmt.Sprintf(`{"lease_token":%d,"model":"%s"}`, tok, strings.Repeat("m", 2<<20))
	f.workerPost(t, base+"usage", big).want(t, http.StatusRequestEntityTooLarge)

	for body, field := range map[string]string{
		`{"kind":"test","max_cost":0}`:                   "max_cost",
		`{"kind":"test","max_cost":-5}`:                  "max_cost",
		`{"kind":"test","max_cost":1000000000000000001}`: "max_cost",
		`{"kind":"test","max_steps":0}`:                  "max_steps",
		`{"kind":"test","max_steps":1000001}`:            "max_steps",
		`{"kind":"test","max_steps":"3"}`:                "max_steps",
		`{"jobs":[{"kind":"test","max_cost":0}]}`:        "jobs[0].max_cost",
	} {
		path := "/api/v1/jobs"
		if strings.HasPrefix(body, `{"jobs"`) {
			path += "/batch"
		}
		r := f.post(t, path, body).want(t, http.StatusBadRequest).json(t)
		if r["field"] != field {
			t.Fatalf("%s: answer %v, want field %s", body, r, field)
		}
	}
	for _, q := range []string{"group_by=model", "from=yesterday", "from=2026-01-01&to=2025-01-01", "from=2020-01-01&to=2026-01-01",
		"to=" + strings.Repeat("9", 100), "group_by=%00"} {
		r := f.get(t, "/api/v1/usage?"+q).want(t, http.StatusBadRequest).json(t)
		if r["field"] == "" {
			t.Fatalf("%s: answer %v", q, r)
		}
	}
}

// The job page shows usage per attempt and in total, and the budget;
// /usage sums it, and refuses a bad range with 400 keeping the form;
// the nav links it; the overview shows the all-time total.
func TestUsagePages(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id, base, tok := f.usageJob(t, `{"kind":"app_investigation","payload":{"app":"com.example.notes"},"max_cost":90000}`)
	f.workerPost(t, base+"usage", fmt.Sprintf(`{"lease_token":%d,"model":"gpt-x","input_tokens":1200,"output_tokens":300,"cost_micros":4500,"counters":{"screens":3}}`, tok)).want(t, http.StatusNoContent)
	b := f.signIn(t, "alice")
	d := htmltest.Parse(t, string(b.get(t, fmt.Sprintf("/jobs/%d", id)).want(t, http.StatusOK).body))
	line := d.One(t, "usage-line")
	if htmltest.Attr(line, "data-model") != "gpt-x" || !strings.Contains(htmltest.Text(line), "0.004500 USD") || !strings.Contains(htmltest.Text(line), "screens 3") {
		t.Fatalf("usage line %q", htmltest.Text(line))
	}
	if total := htmltest.Text(d.One(t, "usage-total")); !strings.Contains(total, "0.004500 USD") || !strings.Contains(total, "1,200") {
		t.Fatalf("usage total %q", total)
	}
	if budget := htmltest.Text(d.One(t, "job-budget")); !strings.Contains(budget, "4500 of 90000") {
		t.Fatalf("budget %q", budget)
	}

	body := string(b.get(t, "/usage?group_by=app").want(t, http.StatusOK).body)
	d = htmltest.Parse(t, body)
	row := d.One(t, "usage-row")
	if htmltest.Attr(row, "data-key") != "com.example.notes" || !strings.Contains(htmltest.Text(row), "0.004500 USD") {
		t.Fatalf("usage row %q", htmltest.Text(row))
	}
	if !strings.Contains(body, `href="/usage"`) {
		t.Fatal("the nav does not link /usage")
	}
	d = htmltest.Parse(t, string(b.get(t, "/usage?from=2026-02-30").want(t, http.StatusBadRequest).body))
	if !strings.Contains(htmltest.Text(d.One(t, "usage-error")), "from") {
		t.Fatal("the refused range does not name from")
	}
	in := d.One(t, "usage-filters")
	if !strings.Contains(htmltest.Text(in), "") || len(d.All("usage-table")) != 0 {
		t.Fatal("a refused range still showed a table")
	}
	d = htmltest.Parse(t, string(b.get(t, "/").want(t, http.StatusOK).body))
	if got := htmltest.Text(d.One(t, "overview-usage-total")); !strings.Contains(got, "0.004500 USD") {
		t.Fatalf("overview usage %q", got)
	}
}

// The new-job form takes a budget; a wrong one is 422 beside its field.
func TestNewJobFormBudget(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	form := b.newJobForm(t)
	form.Set("max_cost", "5000")
	form.Set("max_steps", "7")
	id := submittedJob(t, b.post(t, "/jobs/new", form))
	job := f.get(t, fmt.Sprintf("/api/v1/jobs/%d", id)).want(t, http.StatusOK).json(t)
	if job["max_cost"] != 5000.0 || job["max_steps"] != 7.0 {
		t.Fatalf("budget %v %v", job["max_cost"], job["max_steps"])
	}
	form = b.newJobForm(t)
	form.Set("max_cost", "0")
	form.Set("max_steps", "abc")
	d := htmltest.Parse(t, string(b.post(t, "/jobs/new", form).want(t, http.StatusUnprocessableEntity).body))
	for _, name := range []string{"max_cost", "max_steps"} {
		if in := htmltest.ByID(d.Root, name); in == nil || htmltest.Attr(in, "aria-invalid") != "true" || htmltest.Attr(in, "value") == "" {
			t.Fatalf("%s not marked wrong with what was typed", name)
		}
	}
}
