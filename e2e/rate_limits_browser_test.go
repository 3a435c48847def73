package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/leasehold/leasehold/client"
)

// In real Chromium: a budget set on /queues lets one job of the key run
// with the sim worker, and the job page of the next says it waits for the
// budget, naming the key and when it returns.
func TestBrowserRateLimitHoldsJobsAndSaysUntilWhen(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t)
	b.signIn()
	form := "[data-testid=rate-limit-new]"
	b.do(
		chromedp.Click(chromedp.CSS(`nav a[href="/queues"]`)),
		chromedp.WaitVisible(chromedp.CSS(form+" [data-testid=rate-limit-key]")),
		chromedp.SendKeys(chromedp.CSS(form+" [data-testid=rate-limit-key]"), "llm:e2e"),
		chromedp.SendKeys(chromedp.CSS(form+" [data-testid=rate-limit-budgets]"), "1/h, 100/day"),
		chromedp.Click(chromedp.CSS(form+" [data-testid=rate-limit-button]")),
	)
	b.waitJS("the key listed with its budgets", `document.querySelector('[data-testid="rate-limit-llm:e2e"] [data-testid=rate-limit-budgets]')?.value === "1/h, 100/day"`)
	if n := b.count("SELECT count(*) FROM rate_limit_budgets WHERE key = 'llm:e2e' AND updated_by = 'user:admin'"); n != 2 {
		t.Fatalf("budgets stored: %d rows, want 2", n)
	}

	var ids []int64
	for i := range 2 {
		job, err := b.client().Submit(b.ctx, client.NewJob{
			Kind: "app_investigation", RateLimits: []string{"llm:e2e"},
			Payload: []byte(fmt.Sprintf(`{"app":"com.example.rated%d","sim":{"steps":1,"step_ms":10}}`, i)),
		})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, job.ID)
	}
	b.eventually("one of the key's jobs succeeds", 30*time.Second, func() bool {
		return b.count("SELECT count(*) FROM jobs WHERE id = ANY($1) AND state = 'succeeded'", ids) == 1
	})
	held := ids[1]
	if b.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'succeeded'", ids[1]) == 1 {
		held = ids[0]
	}
	time.Sleep(1500 * time.Millisecond) // the worker is idle and listening: it would have taken the job by now
	if n := b.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'pending' AND attempt = 0", held); n != 1 {
		t.Fatal("the second job of a 1/h key was claimed")
	}
	b.do(chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", b.apiURL, held)))
	b.waitJS("the job page says it waits for the budget",
		`(() => { const w = document.querySelector("[data-testid=job-waiting]");
		  return w && w.dataset.kind === "rate_limited" && w.textContent.includes("Rate limit llm:e2e") && w.textContent.includes("budget returns at") })()`)
}
