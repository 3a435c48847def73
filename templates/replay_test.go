package templates_test

import (
	"strings"
	"testing"

	"github.com/leasehold/leasehold/templates"
	"github.com/leasehold/leasehold/templates/htmltest"
)

func replaySample(step, steps int) templates.Replay {
	r := templates.Replay{Attempt: 2, Step: step, Steps: steps, Shot: templates.JobArtifact{ID: 30 + int64(step), Name: "s.png"},
		Message: "tapped <Settings>", Elapsed: "4.2 s"}
	if step > 1 {
		r.PrevURL = "/jobs/42?attempt=2&step=" + string(rune('0'+step-1))
	}
	if step < steps {
		r.NextURL = "/jobs/42?attempt=2&step=" + string(rune('0'+step+1))
	}
	return r
}

func TestReplayViewerShowsOneStepWithLinks(t *testing.T) {
	t.Parallel()
	d := renderHTML(t, templates.ReplayViewer(replaySample(2, 3)))
	v := d.One(t, "replay")
	if htmltest.Attr(v, "id") != "replay-2" || htmltest.Attr(v, "data-step") != "2" || htmltest.Attr(v, "data-steps") != "3" {
		t.Errorf("viewer attributes: %v", v.Attr)
	}
	if got := htmltest.Text(d.One(t, "replay-step")); got != "Step 2 of 3" {
		t.Errorf("step %q", got)
	}
	if got := htmltest.Text(d.One(t, "replay-message")); got != "tapped <Settings>" {
		t.Errorf("message %q", got)
	}
	if got := htmltest.Text(d.One(t, "replay-elapsed")); got != "+4.2 s" {
		t.Errorf("elapsed %q", got)
	}
	if htmltest.Attr(d.One(t, "replay-shot"), "src") != "/artifacts/32" || htmltest.Attr(d.One(t, "replay-full"), "href") != "/artifacts/32" {
		t.Error("the shot or its full-size link is not the step's artifact")
	}
	for id, want := range map[string]string{"replay-prev": "/jobs/42?attempt=2&step=1", "replay-next": "/jobs/42?attempt=2&step=3"} {
		a := d.One(t, id)
		// A plain link without JavaScript; htmx swaps just this viewer.
		if a.Data != "a" || htmltest.Attr(a, "href") != want+"#replay-2" || htmltest.Attr(a, "hx-get") != want ||
			htmltest.Attr(a, "hx-target") != "#replay-2" || htmltest.Attr(a, "hx-select") != "#replay-2" {
			t.Errorf("%s: <%s %v>", id, a.Data, a.Attr)
		}
	}
	htmltest.NoInlineCode(t, d.Root)
}

func TestReplayViewerDisablesTheEnds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		step, steps    int
		prevOn, nextOn bool
	}{
		{1, 3, false, true},
		{3, 3, true, false},
		{1, 1, false, false},
	} {
		d := renderHTML(t, templates.ReplayViewer(replaySample(tc.step, tc.steps)))
		for id, on := range map[string]bool{"replay-prev": tc.prevOn, "replay-next": tc.nextOn} {
			n := d.One(t, id)
			link := n.Data == "a" && htmltest.HasAttr(n, "href")
			disabled := htmltest.Attr(n, "aria-disabled") == "true"
			if link != on || disabled == on {
				t.Errorf("step %d of %d: %s is <%s %v>, want enabled=%v", tc.step, tc.steps, id, n.Data, n.Attr, on)
			}
		}
	}
}

func TestJobPageShowsReplayAndDownload(t *testing.T) {
	t.Parallel()
	v := jobSample("dead")
	r := replaySample(2, 2)
	v.Attempts[0].Replay, v.Attempts[0].Bundle = &r, "/api/v1/jobs/42/attempts/2/bundle"
	v.Attempts[1].Bundle = "/api/v1/jobs/42/attempts/1/bundle"
	d := renderHTML(t, templates.JobPage(jobTestPage, v))
	att := d.All("attempt")
	if len(htmltest.ByTestID(att[0], "replay")) != 1 || len(htmltest.ByTestID(att[1], "replay")) != 0 {
		t.Error("the replay is not in the attempt that has it, alone")
	}
	for i, want := range []string{"/api/v1/jobs/42/attempts/2/bundle", "/api/v1/jobs/42/attempts/1/bundle"} {
		dl := htmltest.ByTestID(att[i], "attempt-bundle")
		if len(dl) != 1 || htmltest.Attr(dl[0], "href") != want || !htmltest.HasAttr(dl[0], "download") {
			t.Errorf("attempt %d download link: %v", i, dl)
		}
	}
	if !strings.Contains(htmltest.Text(att[0]), "Step 2 of 2") {
		t.Errorf("attempt: %s", htmltest.Text(att[0]))
	}
}

// An attempt that resumed from a checkpoint says after which step; one
// that started from the beginning says nothing of it.
func TestReplayViewerSaysWhereItResumed(t *testing.T) {
	t.Parallel()
	if d := renderHTML(t, templates.ReplayViewer(replaySample(1, 3))); len(d.All("replay-resumed")) != 0 {
		t.Error("a replay from the start shows a resumed badge")
	}
	r := replaySample(1, 3)
	seven := 7
	r.ResumedAfter = &seven
	d := renderHTML(t, templates.ReplayViewer(r))
	if got := htmltest.Text(d.One(t, "replay-resumed")); got != "resumed after step 7" {
		t.Errorf("resumed badge %q", got)
	}
}
