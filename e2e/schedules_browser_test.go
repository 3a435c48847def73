package e2e

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// In real Chromium: the nav leads to /schedules; a bad cron is marked
// beside its field; a good form creates the schedule, whose ticks show up
// as the last job (the list refreshes itself); Pause and Resume swap the
// row in place; the last job's page names the schedule.
func TestBrowserSchedules(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t)
	b.signIn()
	b.do(
		chromedp.Click(chromedp.CSS(`nav a[href="/schedules"]`)),
		chromedp.WaitVisible(chromedp.CSS("[data-testid=schedule-form]")),
		chromedp.SendKeys(chromedp.CSS("#schedule-name"), "every-second"),
		chromedp.SendKeys(chromedp.CSS("#schedule-cron"), "every second"),
		chromedp.SendKeys(chromedp.CSS("#schedule-kind"), "report"),
		// Not a queue the sim worker takes: the jobs wait, and stay listed.
		chromedp.SendKeys(chromedp.CSS("#schedule-queue"), "scheduled"),
		chromedp.Click(chromedp.CSS("[data-testid=create-schedule-button]")),
	)
	b.waitJS("the cron marked invalid with its message", `(() => {
		const cron = document.getElementById("schedule-cron");
		const err = document.getElementById("schedule-cron-error");
		return cron?.getAttribute("aria-invalid") === "true" && err?.textContent.includes("five fields") && cron.value === "every second";
	})()`)
	if n := b.count("SELECT count(*) FROM schedules"); n != 0 {
		t.Fatalf("an invalid form created %d schedules", n)
	}
	run(b, chromedp.Evaluate[bool](`(document.getElementById("schedule-cron").value = "") === ""`))
	b.do(
		chromedp.SendKeys(chromedp.CSS("#schedule-cron"), "@every 1s"),
		chromedp.Click(chromedp.CSS("[data-testid=create-schedule-button]")),
	)
	b.waitJS("the created schedule listed", `document.querySelector("[data-testid=created]") !== null &&
		document.querySelector("[data-testid=schedule-row][data-name=every-second] [data-testid=cron]")?.textContent === "@every 1s"`)
	b.waitJS("a tick's job linked, by the list's own refresh", `document.querySelector("[data-testid=schedule-row] [data-testid=last-job-link]") !== null`)

	// The list refreshes itself every 5 s: a click on a row just swapped
	// in, before htmx has set up its form, is a plain form post (which
	// navigates). Click once htmx has it, as a person's click would be.
	htmxReady := func(button string) string {
		return `document.querySelector("[data-testid=` + button + `]")?.form?.["htmx-internal-data"]?.initHash !== undefined`
	}
	b.waitJS("the Pause form set up by htmx", htmxReady("pause-button"))
	b.do(chromedp.Click(chromedp.CSS("[data-testid=pause-button]")))
	b.waitJS("the row paused in place", `document.querySelector("[data-testid=schedule-row] [data-testid=paused]") !== null &&
		document.querySelector("[data-testid=resume-button]") !== null`)
	if n := b.count("SELECT count(*) FROM schedules WHERE paused AND next_run_at IS NULL"); n != 1 {
		t.Fatalf("Pause did not pause the schedule (%d paused)", n)
	}
	if loc := b.location(); loc != b.apiURL+"/schedules?created=every-second" {
		t.Fatalf("Pause navigated to %s; htmx should swap the list in place", loc)
	}
	b.waitJS("the Resume form set up by htmx", htmxReady("resume-button"))
	b.do(chromedp.Click(chromedp.CSS("[data-testid=resume-button]")))
	b.waitJS("the row active again", `document.querySelector("[data-testid=schedule-row] [data-testid=active]") !== null`)
	if n := b.count("SELECT count(*) FROM schedules WHERE NOT paused AND next_run_at IS NOT NULL"); n != 1 {
		t.Fatalf("Resume did not resume the schedule")
	}

	b.do(chromedp.Click(chromedp.CSS("[data-testid=last-job-link]")))
	b.waitJS("the job page naming its schedule", `document.querySelector("[data-testid=job-schedule]")?.textContent === "every-second"`)
}
