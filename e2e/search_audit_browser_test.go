package e2e

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/leasehold/leasehold/client"
)

// In real Chromium on a phone-sized screen, an admin types into the jobs
// list's search box and gets the one job whose instructions hold the
// text; then opens Audit from the menu and finds the submit (by the
// token) and its own sign-in, with the address it came from; then
// filters the trail by action.
func TestBrowserSearchAndAuditOnAPhone(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t)
	submit := func(instructions string) int64 {
		t.Helper()
		raw, _ := json.Marshal(map[string]any{"app": "com.example.search", "instructions": instructions, "sim": map[string]any{"steps": 1, "step_ms": 10}})
		job, err := b.client().Submit(b.env.ctx, client.NewJob{Kind: "app_investigation", Payload: raw})
		if err != nil {
			t.Fatal(err)
		}
		return job.ID
	}
	want := submit("Stop at the Login Screen and report what it asks for")
	submit("Open the inbox")

	b.signIn() // at desktop size, where the signed-in user shows
	b.emulate(phone)
	b.do(
		chromedp.Navigate(b.apiURL+"/jobs"),
		chromedp.WaitVisible(chromedp.CSS("[data-testid=filter-q]")),
		chromedp.SendKeys(chromedp.CSS("[data-testid=filter-q]"), "login screen"+kb.Enter),
	)
	b.waitJS("one job found by its instructions", `(() => {
		const rows = document.querySelectorAll("[data-testid=job-row]");
		return location.search.includes("q=login+screen") && rows.length === 1 && rows[0].dataset.jobId === "`+strconv.FormatInt(want, 10)+`";
	})()`)

	b.do(chromedp.Click(chromedp.CSS("[data-testid=nav-toggle]")))
	b.do(chromedp.Click(chromedp.CSS("#main-nav a[href='/audit']")))
	b.waitJS("the submits and the sign-in in the trail", `(() => {
		const rows = [...document.querySelectorAll("[data-testid=audit-row]")];
		const has = (action, actor) => rows.some(r => r.dataset.action === action && r.querySelector("[data-testid=audit-actor]").textContent.trim() === actor &&
			r.textContent.includes("127.0.0.1"));
		return rows.length === 3 && has("sign_in", "user:admin") && rows.filter(r => r.dataset.action === "job.submit").length === 2;
	})()`)
	b.do(
		chromedp.SetValue(chromedp.CSS("[data-testid=audit-filters] [name=action]"), "job"),
		chromedp.Click(chromedp.CSS("[data-testid=audit-submit]")),
	)
	b.waitJS("only the submits after filtering by action", `(() => {
		const rows = [...document.querySelectorAll("[data-testid=audit-row]")];
		return location.search.includes("action=job") && rows.length === 2 && rows.every(r => r.dataset.action === "job.submit");
	})()`)
	if w := run(b, chromedp.Evaluate[int](`document.documentElement.scrollWidth - window.innerWidth`)); w > 0 {
		t.Errorf("the audit page is %d px wider than the phone's screen", w)
	}
}
