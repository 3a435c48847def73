package web_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates/htmltest"
)

// replayJob makes a dead job of two attempts, both failed, as a worker
// would: attempt 1 announces "open the app", takes two screenshots and
// fails retryably; attempt 2 takes one, announces "tap Settings", takes
// another and fails for good. It returns the job and each attempt's
// screenshot ids.
func (f *fixture) replayJob(t *testing.T) (jobJSON, [][]int64) {
	t.Helper()
	j := f.submit(t, `{"kind":"app_investigation","max_attempts":2,"payload":{"app":"com.example.replay"}}`)
	var shots [][]int64
	shot := func(l queue.Lease, name string) int64 {
		a, err := f.queue.RecordArtifact(f.ctx, l, queue.Artifact{Kind: queue.ArtifactScreenshot, Name: name, ContentType: "image/png",
			Size: 100, SHA256: strings.Repeat("ab", 32)})
		if err != nil {
			t.Fatal(err)
		}
		return a.ID
	}
	progress := func(l queue.Lease, msg string) {
		if err := f.queue.Progress(f.ctx, l, 0.5, msg); err != nil {
			t.Fatal(err)
		}
	}
	l := f.claimInvestigation(t, j.ID)
	progress(l, "open the app")
	shots = append(shots, []int64{shot(l, "a1.png"), shot(l, "a2.png")})
	if _, err := f.queue.Fail(f.ctx, l, "flaky", true); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(f.ctx, `UPDATE jobs SET run_at = now() WHERE id = $1`, j.ID); err != nil {
		t.Fatal(err)
	}
	l = f.claimInvestigation(t, j.ID)
	first := shot(l, "b1.png")
	progress(l, "tap Settings")
	shots = append(shots, []int64{first, shot(l, "b2.png")})
	if _, err := f.queue.Fail(f.ctx, l, "no settings", false); err != nil {
		t.Fatal(err)
	}
	return j, shots
}

// replayOf finds attempt n's viewer on a job page.
func replayOf(t *testing.T, d htmltest.Doc, n int) map[string]string {
	t.Helper()
	for _, v := range d.All("replay") {
		if htmltest.Attr(v, "data-attempt") == strconv.Itoa(n) {
			out := map[string]string{"step": htmltest.Text(htmltest.ByTestID(v, "replay-step")[0]),
				"message": htmltest.Text(htmltest.ByTestID(v, "replay-message")[0]),
				"shot":    htmltest.Attr(htmltest.ByTestID(v, "replay-shot")[0], "src")}
			for _, id := range []string{"replay-prev", "replay-next"} {
				out[id] = htmltest.Attr(htmltest.ByTestID(v, id)[0], "href")
			}
			return out
		}
	}
	t.Fatalf("no replay of attempt %d", n)
	return nil
}

func TestJobPageReplay(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	j, shots := f.replayJob(t)
	page := jobPagePath(j.ID)
	art := func(id int64) string { return "/artifacts/" + strconv.FormatInt(id, 10) }

	t.Run("DeadLetterOpensAtItsLastStep", func(t *testing.T) {
		d := parseHTML(t, b.get(t, page).want(t, http.StatusOK))
		last := replayOf(t, d, 2)
		if last["step"] != "Step 2 of 2" || last["message"] != "tap Settings" || last["shot"] != art(shots[1][1]) ||
			last["replay-next"] != "" || last["replay-prev"] != page+"?attempt=2&step=1#replay-2" {
			t.Errorf("failed attempt of the dead job: %v", last)
		}
		// An earlier attempt opens at its start.
		first := replayOf(t, d, 1)
		if first["step"] != "Step 1 of 2" || first["message"] != "open the app" || first["replay-prev"] != "" {
			t.Errorf("earlier attempt: %v", first)
		}
		for i, dl := range d.All("attempt-bundle") {
			if want := "/api/v1/jobs/" + strconv.FormatInt(j.ID, 10) + "/attempts/" + strconv.Itoa(2-i) + "/bundle"; htmltest.Attr(dl, "href") != want {
				t.Errorf("download link %d = %q, want %q", i, htmltest.Attr(dl, "href"), want)
			}
		}
	})

	t.Run("StepsByLinks", func(t *testing.T) {
		// Each step pairs the screenshot with the latest progress of its
		// attempt at or before it: b1 came before "tap Settings".
		for _, tc := range []struct {
			query, step, message, shot string
		}{
			{"?attempt=2&step=1", "Step 1 of 2", "No progress message yet.", art(shots[1][0])},
			{"?attempt=1&step=2", "Step 2 of 2", "open the app", art(shots[0][1])},
			{"?attempt=1&step=9", "Step 2 of 2", "open the app", art(shots[0][1])}, // beyond the end: the last
		} {
			d := parseHTML(t, b.get(t, page+tc.query).want(t, http.StatusOK))
			n, _ := strconv.Atoi(tc.query[len("?attempt=") : len("?attempt=")+1])
			got := replayOf(t, d, n)
			if got["step"] != tc.step || got["message"] != tc.message || got["shot"] != tc.shot {
				t.Errorf("%s: %v", tc.query, got)
			}
		}
		d := parseHTML(t, b.get(t, page+"?attempt=2&step=1").want(t, http.StatusOK))
		if got := replayOf(t, d, 2)["replay-next"]; got != page+"?attempt=2&step=2#replay-2" {
			t.Errorf("next link %q", got)
		}
		if sel := d.All("replay"); htmltest.Attr(sel[0], "data-selected") != "true" || htmltest.HasAttr(sel[1], "data-selected") {
			t.Error("the chosen attempt's viewer is not the one marked selected")
		}
	})

	t.Run("BadStep", func(t *testing.T) {
		for _, q := range []string{"?step=abc", "?attempt=0", "?attempt=1&step=-2", "?step=99999999999"} {
			d := parseHTML(t, b.get(t, page+q).want(t, http.StatusBadRequest))
			if got := htmltest.Text(d.One(t, "problem")); !strings.Contains(got, "positive integer") {
				t.Errorf("%s: %q", q, got)
			}
		}
	})
}
