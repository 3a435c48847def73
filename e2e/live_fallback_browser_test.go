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
	b.signIn()
	b.do(chromedp.Navigate("about:blank")) // its overview's stream ends
	// Another tab of the session takes the session's one stream.
	tab, cancel := chromedp.NewContext(b.ctx)
	defer cancel()
	other := &browserEnv{env: b.env, ctx: tab, server: b.server}
	other.do(chromedp.Navigate(b.apiURL+"/"), chromedp.WaitVisible(chromedp.CSS("[data-testid=overview-live]")))
	time.Sleep(time.Second)

	b.do(chromedp.Navigate(b.apiURL+"/jobs"), chromedp.WaitVisible(chromedp.CSS("[data-testid=jobs-live]")))
	time.Sleep(time.Second) // its stream refused by now
	job, err := b.client().Submit(b.ctx, client.NewJob{Kind: "app_investigation", Queue: "nobody-serves",
		Payload: json.RawMessage(`{"app":"com.example.fallback"}`)})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b.waitJS("the new job on the page whose stream was refused",
		fmt.Sprintf(`!!document.querySelector('[data-testid=job-row][data-job-id="%d"]')`, job.ID))
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the job appeared after %s, want within the page's 3 s poll", took)
	}
	b.waitJS("the page says it polls", `document.documentElement.dataset.live === "polling"`)
}
