package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/leasehold/leasehold/client"
)

// In real Chromium: a sim job that saved a checkpoint after each of its
// 3 steps and then died offers two retries on its page. "Retry (resume
// from step 4)" makes attempt 2 resume after step 3 (it runs no step
// again, and its attempt says "resumed after step 3"); on a second such
// job, "Retry from the start" clears the checkpoint and attempt 2 runs
// all 3 steps again, with no resumed badge.
func TestBrowserCheckpointRetryChoices(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t)
	submit := func(app string) int64 {
		raw, _ := json.Marshal(map[string]any{"app": app, "sim": map[string]any{
			"steps": 3, "step_ms": 10, "checkpoint": true, "fail_attempts": 1, "permanent": true,
		}})
		job, err := b.client().Submit(b.env.ctx, client.NewJob{Kind: "app_investigation", Payload: raw})
		if err != nil {
			t.Fatal(err)
		}
		b.eventually(fmt.Sprintf("job %d dead with its checkpoint at step 3", job.ID), 30*time.Second, func() bool {
			return b.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'dead' AND checkpoint_step = 3", job.ID) == 1
		})
		return job.ID
	}
	resume, startOver := submit("com.example.resume"), submit("com.example.startover")
	b.signIn()

	b.do(chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", b.apiURL, resume)), chromedp.WaitVisible(chromedp.CSS("[data-testid=retry-start-over-button]")))
	b.waitJS("the resume button names the next step", `document.querySelector("[data-testid=retry-button]")?.textContent.trim() === "Retry (resume from step 4)"`)
	b.clickLive("[data-testid=retry-button]")
	// The retry answers with a redirect to the job's page; a navigation
	// of the test's own while that one is under way aborts one of them
	// (net::ERR_ABORTED on CI, where the job had succeeded before the
	// redirected page came).
	b.waitJS("the retried job's page", retriedPage)
	b.eventually("the resumed retry succeeds", 30*time.Second, func() bool {
		return b.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'succeeded' AND attempt = 2", resume) == 1
	})
	if n := b.count("SELECT count(*) FROM artifacts WHERE job_id = $1 AND attempt = 2 AND kind = 'screenshot'", resume); n != 0 {
		t.Fatalf("the resumed attempt took %d screenshots, want none (every step was done before)", n)
	}
	b.do(chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", b.apiURL, resume)))
	b.waitJS("the resumed badge", `document.querySelector("[data-testid=attempt-resumed]")?.dataset.step === "3"`)

	b.do(chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", b.apiURL, startOver)), chromedp.WaitVisible(chromedp.CSS("[data-testid=retry-start-over-button]")))
	b.clickLive("[data-testid=retry-start-over-button]")
	b.waitJS("the retried job's page", retriedPage)
	b.eventually("the retry from the start succeeds", 30*time.Second, func() bool {
		return b.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'succeeded' AND attempt = 2", startOver) == 1
	})
	if n := b.count("SELECT count(*) FROM artifacts WHERE job_id = $1 AND attempt = 2 AND kind = 'screenshot'", startOver); n != 3 {
		t.Fatalf("the attempt started over took %d screenshots, want all 3 steps'", n)
	}
	if n := b.count("SELECT count(*) FROM events WHERE job_id = $1 AND type = 'resumed'", startOver); n != 0 {
		t.Fatalf("%d resumed events for a retry from the start", n)
	}
	b.do(chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", b.apiURL, startOver)))
	b.waitJS("both attempts shown, neither resumed", `document.querySelectorAll("[data-testid=attempt]").length === 2 && !document.querySelector("[data-testid=attempt-resumed]")`)
}

// retriedPage is true once the page a retry redirects to has loaded: a
// job no longer dead has no retry buttons.
const retriedPage = `document.readyState === "complete" && !document.querySelector("[data-testid=retry-button], [data-testid=retry-start-over-button]")`
