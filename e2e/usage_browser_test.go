package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/leasehold/leasehold/client"
)

// In real Chromium: a sim job of a direct worker reports usage each step
// until its max_cost is spent; its page shows the usage per attempt, the
// total and the budget, and /usage (reached by the nav) sums it per app
// and, after choosing it in the form, per kind.
func TestBrowserUsage(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t)
	raw, _ := json.Marshal(map[string]any{"app": "com.example.usage", "sim": map[string]any{
		"steps": 6, "step_ms": 10, "usage": map[string]any{"model": "gpt-x", "cost_micros_per_step": 1500, "input_tokens_per_step": 1000},
	}})
	maxCost := int64(3000)
	job, err := b.client().Submit(b.env.ctx, client.NewJob{Kind: "app_investigation", Payload: raw, MaxCost: &maxCost})
	if err != nil {
		t.Fatal(err)
	}
	b.eventually("the job dies of its budget", 30*time.Second, func() bool {
		return b.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'dead' AND last_error = 'budget spent'", job.ID) == 1
	})
	if n := b.count("SELECT count(*) FROM artifacts WHERE job_id = $1 AND kind = 'screenshot'", job.ID); n != 2 {
		t.Fatalf("%d screenshots kept, want the 2 of the steps that ran", n)
	}
	b.signIn()
	b.do(chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", b.apiURL, job.ID)), chromedp.WaitVisible(chromedp.CSS("[data-testid=job-usage]")))
	b.waitJS("the attempt's usage", `document.querySelector("[data-testid=usage-line][data-attempt='1'][data-model='gpt-x'] [data-testid=usage-cost]")?.textContent.trim() === "0.003000 USD"`)
	b.waitJS("the total", `document.querySelector("[data-testid=usage-total] [data-testid=usage-cost]")?.textContent.trim() === "0.003000 USD"`)
	b.waitJS("the budget", `document.querySelector("[data-testid=job-budget]")?.textContent.includes("3000 of 3000")`)

	b.do(
		chromedp.Click(chromedp.CSS(`nav a[href="/usage"]`)),
		chromedp.WaitVisible(chromedp.CSS("[data-testid=usage-filters]")),
		chromedp.SetValue(chromedp.CSS("#usage-group_by"), "app"),
		chromedp.Click(chromedp.CSS("[data-testid=usage-submit]")),
	)
	b.waitJS("usage by app", `document.querySelector("[data-testid=usage-row][data-key='com.example.usage'] [data-testid=usage-cost]")?.textContent.trim() === "0.003000 USD"`)
	b.do(
		chromedp.SetValue(chromedp.CSS("#usage-group_by"), "kind"),
		chromedp.Click(chromedp.CSS("[data-testid=usage-submit]")),
	)
	b.waitJS("usage by kind", `!!document.querySelector("[data-testid=usage-row][data-key='app_investigation']")`)
}
