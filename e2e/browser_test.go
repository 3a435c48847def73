package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

const (
	chromiumPath  = "/usr/bin/chromium"
	adminPassword = "browser-test-password"
)

// browserEnv is a server with a sim worker, and a real headless Chromium.
type browserEnv struct {
	*env
	ctx    context.Context // a chromedp context: one browser tab
	server *proc
}

// newBrowserEnv starts them; serverEnv is more environment for the server.
func newBrowserEnv(t *testing.T, serverEnv ...string) *browserEnv {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("chromium missing (%v): .ci/run installs it", err)
		}
		t.Skip("chromium not installed (apt-get install chromium)")
	}
	e := newEnv(t)
	server := e.startServerWith(append([]string{"LEASEHOLD_ADMIN_PASSWORD=" + adminPassword}, serverEnv...)...)
	e.startWorker("sim", "--concurrency", "4", "--lease", "5s", "--artifacts", e.artifacts)

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first Run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return &browserEnv{env: e, ctx: ctx, server: server}
}

// do runs browser steps with a time limit.
func (b *browserEnv) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

func run[T any](b *browserEnv, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.t.Fatalf("browser: %v", err)
	}
	return v
}

// clickLive clicks the element sel names on a page that refreshes itself
// (live updates swap its parts in). A refresh can take the node the
// browser was asked about away between the query and the click: then the
// click never happened, and it queries and clicks again, for as long as
// that is what fails.
func (b *browserEnv) clickLive(sel string) {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel)))
		cancel()
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "node with given id") || time.Now().After(deadline) {
			b.t.Fatalf("browser: clicking %s: %v", sel, err)
		}
		b.t.Logf("clicking %s: %v; again", sel, err)
	}
}

func (b *browserEnv) location() string {
	b.t.Helper()
	return run(b, chromedp.Location())
}

