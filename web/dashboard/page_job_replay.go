package dashboard

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates"
)

// replayChoice is the step a job page's URL asks for, ?attempt=N&step=K;
// zero fields ask for nothing.
type replayChoice struct {
	attempt int32
	step    int
}

// replayQuery reads ?attempt and ?step; a value that is not a positive
// integer is a 400 (the page says so), one beyond the last step shows the
// last.
func replayQuery(c echo.Context) (replayChoice, string) {
	var ch replayChoice
	for _, p := range []struct {
		name string
		dst  func(int)
	}{
		{"attempt", func(n int) { ch.attempt = int32(n) }},
		{"step", func(n int) { ch.step = n }},
	} {
		raw := c.QueryParam(p.name)
		if raw == "" {
			continue
		}
		n, err := strconv.ParseInt(raw, 10, 32)
		if err != nil || n < 1 {
			return replayChoice{}, fmt.Sprintf("%s must be a positive integer (steps and attempts count from 1).", p.name)
		}
		p.dst(int(n))
	}
	return ch, ""
}

// jobPageReplay adds to each attempt of v its replay viewer and bundle
// link. Each viewer renders one step, so the page stays the same size
// however many steps there are. An attempt opens at its first step,
// except the one running (at its latest) and the failed last attempt of a
// dead job (at its last step, where it failed), unless the URL chooses.
// When the URL's choice is not one, it answers with a page and ok is
// false; err is then the handler's result.
func (h *Handler) jobPageReplay(c echo.Context, d queue.JobDetail, v *templates.JobPageView) (ok bool, err error) {
	choice, problem := replayQuery(c)
	if problem != "" {
		return false, h.jobProblem(c, http.StatusBadRequest, "Not a step", problem)
	}
	for i := range v.Attempts {
		a := &v.Attempts[i]
		a.Bundle = fmt.Sprintf("/api/v1/jobs/%d/attempts/%d/bundle", d.ID, a.Number)
		// The steps are the attempt's screenshots; the page has only the
		// newest events, so the shown step's message is read alone.
		var steps []queue.Artifact
		for _, x := range d.Artifacts {
			if x.Attempt == a.Number && x.Kind == queue.ArtifactScreenshot {
				steps = append(steps, x)
			}
		}
		if len(steps) == 0 {
			continue
		}
		step := 1
		if a.Outcome == "running" || (d.State == queue.StateDead && a.Number == d.Attempt) {
			step = len(steps)
		}
		selected := choice.attempt == a.Number
		if selected && choice.step > 0 {
			step = min(choice.step, len(steps))
		}
		shot := steps[step-1]
		message, err := h.read(c).ProgressBefore(c.Request().Context(), shot)
		if err != nil {
			return false, err
		}
		r := &templates.Replay{
			Attempt: a.Number, Step: step, Steps: len(steps), Selected: selected, ResumedAfter: a.ResumedAfter,
			Shot:    templates.JobArtifact{ID: shot.ID, Name: shot.Name, Size: jobPageSize(shot.Size), Step: step},
			Message: message, Elapsed: jobPageDuration(max(shot.CreatedAt.Sub(a.StartedAt), 0)),
		}
		if step > 1 {
			r.PrevURL = replayURL(d.ID, a.Number, step-1)
		}
		if step < len(steps) {
			r.NextURL = replayURL(d.ID, a.Number, step+1)
		}
		a.Replay = r
	}
	return true, nil
}

// replayURL is the job page at one step of one attempt.
func replayURL(jobID int64, attempt int32, step int) string {
	q := url.Values{"attempt": {strconv.Itoa(int(attempt))}, "step": {strconv.Itoa(step)}}
	return fmt.Sprintf("/jobs/%d?%s", jobID, q.Encode())
}
