package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/leasehold/leasehold/client"
)

// In real Chromium with real processes: a window set on /workers for the
// sim worker, closed now (a day two days away), keeps its job pending and
// the job page says when the worker is available again; removing the
// window on /workers lets the job run.
func TestBrowserWindowHoldsJobUntilRemoved(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t)
	b.signIn()
	day := strings.ToLower(time.Now().UTC().AddDate(0, 0, 2).Weekday().String()[:3])
	window := day + " 10:00-11:00 UTC"
	b.do(
		chromedp.Navigate(b.apiURL+"/workers"),
		chromedp.WaitVisible(chromedp.CSS("[data-testid=window-form]")),
		chromedp.SetValue(chromedp.CSS("#window-scope"), "worker"),
		chromedp.SendKeys(chromedp.CSS("[data-testid=window-name]"), "sim"),
		chromedp.SendKeys(chromedp.CSS("[data-testid=window-text]"), window),
		chromedp.Click(chromedp.CSS("[data-testid=window-set]")),
	)
	b.waitJS("the window listed", `!!document.querySelector("[data-testid=window-row][data-scope=worker][data-name=sim]")`)

	job, err := b.client().Submit(b.ctx, client.NewJob{Kind: "app_investigation", Payload: []byte(`{"app":"com.example.window","sim":{"steps":1,"step_ms":10}}`)})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // the idle worker would have taken it by now
	if n := b.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'pending' AND attempt = 0", job.ID); n != 1 {
		t.Fatalf("the job was claimed outside the worker's window %q", window)
	}
	b.do(chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", b.apiURL, job.ID)))
	b.waitJS("the job page names the next opening",
		`(() => { const w = document.querySelector("[data-testid=job-waiting]");
		  return w && w.dataset.kind === "outside_window" && w.textContent.includes("sim is available again at") && w.textContent.includes("`+window+`") })()`)

	b.do(
		chromedp.Navigate(b.apiURL+"/workers"),
		chromedp.WaitVisible(chromedp.CSS("[data-testid=window-row][data-name=sim] [data-testid=window-remove]")),
	)
	b.clickLive("[data-testid=window-row][data-name=sim] [data-testid=window-remove]")
	b.eventually("the job runs once the window is removed", 30*time.Second, func() bool {
		return b.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'succeeded'", job.ID) == 1
	})
}

// With real processes: a worker whose --preflight fails (the phone's
// screen is locked) releases its job uncounted and holds back, and the
// job page says why; once the check passes again the job runs, and its
// page links both checks' outputs, kept on the attempt.
func TestBrowserPreflightHoldsBackThenRuns(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t)
	dir := t.TempDir()
	locked := filepath.Join(dir, "locked")
	if err := os.WriteFile(locked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	pre, post := filepath.Join(dir, "pre.sh"), filepath.Join(dir, "post.sh")
	script := "#!/bin/sh\nif [ -e " + locked + " ]; then echo 'screen is locked' >&2; exit 1; fi\necho 'unlocked, on the home screen'\n"
	if err := os.WriteFile(pre, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(post, []byte("#!/bin/sh\necho 'pressed home'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b.startWorker("phone-1", "--queues", "flight", "--concurrency", "1", "--lease", "5s", "--artifacts", b.artifacts,
		"--preflight", pre, "--postflight", post, "--device-info-every", "1s")

	job, err := b.client().Submit(b.ctx, client.NewJob{Kind: "app_investigation", Queue: "flight", Payload: []byte(`{"app":"com.example.flight","sim":{"steps":1,"step_ms":10}}`)})
	if err != nil {
		t.Fatal(err)
	}
	b.eventually("the failed preflight releases the job, uncounted", 30*time.Second, func() bool {
		return b.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'pending' AND attempt >= 1 AND counted_attempts = 0", job.ID) == 1
	})
	b.signIn()
	b.do(chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", b.apiURL, job.ID)))
	b.waitJS("the job page says the phone is unfit",
		`(() => { const w = document.querySelector("[data-testid=job-waiting]");
		  return w && w.dataset.kind === "devices_unfit" && w.textContent.includes("phone-1: preflight failed") })()`)

	if err := os.Remove(locked); err != nil {
		t.Fatal(err)
	}
	b.eventually("the job runs once the preflight passes", 30*time.Second, func() bool {
		return b.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'succeeded'", job.ID) == 1
	})
	b.eventually("both outputs kept on the attempt that ran", 10*time.Second, func() bool {
		return b.count(`SELECT count(*) FROM artifacts a JOIN jobs j ON j.id = a.job_id AND a.attempt = j.attempt
		                WHERE j.id = $1 AND a.name IN ('preflight.txt', 'postflight.txt')`, job.ID) == 2
	})
	b.do(chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", b.apiURL, job.ID)))
	b.waitJS("the page links both outputs",
		`[...document.querySelectorAll("a")].some(a => a.textContent.includes("preflight.txt")) && [...document.querySelectorAll("a")].some(a => a.textContent.includes("postflight.txt"))`)
}
