package e2e

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// In real Chromium: Pause on /queues holds a new job back from the running
// sim worker, the page says who paused, and Resume lets the job run.
func TestBrowserPauseAndResumeQueue(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t)
	// A first job makes the default queue appear on the page.
	first := b.submit(map[string]any{"app": "com.example.first", "sim": map[string]any{"steps": 1, "step_ms": 10}})
	b.eventually("the first job succeeds", 30*time.Second, func() bool {
		return b.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'succeeded'", first) == 1
	})
	b.signIn()
	row := "[data-testid=queue-default]"
	b.do(
		chromedp.Click(chromedp.CSS(`nav a[href="/queues"]`)),
		chromedp.WaitVisible(chromedp.CSS(row+" [data-testid=pause-button]")),
		chromedp.Click(chromedp.CSS(row+" [data-testid=pause-button]")),
	)
	b.waitJS("the queue shown paused", `document.querySelector("[data-testid=queue-default] [data-testid=paused-by]")?.textContent.includes("user:admin")`)
	if n := b.count("SELECT count(*) FROM queue_settings WHERE name = 'default' AND paused AND paused_by = 'user:admin'"); n != 1 {
		t.Fatalf("the pause was not recorded (%d)", n)
	}

	held := b.submit(map[string]any{"app": "com.example.held", "sim": map[string]any{"steps": 1, "step_ms": 10}})
	time.Sleep(1500 * time.Millisecond) // the worker is idle and listening: it would have taken the job by now
	if n := b.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'pending' AND attempt = 0", held); n != 1 {
		t.Fatal("a job of the paused queue was claimed")
	}
	b.waitJS("the held job counted as pending", `document.querySelector("[data-testid=queue-default] [data-testid=queue-pending]")?.textContent.trim() === "1"`)

	b.do(chromedp.Click(chromedp.CSS(row + " [data-testid=resume-button]")))
	b.waitJS("the queue shown active", `!!document.querySelector("[data-testid=queue-default] [data-testid=pause-button]")`)
	b.eventually("the held job runs once resumed", 15*time.Second, func() bool {
		return b.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'succeeded'", held) == 1
	})
}
