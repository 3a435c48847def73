package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/templates/htmltest"
)

func TestQueuesPageRateLimitForm(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	d := htmltest.Parse(t, string(b.get(t, "/queues").want(t, http.StatusOK).body))
	if len(d.All("rate-limit-new")) != 1 {
		t.Fatal("no form to add a rate limit")
	}
	b.post(t, "/rate-limits", url.Values{"key": {"llm:openai"}, "budgets": {" 60/min , 10000/day "}}).want(t, http.StatusSeeOther)
	var list struct {
		RateLimits []rateLimitJSON `json:"rate_limits"`
	}
	f.get(t, "/api/v1/rate-limits").want(t, http.StatusOK).decode(t, &list)
	if len(list.RateLimits) != 1 || len(list.RateLimits[0].Budgets) != 2 || list.RateLimits[0].Budgets[0].Budget != "60/min" {
		t.Fatalf("after the form: %+v", list)
	}
	d = htmltest.Parse(t, string(b.get(t, "/queues").want(t, http.StatusOK).body))
	row := d.One(t, "rate-limit-llm:openai")
	in := htmltest.ByTestID(row, "rate-limit-budgets")[0]
	if got := htmltest.Attr(in, "value"); got != "60/min, 10000/day" {
		t.Fatalf("budgets shown %q", got)
	}
	if spent := htmltest.Text(htmltest.ByTestID(row, "rate-limit-spent")[0]); !strings.Contains(spent, "0/60 this minute") {
		t.Fatalf("spent shown %q", spent)
	}

	// A refused budget keeps what was typed beside its error; nothing changes.
	body := string(b.post(t, "/rate-limits", url.Values{"key": {"llm:openai"}, "budgets": {"60/week"}}).want(t, http.StatusUnprocessableEntity).body)
	d = htmltest.Parse(t, body)
	in = htmltest.ByTestID(d.One(t, "rate-limit-llm:openai"), "rate-limit-budgets")[0]
	if htmltest.Attr(in, "aria-invalid") != "true" || htmltest.Attr(in, "value") != "60/week" || len(d.All("rate-limit-error")) != 1 {
		t.Fatalf("refused budgets not shown beside the field: %.2000s", body)
	}
	for _, bad := range []url.Values{
		{"key": {""}, "budgets": {"1/s"}},
		{"key": {strings.Repeat("k", 201)}, "budgets": {"1/s"}},
		{"key": {"a\x00b"}, "budgets": {"1/s"}},
		{"key": {"k"}, "budgets": {"0/s"}},
		{"key": {"k"}, "budgets": {"1/s, 2/s"}},
		{"key": {"k"}, "budgets": {strings.Repeat("9", 3000) + "/s"}},
	} {
		b.post(t, "/rate-limits", bad).want(t, http.StatusUnprocessableEntity)
	}
	f.get(t, "/api/v1/rate-limits").want(t, http.StatusOK).decode(t, &list)
	if len(list.RateLimits) != 1 || list.RateLimits[0].Budgets[0].Limit != 60 {
		t.Fatalf("a refused form changed budgets: %+v", list)
	}
	// Empty budgets remove the key's.
	b.post(t, "/rate-limits", url.Values{"key": {"llm:openai"}, "budgets": {""}}).want(t, http.StatusSeeOther)
	f.get(t, "/api/v1/rate-limits").want(t, http.StatusOK).decode(t, &list)
	if len(list.RateLimits) != 0 {
		t.Fatalf("after emptying: %+v", list)
	}
}
