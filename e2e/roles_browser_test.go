package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/leasehold/leasehold/client"
)

// In real Chromium, on a phone-sized screen: users made with `server user
// add` sign in with their role. A viewer reads the dead letter's page and
// the lists without a button that acts, and a retry forced from its page
// (a fetch with its own CSRF token) is refused 403 and changes nothing;
// an operator is shown Retry and it works. Demoting the operator with
// `server user set-role` takes the button away at its next page.
func TestBrowserRolesViewerAndOperator(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t)
	b.emulate(phone)
	user := func(args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(binDir, "server"), append([]string{"user"}, args...)...)
		cmd.Env = append(cmd.Environ(), "DATABASE_URL="+b.dbURL)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("server user %v: %v\n%s", args, err, out)
		}
	}
	user("add", "--name", "vera", "--role", "viewer", "--password", "viewer-password")
	user("add", "--name", "olga", "--role", "operator", "--password", "operator-password")

	raw, _ := json.Marshal(map[string]any{"app": "com.example.roles", "sim": map[string]any{"fail_attempts": 1, "permanent": true, "steps": 1, "step_ms": 10}})
	job, err := b.client().Submit(b.env.ctx, client.NewJob{Kind: "app_investigation", Payload: raw})
	if err != nil {
		t.Fatal(err)
	}
	b.waitFor(job.ID, 30*time.Second, client.StateDead)
	jobURL := fmt.Sprintf("%s/jobs/%d", b.apiURL, job.ID)

	signInAs := func(name, password string) {
		t.Helper()
		b.do(
			func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
				_, err := cdp.Call(ctx, t, network.ClearBrowserCookies, cdp.Empty{}) // signs the last user out
				return chromedp.Void{}, err
			},
			chromedp.Navigate(b.apiURL+"/login"),
			chromedp.WaitVisible(chromedp.CSS("#username")),
			chromedp.SendKeys(chromedp.CSS("#username"), name),
			chromedp.SendKeys(chromedp.CSS("#password"), password),
			chromedp.Click(chromedp.CSS("form[data-testid=login-form] button[type=submit]")),
			chromedp.WaitReady(chromedp.CSS("[data-testid=current-user]")),
		)
	}
	actions := `document.querySelectorAll("form[method=post]:not([action='/logout']), a[href='/jobs/new'], input[name=ids]").length`

	signInAs("vera", "viewer-password")
	for _, page := range []string{jobURL, b.apiURL + "/jobs", b.apiURL + "/dead", b.apiURL + "/queues", b.apiURL + "/schedules", b.apiURL + "/workers", b.apiURL + "/"} {
		b.do(chromedp.Navigate(page), chromedp.WaitReady(chromedp.CSS("[data-testid=current-user]")))
		if n := run(b, chromedp.Evaluate[int](actions)); n != 0 {
			t.Errorf("a viewer is shown %d forms, links or checkboxes that act on %s", n, page)
		}
	}
	b.do(chromedp.Navigate(jobURL), chromedp.WaitReady(chromedp.CSS("[data-testid=current-user]")))
	status := run(b, chromedp.Evaluate[int](fmt.Sprintf(`(async () => {
		const csrf = JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRF-Token"];
		const r = await fetch("/jobs/%d/retry", {method: "POST", headers: {"X-CSRF-Token": csrf, "Content-Type": "application/x-www-form-urlencoded"}, body: ""});
		return r.status;
	})()`, job.ID), chromedp.EvalAwaitPromise))
	if status != 403 {
		t.Errorf("a viewer's forced retry answered %d, want 403", status)
	}
	if d := b.waitFor(job.ID, time.Second, client.StateDead); d.State != client.StateDead {
		t.Fatalf("after a viewer's retry the job is %s", d.State)
	}

	signInAs("olga", "operator-password")
	b.do(chromedp.Navigate(jobURL), chromedp.WaitVisible(chromedp.CSS("[data-testid=retry-button]")))
	b.clickLive("[data-testid=retry-button]")
	b.eventually("the operator's retry", 30*time.Second, func() bool {
		return b.count("SELECT count(*) FROM jobs WHERE id = $1 AND state <> 'dead'", job.ID) == 1
	})

	user("set-role", "--name", "olga", "--role", "viewer")
	b.do(chromedp.Navigate(b.apiURL+"/jobs"), chromedp.WaitReady(chromedp.CSS("[data-testid=current-user]")))
	if n := run(b, chromedp.Evaluate[int](actions)); n != 0 {
		t.Errorf("olga, made a viewer, is still shown %d actions", n)
	}
	if html := run(b, chromedp.OuterHTML(chromedp.CSS("nav"))); strings.Contains(html, "/jobs/new") || strings.Contains(html, "/users") {
		t.Errorf("a viewer's menu links the submit form or the users page")
	}

	// The admin makes vera an operator on the users page, reached by the
	// menu.
	signInAs("admin", adminPassword)
	b.do(chromedp.Navigate(b.apiURL+"/"), chromedp.WaitReady(chromedp.CSS(`#main-nav a[href="/users"]`)))
	b.do(chromedp.Navigate(b.apiURL+"/users"), chromedp.WaitReady(chromedp.CSS("[data-testid=user-row][data-name=vera]")))
	b.do(chromedp.SetValue(chromedp.CSS("#role-vera"), "operator"))
	b.clickLive("[data-testid=user-row][data-name=vera] [data-testid=user-role-button]")
	b.waitJS("vera an operator", `document.querySelector("[data-testid=user-row][data-name=vera]")?.dataset.role === "operator"`)
}
