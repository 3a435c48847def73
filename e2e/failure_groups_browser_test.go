package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/artifact/artifacttest"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// In real Chromium on a phone-sized screen, the dead-letter page shows
// the causes of its dead letters before the letters. A phone worker
// fails three jobs for good on the login screen and the crash screen
// with errors that differ only in their numbers: the two login failures
// are one cause, whose card says so, shows the screen they ended on and
// the error with its numbers masked, and fits the phone's width. Its
// link lists its two letters alone; its Retry, once the browser's
// confirm is accepted, retries both as one audited action, the crash is
// the only cause left, on the page and in the API, and a notice says
// how many jobs were retried.
func TestBrowserDeadLettersGroupedByCause(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t)
	ctx, c := b.env.ctx, b.client()
	phoneWorker, err := worker.NewRemote(b.apiURL, b.workerToken("phone-groups"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	phoneWorker.ClaimWait = 0 // each job is submitted before it is claimed

	// failOn submits a job of app to a queue the environment's sim worker
	// does not take, and the phone worker claims it, uploads its screen
	// (layout, with clock in the status bar) and fails it with msg: dead
	// at once unless retryable. It returns the job as the API then has it.
	maxAttempts := int32(3)
	failOn := func(app, layout, clock, msg string, retryable bool) client.JobDetail {
		t.Helper()
		payload, err := json.Marshal(map[string]any{"app": app, "instructions": "Sign in and open the inbox"})
		if err != nil {
			t.Fatal(err)
		}
		job, err := c.Submit(ctx, client.NewJob{Kind: "app_investigation", Queue: "groups", MaxAttempts: &maxAttempts, Payload: payload})
		if err != nil {
			t.Fatal(err)
		}
		claim, err := phoneWorker.Claim(ctx, queue.ClaimParams{Queues: []string{"groups"}, Limit: 1})
		if err != nil || len(claim.Jobs) != 1 || claim.Jobs[0].ID != job.ID {
			t.Fatalf("claiming job %d: %v %+v", job.ID, err, claim.Jobs)
		}
		l := queue.Lease{JobID: job.ID, Token: claim.Jobs[0].LeaseToken}
		// The claim only hands the job over; the first heartbeat takes it.
		if _, err := phoneWorker.Heartbeat(ctx, l); err != nil {
			t.Fatalf("confirming the hand-over of job %d: %v", job.ID, err)
		}
		shot := artifacttest.Screen(t, layout, clock)
		if _, err := phoneWorker.UploadArtifact(ctx, l, "screen.png", 1, bytes.NewReader(shot)); err != nil {
			t.Fatalf("uploading the screenshot of job %d: %v", job.ID, err)
		}
		if _, err := phoneWorker.Fail(ctx, l, msg, retryable); err != nil {
			t.Fatalf("failing job %d: %v", job.ID, err)
		}
		d, err := c.Get(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	login1 := failOn("com.example.shop", artifacttest.ScreenLogin, "10:41", "element 'Sign in' not found after 3000 ms on emulator-5554", false)
	login2 := failOn("com.example.bank", artifacttest.ScreenLogin, "23:07", "element 'Sign in' not found after 4500 ms on emulator-5556", false)
	crash := failOn("com.example.shop", artifacttest.ScreenCrash, "10:42", "element 'Sign in' not found after 3000 ms on emulator-5554", false)
	// Last: waiting to retry, it would be the next job the phone claims.
	retrying := failOn("com.example.mail", artifacttest.ScreenLogin, "07:15", "element 'Sign in' not found after 1200 ms on emulator-5558", true)

	for _, d := range []client.JobDetail{login1, login2, crash} {
		if d.State != client.StateDead || d.FailureGroup == nil {
			t.Fatalf("job %d: %s in group %v; want dead, in a group", d.ID, d.State, d.FailureGroup)
		}
	}
	if retrying.State != client.StatePending || retrying.FailureGroup == nil {
		t.Fatalf("the retryable failure: %s in group %v; want pending, in a group", retrying.State, retrying.FailureGroup)
	}
	loginGroup, crashGroup := *login1.FailureGroup, *crash.FailureGroup
	if *login2.FailureGroup != loginGroup || *retrying.FailureGroup != loginGroup || crashGroup == loginGroup {
		t.Fatalf("groups: login %d and %d, retrying %d, crash %d; want the login failures in one group, the crash in another",
			loginGroup, *login2.FailureGroup, *retrying.FailureGroup, crashGroup)
	}
	groups := failureGroups(b)
	if len(groups) != 2 {
		t.Fatalf("the API lists %d failure groups, want 2: %+v", len(groups), groups)
	}
	i := slices.IndexFunc(groups, func(g api.FailureGroup) bool { return g.ID == loginGroup })
	if i < 0 || groups[i].Screenshot == nil {
		t.Fatalf("the API has no login group %d with a screenshot: %+v", loginGroup, groups)
	}
	loginShot := *groups[i].Screenshot

	b.signIn() // at desktop size, where the signed-in user shows
	b.emulate(phone)
	b.do(
		chromedp.Navigate(b.apiURL+"/dead"),
		chromedp.WaitVisible(chromedp.CSS("[data-testid=dead-groups]")),
	)
	card := fmt.Sprintf("[data-testid=dead-group][data-group-id='%d']", loginGroup)
	b.waitJS("two causes: the login failures together, the crash apart", `(() => {
		const groups = [...document.querySelectorAll("[data-testid=dead-group]")].map(g => g.dataset.groupId).sort();
		return JSON.stringify(groups) === JSON.stringify(["`+strconv.FormatInt(loginGroup, 10)+`", "`+strconv.FormatInt(crashGroup, 10)+`"].sort());
	})()`)
	type cardText struct {
		Signature string `json:"signature"`
		Dead      string `json:"dead"`
		Figures   string `json:"figures"`
		Apps      string `json:"apps"`
		Shot      string `json:"shot"`
	}
	got := run(b, chromedp.Evaluate[cardText](`(() => {
		const card = document.querySelector("`+card+`");
		const text = id => card.querySelector("[data-testid=" + id + "]")?.textContent.trim().replace(/\s+/g, " ") ?? "";
		return {signature: text("group-link"), dead: text("group-dead"), figures: card.querySelector(".group-figures")?.textContent.replace(/\s+/g, " ") ?? "",
			apps: text("group-apps"), shot: card.querySelector("[data-testid=group-shot]")?.getAttribute("src") ?? ""};
	})()`))
	if got.Signature != "element 'Sign in' not found after # ms on emulator-#" {
		t.Errorf("the login cause reads %q, want its error with the numbers masked", got.Signature)
	}
	if got.Dead != "2 dead letters" {
		t.Errorf("the login cause says %q, want 2 dead letters", got.Dead)
	}
	// The job waiting to retry failed of the same cause: its attempt is
	// counted, though it is no dead letter.
	if !strings.Contains(got.Figures, "3 failed attempts") {
		t.Errorf("the login cause's figures are %q, want 3 failed attempts", got.Figures)
	}
	for _, app := range []string{"com.example.shop", "com.example.bank"} {
		if !strings.Contains(got.Apps, app) {
			t.Errorf("the login cause's apps are %q, without %s", got.Apps, app)
		}
	}
	if got.Shot != loginShot {
		t.Errorf("the login cause shows %q, want the group's screenshot %s", got.Shot, loginShot)
	}
	// The thumbnail loads lazily: in view, as a person scrolling to it
	// sees it, it has the phone's 540×1200 screen.
	b.do(chromedp.Evaluate[chromedp.Void](`document.querySelector("` + card + `").scrollIntoView()`))
	b.waitJS("the login cause's screenshot loaded", `(() => {
		const img = document.querySelector("`+card+` img[data-testid=group-shot]");
		return !!img && img.complete && img.naturalWidth === 540 && img.naturalHeight === 1200;
	})()`)

	type box struct {
		ID    string  `json:"id"`
		Left  float64 `json:"left"`
		Right float64 `json:"right"`
	}
	type widths struct {
		Inner  int64 `json:"inner"`
		Scroll int64 `json:"scroll"`
		Cards  []box `json:"cards"`
	}
	w := run(b, chromedp.Evaluate[widths](`({inner: window.innerWidth, scroll: document.documentElement.scrollWidth,
		cards: [...document.querySelectorAll("[data-testid=dead-group]")].map(g => {
			const r = g.getBoundingClientRect();
			return {id: g.dataset.groupId, left: r.left, right: r.right};
		})})`))
	// A phone's browser widens its viewport to a page wider than the
	// screen (and zooms out), so the window's width is the phone's.
	if w.Inner != phone.w || w.Scroll > w.Inner {
		t.Errorf("at %d px the dead-letter page is %d px wide in a %d px viewport", phone.w, w.Scroll, w.Inner)
	}
	t.Logf("at %d px: a %d px viewport, the page %d px wide, its causes %+v", phone.w, w.Inner, w.Scroll, w.Cards)
	if len(w.Cards) != 2 {
		t.Errorf("%d cause cards measured, want 2", len(w.Cards))
	}
	for _, c := range w.Cards {
		if c.Left < 0 || c.Right > float64(phone.w) {
			t.Errorf("cause %s spans %.1f–%.1f px, outside the phone's %d", c.ID, c.Left, c.Right, phone.w)
		}
	}

	b.clickLive(card + " [data-testid=group-link]")
	b.waitJS("the login cause's two dead letters alone", `(() => {
		const rows = [...document.querySelectorAll("[data-testid=dead-row]")].map(r => r.dataset.jobId).sort();
		return location.search === "?group=`+strconv.FormatInt(loginGroup, 10)+`" && document.querySelector("[data-testid=group-head]") !== null &&
			JSON.stringify(rows) === JSON.stringify(["`+strconv.FormatInt(login1.ID, 10)+`", "`+strconv.FormatInt(login2.ID, 10)+`"].sort());
	})()`)

	b.clickLive("[data-testid=group-head] [data-testid=all-dead]")
	b.waitJS("every cause again", `location.pathname === "/dead" && location.search === "" && document.querySelectorAll("[data-testid=dead-group]").length === 2`)
	// The confirm blocks the page, and the click with it, until it is
	// answered: another goroutine accepts it, then says what was asked.
	listening, stop := context.WithCancel(b.ctx)
	defer stop()
	type answered struct {
		ev  page.EventJavascriptDialogOpening
		err error
	}
	asked := make(chan answered, 4)
	dialogs := chromedp.Events(listening, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			_, err := chromedp.Call(listening, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
			asked <- answered{ev, err}
		}
	}()
	b.clickLive(card + " [data-testid=group-retry]")
	select {
	case ans := <-asked:
		if ans.err != nil {
			t.Fatalf("accepting the confirm %q: %v", ans.ev.Message, ans.err)
		}
		if ans.ev.Type != page.DialogTypeConfirm || ans.ev.Message != "Retry the 2 dead letters of this cause? Each gets a fresh budget of attempts." {
			t.Errorf("the browser asked (%s) %q", ans.ev.Type, ans.ev.Message)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("pressing Retry this cause opened no confirm in 30 s")
	}
	crashAlone := `(() => {
		const groups = [...document.querySelectorAll("[data-testid=dead-group]")];
		return groups.length === 1 && groups[0].dataset.groupId === "` + strconv.FormatInt(crashGroup, 10) + `";
	})()`
	b.waitJS("the crash the only cause left", crashAlone)
	if groups := failureGroups(b); len(groups) != 1 || groups[0].ID != crashGroup || groups[0].Dead != 1 {
		t.Errorf("after the retry the API lists %+v, want the crash group %d alone, with its one dead letter", groups, crashGroup)
	}
	for _, id := range []int64{login1.ID, login2.ID, retrying.ID} {
		d, err := c.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if d.State != client.StatePending {
			t.Errorf("job %d is %s after its cause was retried, want pending", id, d.State)
		}
	}

	a := b.env.do(http.MethodGet, "/api/v1/audit?action=jobs.retry", "", nil, 10*time.Second)
	var trail api.AuditList
	if a.status != http.StatusOK || json.Unmarshal([]byte(a.body), &trail) != nil {
		t.Fatalf("GET /api/v1/audit: %v", a)
	}
	if len(trail.Entries) != 1 || trail.Entries[0].Action != "jobs.retry" || trail.Entries[0].Actor != "user:admin" {
		t.Fatalf("the audit trail of retries: %v", a)
	}
	var detail struct {
		Selection struct {
			FailureGroup int64  `json:"failure_group"`
			State        string `json:"state"`
		} `json:"selection"`
		Count int     `json:"count"`
		IDs   []int64 `json:"ids"`
	}
	if err := json.Unmarshal(trail.Entries[0].Detail, &detail); err != nil {
		t.Fatal(err)
	}
	slices.Sort(detail.IDs)
	if detail.Selection.FailureGroup != loginGroup || detail.Selection.State != "dead" || detail.Count != 2 ||
		!slices.Equal(detail.IDs, []int64{login1.ID, login2.ID}) {
		t.Errorf("the retry's audit detail is %s; want the dead letters of group %d, jobs %d and %d",
			trail.Entries[0].Detail, loginGroup, login1.ID, login2.ID)
	}

	// Last, once the retry is known done: the person who pressed the
	// button is told so. The retry's own change refreshes the page live
	// at the same moment; that refresh must not cost the answer with
	// its redirect to the notice.
	b.waitJS("the notice of the two jobs retried, above the crash alone", `location.search.includes("done=retried%3A2") &&
		document.querySelector("[data-testid=notice]")?.textContent.trim() === "2 jobs retried." && `+crashAlone)
}

// failureGroups is GET /api/v1/failure-groups with the admin token.
func failureGroups(b *browserEnv) []api.FailureGroup {
	b.t.Helper()
	a := b.env.do(http.MethodGet, "/api/v1/failure-groups", "", nil, 10*time.Second)
	var out api.FailureGroupList
	if a.status != http.StatusOK || json.Unmarshal([]byte(a.body), &out) != nil {
		b.t.Fatalf("GET /api/v1/failure-groups: %v", a)
	}
	return out.Groups
}
