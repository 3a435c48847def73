package web

import (
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/templates"
)

// How far back the workers page looks, and how recently a worker must
// have been seen to count as online (workers report every few seconds).
const (
	workersPageWindow  = 24 * time.Hour
	workerOnlineWindow = time.Minute
)

// workersPage is GET /workers: the workers seen in the last day, each
// with the jobs it holds now, read in one snapshot. It polls itself; a
// poll keeps the live part of the page.
func (s *server) workersPage(c echo.Context) error {
	live := s.liveURL(0) // before reading: what changes after the read is replayed
	workers, err := s.queue.WorkerStatuses(c.Request().Context(), workersPageWindow, workerOnlineWindow)
	if err != nil {
		return fmt.Errorf("workers page: %w", err)
	}
	v := templates.WorkersView{Rows: make([]templates.WorkersRow, len(workers)), Window: "24 hours", WorkerCommand: listWorkerCommand(c)}
	for i, w := range workers {
		r := templates.WorkersRow{
			ID: w.ID, Device: listDeref(w.Device), Queues: w.Queues, Online: w.Online,
			LastSeen: w.LastSeen, Started: w.StartedAt, Running: w.Running,
			Jobs: make([]templates.WorkersJob, len(w.Jobs)),
		}
		for k, j := range w.Jobs {
			r.Jobs[k] = templates.WorkersJob{ID: j.ID, App: listDeref(j.App), Kind: j.Kind, Attempt: j.Attempt, LeaseUntil: j.LeaseUntil}
		}
		v.Rows[i] = r
	}
	page := s.page(c, "Workers", "workers")
	v.Pushed, page.Live = live != "", live
	return render(c, http.StatusOK, templates.Workers(page, v))
}
