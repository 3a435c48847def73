package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/leasehold/leasehold/client"
)

// A page whose event stream the server refuses (here: the session's
// second tab, with --max-streams-per-session 1) polls instead, and shows
// a job submitted after it loaded; its stream alone would never have.
func TestBrowserPagePollsWhenItsStreamIsRefused(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t, "LEASEHOLD_MAX_STREAMS_PER_SESSION=1")
	b.signIn() // the overview: its stream is the session's one
	time.Sleep(time.Second)

	tab, cancel := chromedp.NewContext(b.ctx)
	defer cancel()
	second := &browserEnv{env: b.env, ctx: tab, server: b.server}
	second.do(chromedp.Navigate(b.apiURL+"/jobs"), chromedp.WaitVisible(chromedp.CSS("[data-testid=jobs-live]")))
	time.Sleep(time.Second) // its stream refused by now

	job, err := b.client().Submit(b.ctx, client.NewJob{Kind: "app_investigation", Queue: "nobody-serves",
		Payload: json.RawMessage(`{"app":"com.example.fallback"}`)})
	if err != nil {
		t.Fatal(err)
	}
	took := second.within(10*time.Second, "the new job on the second tab",
		fmt.Sprintf(`!!document.querySelector('[data-testid=job-row][data-job-id="%d"]')`, job.ID))
	t.Logf("the job appeared on the polling tab after %s", took)
	second.waitJS("the tab says it polls", `document.documentElement.dataset.live === "polling"`)
}