func (b *browserEnv) signIn() {
	b.t.Helper()
	b.do(
		chromedp.Navigate(b.apiURL+"/login"),
		chromedp.WaitVisible(chromedp.CSS("#username")),
		chromedp.SendKeys(chromedp.CSS("#username"), "admin"),
		chromedp.SendKeys(chromedp.CSS("#password"), adminPassword),
		chromedp.Click(chromedp.CSS("form[data-testid=login-form] button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("[data-testid=current-user]")),
	)
}

// waitJS waits until a JavaScript expression is true on the page. A form
// submission or a redirect replaces the page under it; evaluating then
// fails, and it tries again.
func (b *browserEnv) waitJS(what, expr string) {
	b.t.Helper()
	deadline := time.Now().Add(40 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		cancel()
		if err == nil && ok {
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	html, _ := chromedp.Run(b.ctx, chromedp.OuterHTML(chromedp.CSS("body")))
	b.t.Fatalf("waiting for %s (last error %v)\npage: %.3000s", what, last, html)
}

func TestBrowserPageWithoutSessionGoesToSignIn(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t)
	b.do(chromedp.Navigate(b.apiURL+"/dead"), chromedp.WaitVisible(chromedp.CSS("#username")))
	if loc := b.location(); !strings.HasPrefix(loc, b.apiURL+"/login?next=%2Fdead") {
		t.Fatalf("landed on %s", loc)
	}
	b.do(
		chromedp.SendKeys(chromedp.CSS("#username"), "admin"),
		chromedp.SendKeys(chromedp.CSS("#password"), adminPassword),
		chromedp.Click(chromedp.CSS("form[data-testid=login-form] button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("[data-testid=current-user]")),
	)
	if loc := b.location(); loc != b.apiURL+"/dead" {
		t.Fatalf("after sign-in: %s, want back on /dead", loc)
	}
}

func TestBrowserSubmitShowsScreenshots(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t)
	b.signIn()
	b.do(
		chromedp.Navigate(b.apiURL+"/jobs/new"),
		chromedp.WaitVisible(chromedp.CSS("input[name=app]")),
		chromedp.SendKeys(chromedp.CSS("input[name=app]"), "com.example.notes"),
		chromedp.SendKeys(chromedp.CSS("textarea[name=instructions]"), "Open settings and check the toggles."),
		chromedp.Submit(chromedp.CSS("input[name=app]")),
	)
	b.waitJS("the job page", `location.pathname.match(/^\/jobs\/\d+$/) !== null`)
	// The sim worker runs it; the page updates itself with each step's
	// screenshot, without a reload.
	b.waitJS("three screenshots that load", `(() => {
		const imgs = [...document.querySelectorAll("[data-testid=screenshot] img, img[data-testid=screenshot]")];
		return imgs.length >= 3 && imgs.every(i => i.complete && i.naturalWidth > 0);
	})()`)
	b.waitJS("the job to succeed", `document.querySelector("[data-testid=job-state]")?.textContent.includes("succeeded")`)
}

func TestBrowserBadPackageNameIsExplained(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t)
	b.signIn()
	b.do(
		chromedp.Navigate(b.apiURL+"/jobs/new"),
		chromedp.WaitVisible(chromedp.CSS("input[name=app]")),
		chromedp.SendKeys(chromedp.CSS("input[name=app]"), "not a package"),
		chromedp.SendKeys(chromedp.CSS("textarea[name=instructions]"), "kept"),
		chromedp.Submit(chromedp.CSS("input[name=app]")),
	)
	b.waitJS("the field marked invalid with its message", `(() => {
		const app = document.querySelector("input[name=app]");
		const err = document.getElementById(app?.getAttribute("aria-describedby")?.split(" ").find(id => id.endsWith("error")) || "app-error");
		return app?.getAttribute("aria-invalid") === "true" && err && err.textContent.trim().length > 0;
	})()`)
	if v := run(b, chromedp.Value(chromedp.CSS("textarea[name=instructions]"))); v != "kept" {
		t.Fatalf("instructions not kept: %q", v)
	}
	if n := b.count("SELECT count(*) FROM jobs"); n != 0 {
		t.Fatalf("%d jobs created by an invalid form", n)
	}
}

// A page elsewhere auto-posts a form to Leasehold while the user is
// signed in: nothing is created. From another site (localhost) the
// browser withholds the session cookie (SameSite=Lax); from another origin
// of the same site (127.0.0.1 on another port) it sends the cookie, and
// the server's origin check refuses the request.
func TestBrowserCrossSiteFormCreatesNothing(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t)
	b.signIn()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	posted := make(chan struct{}, 1)
	evil := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/done" {
			posted <- struct{}{}
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<html><body><iframe name="sink"></iframe>
<form id="f" method="post" action="%s/jobs/new" target="sink">
<input name="app" value="com.evil.app"><input name="instructions" value="pwned">
<input name="priority" value="0"><input name="max_attempts" value="5">
<input name="idempotency_key" value="00112233445566778899aabbccddeeff"></form>
<script>document.getElementById("f").submit(); setTimeout(() => fetch("/done"), 1500);</script>
</body></html>`, b.apiURL)
	})}
	go evil.Serve(ln)
	defer evil.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	for _, origin := range []string{fmt.Sprintf("http://localhost:%d", port), fmt.Sprintf("http://127.0.0.1:%d", port)} {
		b.do(chromedp.Navigate(origin + "/"))
		select {
		case <-posted:
		case <-time.After(20 * time.Second):
			t.Fatalf("the page at %s did not run", origin)
		}
	}
	if n := b.count("SELECT count(*) FROM jobs"); n != 0 {
		t.Fatalf("a cross-site form created %d jobs", n)
	}
	// Both posts reached the server; the one that carried the session was
	// refused by the origin check.
	log := b.server.out.String()
	if strings.Count(log, "method=POST path=/jobs/new") != 2 || !strings.Contains(log, "method=POST path=/jobs/new status=403") {
		t.Fatalf("want two posts, one refused with 403:\n%s", log)
	}
	b.do(chromedp.Navigate(b.apiURL+"/"), chromedp.WaitVisible(chromedp.CSS("[data-testid=current-user]")))
}

func TestBrowserRetryDeadLetter(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t)
	id := b.submit(map[string]any{"app": "com.example.broken", "sim": map[string]any{"steps": 1, "step_ms": 10, "permanent": true}})
	b.eventually("the job is dead", 30*time.Second, func() bool {
		return b.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'dead'", id) == 1
	})
	b.signIn()
	row := fmt.Sprintf("[data-testid=dead-row][data-job-id='%d']", id)
	b.do(
		chromedp.Navigate(b.apiURL+"/dead"),
		chromedp.WaitVisible(chromedp.CSS(row)),
	)
	b.clickLive(row + " [data-testid=retry-button]")
	b.eventually("the job runs again", 30*time.Second, func() bool {
		return b.count("SELECT count(*) FROM job_timeline WHERE job_id = $1 AND type = 'retried' AND detail->>'by' = 'user:admin'", id) == 1
	})

	// The notice stays on screen while the page refreshes itself: the
	// retry changed the dead letters, so a live refresh follows at once,
	// and it used to fetch the page without the notice and swap it away.
	b.waitJS("the notice shown", `document.querySelector("[data-testid=notice]")?.textContent.trim() === "1 job retried."`)
	run(b, chromedp.Evaluate[bool](`window.liveSwaps = 0; document.body.addEventListener("htmx:afterSwap", () => window.liveSwaps++); true`))
	shown := time.Now()
	// The retried job dies again at once, and on a loaded machine its
	// refresh may come before the counter above is in place; a second
	// job going dead makes one that surely comes after.
	b.submit(map[string]any{"app": "com.example.broken2", "sim": map[string]any{"steps": 1, "step_ms": 10, "permanent": true}})
	b.waitJS("a live refresh of the page", `window.liveSwaps > 0`)
	if wait := 2*time.Second - time.Since(shown); wait > 0 {
		time.Sleep(wait) // what was reported: gone 2 s after the click
	}
	visible := `(() => {
		const n = document.querySelector("[data-testid=notice]");
		if (!n || n.textContent.trim() !== "1 job retried.") return "no notice: " + (n ? n.textContent : "none");
		const r = n.getBoundingClientRect(), s = getComputedStyle(n);
		if (r.width === 0 || r.height === 0) return "zero box " + r.width + "x" + r.height;
		if (s.visibility !== "visible" || s.display === "none" || Number(s.opacity) < 0.99) return "hidden: " + s.visibility + " " + s.display + " " + s.opacity;
		if (r.bottom <= 0 || r.top >= innerHeight) return "off screen at " + r.top;
		return "";
	})()`
	if why := run(b, chromedp.Evaluate[string](visible)); why != "" {
		t.Fatalf("after %s and %s live refreshes, the notice is not visible: %s", time.Since(shown).Round(100*time.Millisecond),
			fmt.Sprint(run(b, chromedp.Evaluate[int](`window.liveSwaps`))), why)
	}
}

func TestBrowserCancelRunningJob(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t)
	id := b.submit(map[string]any{"app": "com.example.slow", "sim": map[string]any{"hang": true, "step_ms": 200}})
	b.eventually("the job runs", 30*time.Second, func() bool {
		return b.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'running'", id) == 1
	})
	b.signIn()
	b.do(
		chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", b.apiURL, id)),
		chromedp.WaitVisible(chromedp.CSS("[data-testid=lease-countdown]")),
	)
	// The page refreshes itself on each progress event (every 200 ms
	// here) and a refresh may move the button between chromedp finding
	// its box and the click landing there: on a loaded CI machine the
	// click reached no button and no request was sent. A person clicks
	// again when nothing happens; so does the test, and says so.
	for try := 1; ; try++ {
		b.clickLive("[data-testid=cancel-button]")
		asked := func() bool {
			return b.count("SELECT count(*) FROM jobs WHERE id = $1 AND (cancel_requested OR state = 'cancelled')", id) == 1
		}
		deadline := time.Now().Add(5 * time.Second)
		for !asked() && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if asked() {
			break
		}
		if try == 3 {
			t.Fatal("three clicks on Ask to stop sent no cancel")
		}
		t.Logf("click %d on Ask to stop sent no cancel; clicking again", try)
	}
	b.eventually("the job is cancelled", 30*time.Second, func() bool {
		return b.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'cancelled'", id) == 1
	})
	b.waitJS("the page to show it", `document.querySelector("[data-testid=job-state]")?.textContent.includes("cancelled")`)
}

// The replay viewer steps with the arrow keys: htmx swaps the viewer in
// place and the step goes into the address bar; at the last step → does
// nothing. The bundle behind the Download link answers the session.
func TestBrowserReplayStepsWithArrowKeys(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t)
	id := b.submit(map[string]any{"app": "com.example.replay", "sim": map[string]any{"steps": 3, "step_ms": 10}})
	b.eventually("the job succeeds", 30*time.Second, func() bool {
		return b.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'succeeded'", id) == 1
	})
	b.signIn()
	step := `document.querySelector("[data-testid=replay-step]")?.textContent.trim()`
	b.do(
		chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", b.apiURL, id)),
		chromedp.WaitVisible(chromedp.CSS("[data-testid=replay]")),
	)
	b.waitJS("step 1 at first", step+` === "Step 1 of 3"`)
	b.do(chromedp.KeyEvent(kb.ArrowRight))
	b.waitJS("step 2 after →", step+` === "Step 2 of 3" && location.search.includes("step=2")`)
	b.waitJS("step 2's action and screenshot", `(() => {
		const img = document.querySelector("[data-testid=replay-shot]");
		return document.querySelector("[data-testid=replay-message]").textContent.includes("step 2: explored screen 2") &&
			img.complete && img.naturalWidth > 0;
	})()`)
	b.do(chromedp.KeyEvent(kb.ArrowRight))
	b.waitJS("step 3 after →", step+` === "Step 3 of 3"`)
	b.do(chromedp.KeyEvent(kb.ArrowRight)) // at the end: nothing to follow
	b.do(chromedp.KeyEvent(kb.ArrowLeft))
	b.waitJS("step 2 after ←", step+` === "Step 2 of 3" && location.search.includes("step=2")`)

	// A key pressed the moment a step is swapped in, before htmx settles
	// (a held arrow key does this), still steps in place: the page is not
	// reloaded, so the marker on window survives.
	b.do(chromedp.Evaluate[chromedp.Void](`window.samePage = true;
		document.addEventListener("htmx:afterSwap", () => {
			document.body.dispatchEvent(new KeyboardEvent("keydown", {key: "ArrowLeft", bubbles: true}));
		}, {once: true})`))
	b.do(chromedp.KeyEvent(kb.ArrowRight))
	b.waitJS("step 2 again, in place, after → and a quick ←", step+` === "Step 2 of 3" && window.samePage === true && location.search.includes("step=2") && document.querySelector("[data-testid=replay-message]").textContent.includes("step 2:")`)
	b.do(chromedp.Evaluate[chromedp.Void](`fetch(document.querySelector("[data-testid=attempt-bundle]").href).then(r => r.blob().then(z => {
		document.body.dataset.bundle = r.status + " " + r.headers.get("content-type") + " " + (z.size > 1000);
	}))`))
	b.waitJS("the bundle to download with the session, on the page never reloaded", `document.body.dataset.bundle === "200 application/zip true" && window.samePage === true`)
}
