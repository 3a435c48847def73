package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates"
	"github.com/leasehold/leasehold/web/httpx"
)

// WorkersPage is GET /workers: the workers seen in the last day, each
// with its phone as its device-info command last described it, the jobs
// it holds now (the current one with its latest screenshot), its outcomes
// of the last 24 hours and why it does not claim, if it does not. The
// workers and their jobs are read in one snapshot. It polls itself; a
// poll keeps the live part of the page.
func (h *Handler) WorkersPage(c echo.Context) error {
	return h.renderWorkers(c, http.StatusOK, func(*templates.WorkersView) {})
}

// renderWorkers renders the workers page with status, after edit has
// said what a refused window form needs shown.
func (h *Handler) renderWorkers(c echo.Context, status int, edit func(*templates.WorkersView)) error {
	ctx := c.Request().Context()
	live := h.liveURL(0) // before reading: what changes after the read is replayed
	workers, err := h.read(c).WorkerStatuses(ctx, queue.WorkerListWindow, queue.OnlineWindow, queue.WorkerOutcomeWindow)
	if err != nil {
		return fmt.Errorf("workers page: %w", err)
	}
	// Each worker's current job is the one it took last.
	var current []int64
	for _, w := range workers {
		if len(w.Jobs) > 0 {
			current = append(current, w.Jobs[len(w.Jobs)-1].ID)
		}
	}
	shots, err := h.read(c).LatestScreenshots(ctx, current, 1)
	if err != nil {
		return fmt.Errorf("workers page: %w", err)
	}
	v := templates.WorkersView{Rows: make([]templates.WorkersRow, len(workers)), Window: "24 hours", WorkerCommand: listWorkerCommand(c)}
	for i, w := range workers {
		claiming, reason := w.Health()
		r := templates.WorkersRow{
			ID: w.ID, Device: listDeref(w.Device), Queues: w.Queues, Online: w.Online,
			LastSeen: w.LastSeen, Started: w.StartedAt, Running: w.Running,
			Jobs:      make([]templates.WorkersJob, len(w.Jobs)),
			Succeeded: w.Succeeded, Failed: w.Failed, LastJobID: w.LastJobID,
			Claiming: claiming, Reason: reason, InfoError: listDeref(w.InfoError), InfoAt: w.InfoAt,
		}
		if w.Info != nil {
			// Checked when it was stored; an unreadable one shows as none.
			if info, err := queue.ParseDeviceInfo(w.Info); err == nil {
				r.Phone = &templates.WorkersPhone{
					Model: info.Model, Android: info.Android, Adb: info.Adb, Battery: info.Battery, Charging: info.Charging,
					Serial: deviceString(w.Info, "serial"), Screen: deviceString(w.Info, "screen"),
				}
			}
		}
		for k, j := range w.Jobs {
			r.Jobs[k] = templates.WorkersJob{ID: j.ID, App: listDeref(j.App), Kind: j.Kind, Attempt: j.Attempt, LeaseUntil: j.LeaseUntil}
			if shot, ok := shots[j.ID]; ok && k == len(w.Jobs)-1 && len(shot.Artifacts) > 0 {
				a := shot.Artifacts[len(shot.Artifacts)-1]
				r.Jobs[k].Shot = &templates.WorkersShot{ID: a.ID, Name: a.Name, Step: shot.Total}
			}
		}
		v.Rows[i] = r
	}
	windows, err := h.queue.Availabilities(ctx)
	if err != nil {
		return fmt.Errorf("workers page: %w", err)
	}
	now := time.Now()
	for _, a := range windows {
		v.Windows = append(v.Windows, workersWindow(a, now))
	}
	edit(&v)
	page := h.page(c, "Workers", "workers")
	v.Pushed, page.Live = live != "", live
	return render(c, status, templates.Workers(page, v))
}

// deviceString is the string fact key of device info, "" if absent.
func deviceString(info []byte, key string) string {
	var m map[string]any
	if json.Unmarshal(info, &m) != nil {
		return ""
	}
	s, _ := m[key].(string)
	return s
}

// workersWindow is a window as the workers page lists it at now, its
// times in the window's own zone.
func workersWindow(a queue.Availability, now time.Time) templates.WorkersWindow {
	w := templates.WorkersWindow{Scope: a.Scope, Name: a.Name, Window: a.Window.Text}
	closes, open := a.Window.ClosesAt(now)
	w.Open = open
	switch {
	case open && closes.IsZero():
		w.State = "always open"
	case open:
		w.State = "open until " + closes.In(a.Window.Location()).Format("Mon 15:04 MST")
	default:
		opens := a.Window.NextOpen(now)
		w.State = "closed, opens " + opens.In(a.Window.Location()).Format("Mon 15:04 MST") + " (in " + untilText(opens.Sub(now)) + ")"
	}
	return w
}

// SetAvailability is POST /workers/availability: the window form.
func (h *Handler) SetAvailability(c echo.Context) error {
	typed := templates.WorkersWindow{
		Scope: c.FormValue("scope"), Name: strings.TrimSpace(c.FormValue("name")), Window: c.FormValue("window"),
	}
	_, err := h.queue.SetAvailability(c.Request().Context(), typed.Scope, typed.Name, typed.Window, "user:"+httpx.CurrentSession(c).Username)
	var ve *queue.ValidationError
	if errors.As(err, &ve) {
		return h.renderWorkers(c, http.StatusUnprocessableEntity, func(v *templates.WorkersView) {
			v.WindowTyped, v.WindowError = typed, "Not set: "+ve.Field+" "+ve.Message+"."
		})
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/workers#availability")
}

// DeleteAvailability is POST /workers/availability/delete: a window's
// Remove button.
func (h *Handler) DeleteAvailability(c echo.Context) error {
	err := h.queue.ClearAvailability(c.Request().Context(), c.FormValue("scope"), c.FormValue("name"))
	if errors.Is(err, queue.ErrNotFound) {
		return h.renderWorkers(c, http.StatusNotFound, func(v *templates.WorkersView) {
			v.WindowNotices = []templates.ListNotice{{Kind: "error", Text: "No such window: nothing removed."}}
		})
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/workers#availability")
}
