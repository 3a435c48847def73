package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
)

type rateLimitJSON struct {
	Key     string `json:"key"`
	Budgets []struct {
		Budget        string `json:"budget"`
		Limit         int    `json:"limit"`
		WindowSeconds int    `json:"window_seconds"`
		Used          int    `json:"used"`
		WindowEnd     string `json:"window_end"`
	} `json:"budgets"`
}

func TestRateLimitsAPI(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var rl rateLimitJSON
	f.do(t, call{method: http.MethodPut, path: "/api/v1/rate-limits/llm%3Aopenai", body: `{"budgets":["10000/day","2/min"]}`}).
		want(t, http.StatusOK).decode(t, &rl)
	if rl.Key != "llm:openai" || len(rl.Budgets) != 2 || rl.Budgets[0].Budget != "2/min" || rl.Budgets[0].WindowSeconds != 60 ||
		rl.Budgets[1].Limit != 10000 || rl.Budgets[0].Used != 0 {
		t.Fatalf("PUT answered %+v", rl)
	}
	// Jobs name the key; a claim spends it; the third job waits for the
	// minute's end and says so.
	var ids []int64
	for range 3 {
		ids = append(ids, f.submit(t, `{"kind":"noop","queue":"llm","rate_limits":["llm:openai","no-budget"]}`).ID)
	}
	var job struct {
		RateLimits []string `json:"rate_limits"`
	}
	f.get(t, fmt.Sprintf("/api/v1/jobs/%d", ids[0])).want(t, http.StatusOK).decode(t, &job)
	if strings.Join(job.RateLimits, ",") != "llm:openai,no-budget" {
		t.Fatalf("job rate_limits = %v", job.RateLimits)
	}
	if err := f.queue.WorkerSeen(f.ctx, queue.Presence{ID: "w", Queues: []string{"llm"}}); err != nil {
		t.Fatal(err)
	}
	// Budgets count in fixed windows of the database clock: the claims
	// and the list below must fall in one minute.
	var toMinute float64
	if err := f.pool.QueryRow(f.ctx, "SELECT 60 - extract(second FROM clock_timestamp())").Scan(&toMinute); err != nil {
		t.Fatal(err)
	}
	if toMinute < 10 {
		time.Sleep(time.Duration(toMinute*float64(time.Second)) + 100*time.Millisecond)
	}
	claimed := 0
	for range 3 {
		jobs, err := f.queue.Claim(f.ctx, queue.ClaimParams{WorkerID: "w", Queues: []string{"llm"}, Limit: 10, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		claimed += len(jobs)
	}
	var list struct {
		RateLimits []rateLimitJSON `json:"rate_limits"`
	}
	f.get(t, "/api/v1/rate-limits").want(t, http.StatusOK).decode(t, &list)
	if claimed != 2 || len(list.RateLimits) != 1 || list.RateLimits[0].Budgets[0].Used != 2 {
		t.Fatalf("claimed %d under 2/min; list %+v", claimed, list)
	}
	var detail struct {
		State   string `json:"state"`
		Waiting *struct {
			Kind         string `json:"kind"`
			RateLimitKey string `json:"rate_limit_key"`
			Until        string `json:"until"`
		} `json:"waiting"`
	}
	for _, id := range ids {
		f.get(t, fmt.Sprintf("/api/v1/jobs/%d", id)).want(t, http.StatusOK).decode(t, &detail)
		if detail.State == "pending" {
			break
		}
	}
	if detail.Waiting == nil || detail.Waiting.Kind != "rate_limited" || detail.Waiting.RateLimitKey != "llm:openai" ||
		detail.Waiting.Until != list.RateLimits[0].Budgets[0].WindowEnd {
		t.Fatalf("waiting = %+v, want rate_limited on llm:openai until %s", detail.Waiting, list.RateLimits[0].Budgets[0].WindowEnd)
	}

	// A key with a slash and a percent sign travels escaped.
	f.do(t, call{method: http.MethodPut, path: "/api/v1/rate-limits/a%2Fb%25c", body: `{"budgets":["1/s"]}`}).
		want(t, http.StatusOK).decode(t, &rl)
	if rl.Key != "a/b%c" {
		t.Fatalf("escaped key stored as %q, want a/b%%c", rl.Key)
	}
	f.do(t, call{method: http.MethodDelete, path: "/api/v1/rate-limits/a%2Fb%25c"}).want(t, http.StatusNoContent)
	f.do(t, call{method: http.MethodDelete, path: "/api/v1/rate-limits/llm:openai"}).want(t, http.StatusNoContent)
	f.do(t, call{method: http.MethodDelete, path: "/api/v1/rate-limits/llm:openai"}).want(t, http.StatusNotFound)
	f.get(t, "/api/v1/rate-limits").want(t, http.StatusOK).decode(t, &list)
	if len(list.RateLimits) != 0 {
		t.Fatalf("after delete: %+v", list)
	}
}

// Malformed, oversized and hostile input is a 4xx naming the field, never
// a 500; nothing is stored.
func TestRateLimitsAPIRefusesBadInput(t *testing.T) {
	t.Parallel()
	f := setup(t)
	long := strings.Repeat("k", 201)
	for name, tc := range map[string]struct {
		path, body string
		status     int
		field      string
	}{
		"NotJSON":             {"/api/v1/rate-limits/k", `{"budgets":`, 400, ""},
		"NoBudgets":           {"/api/v1/rate-limits/k", `{}`, 400, "budgets"},
		"NotAList":            {"/api/v1/rate-limits/k", `{"budgets":"60/min"}`, 400, "budgets"},
		"Numbers":             {"/api/v1/rate-limits/k", `{"budgets":[60]}`, 400, "budgets"},
		"Unknown":             {"/api/v1/rate-limits/k", `{"budgets":["60/min"],"x":1}`, 400, "x"},
		"BadUnit":             {"/api/v1/rate-limits/k", `{"budgets":["60/week"]}`, 400, "budgets[0]"},
		"Zero":                {"/api/v1/rate-limits/k", `{"budgets":["0/min"]}`, 400, "budgets[0]"},
		"Huge":                {"/api/v1/rate-limits/k", `{"budgets":["99999999999999999999/min"]}`, 400, "budgets[0]"},
		"Negative":            {"/api/v1/rate-limits/k", `{"budgets":["-5/s"]}`, 400, "budgets[0]"},
		"SameWindow":          {"/api/v1/rate-limits/k", `{"budgets":["1/min","2/m"]}`, 400, "budgets[1]"},
		"TooMany":             {"/api/v1/rate-limits/k", `{"budgets":["1/s","1/min","1/h","1/day","2/s"]}`, 400, "budgets"},
		"KeyTooLong":          {"/api/v1/rate-limits/" + long, `{"budgets":["1/s"]}`, 400, "key"},
		"KeyControl":          {"/api/v1/rate-limits/a%0Ab", `{"budgets":["1/s"]}`, 400, "key"},
		"KeyNotUTF8":          {"/api/v1/rate-limits/a%ffb", `{"budgets":["1/s"]}`, 400, "key"},
		"BodyTooLarge":        {"/api/v1/rate-limits/k", `{"budgets":["` + strings.Repeat("1", 5000) + `/s"]}`, 413, ""},
		"JobTooManyKeys":      {"/api/v1/jobs", `{"kind":"noop","rate_limits":["1","2","3","4","5","6","7","8","9"]}`, 400, "rate_limits"},
		"JobEmptyKey":         {"/api/v1/jobs", `{"kind":"noop","rate_limits":[""]}`, 400, "rate_limits[0]"},
		"JobDuplicate":        {"/api/v1/jobs", `{"kind":"noop","rate_limits":["a","a"]}`, 400, "rate_limits[1]"},
		"JobKeyTooLong":       {"/api/v1/jobs", `{"kind":"noop","rate_limits":["` + long + `"]}`, 400, "rate_limits[0]"},
		"JobNotStrings":       {"/api/v1/jobs", `{"kind":"noop","rate_limits":[1]}`, 400, "rate_limits"},
		"JobWithBadConcurKey": {"/api/v1/jobs", `{"kind":"noop","rate_limits":["a"],"concurrency_key":"c\u0000"}`, 400, "concurrency_key"},
		"BatchBadKey":         {"/api/v1/jobs/batch", `{"jobs":[{"kind":"noop"},{"kind":"noop","rate_limits":["a\u0000"]}]}`, 400, "jobs[1].rate_limits[0]"},
	} {
		t.Run(name, func(t *testing.T) {
			method := http.MethodPut
			if !strings.Contains(tc.path, "rate-limits") {
				method = http.MethodPost
			}
			r := f.do(t, call{method: method, path: tc.path, body: tc.body}).want(t, tc.status)
			if tc.field != "" {
				if got := r.json(t)["field"]; got != tc.field {
					t.Errorf("field = %v, want %s (%s)", got, tc.field, r.body)
				}
			}
		})
	}
	var list struct {
		RateLimits []rateLimitJSON `json:"rate_limits"`
	}
	f.get(t, "/api/v1/rate-limits").want(t, http.StatusOK).decode(t, &list)
	if len(list.RateLimits) != 0 {
		t.Fatalf("refused input stored: %+v", list)
	}
	if s := f.stats(t); s["pending"] != 0 {
		t.Fatalf("refused jobs inserted: %v", s)
	}
}

// Through the API, rate limits combine with queue caps and concurrency
// keys (queue.TestRateLimitsCombineWithCapsAndKeys has the claims): a
// rate-limited job is taken into a capped queue, alone or in a batch, with
// a concurrency key, and a queue where such jobs wait can be capped.
func TestRateLimitsWithCapsAndKeys(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.do(t, call{method: http.MethodPatch, path: "/api/v1/queues/capped", body: `{"max_running":2}`}).want(t, http.StatusOK)
	f.submit(t, `{"kind":"noop","queue":"capped","rate_limits":["llm:a"]}`)
	f.do(t, call{method: http.MethodPost, path: "/api/v1/jobs/batch",
		body: `{"jobs":[{"kind":"noop","queue":"capped"},{"kind":"noop","queue":"capped","rate_limits":["llm:a"]}]}`}).want(t, http.StatusCreated)
	var job struct {
		RateLimits     []string `json:"rate_limits"`
		ConcurrencyKey string   `json:"concurrency_key"`
	}
	f.do(t, call{method: http.MethodPost, path: "/api/v1/jobs",
		body: `{"kind":"noop","queue":"rated","rate_limits":["llm:a"],"concurrency_key":"pixel-1"}`}).want(t, http.StatusCreated).decode(t, &job)
	if len(job.RateLimits) != 1 || job.ConcurrencyKey != "pixel-1" {
		t.Fatalf("job with rate limits and a key reads %+v", job)
	}
	f.do(t, call{method: http.MethodPatch, path: "/api/v1/queues/rated", body: `{"max_running":2}`}).want(t, http.StatusOK)
	if s := f.stats(t); s["pending"] != 4 {
		t.Fatalf("pending = %v, want the 4 jobs submitted", s["pending"])
	}
}
