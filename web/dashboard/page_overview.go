package dashboard

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates"
)

// overviewDeadLetters is how many of the latest dead letters the overview
// shows.
const overviewDeadLetters = 5

// OverviewPage is GET /: jobs per state from the maintained counters
// (never a count over jobs), the latest dead letters and the workers
// online. It refreshes itself when told by its event stream, or polls
// (see templates.OverviewLive).
func (h *Handler) OverviewPage(c echo.Context) error {
	ctx := c.Request().Context()
	live := h.liveURL(0) // before reading: what changes after the read is replayed
	counts, err := h.queue.Counts(ctx)
	if err != nil {
		return fmt.Errorf("overview: %w", err)
	}
	dead, err := h.queue.RecentDead(ctx, overviewDeadLetters)
	if err != nil {
		return fmt.Errorf("overview: %w", err)
	}
	workers, err := h.queue.Workers(ctx, queue.OnlineWindow)
	if err != nil {
		return fmt.Errorf("overview: %w", err)
	}
	storage, err := h.queue.ArtifactStorage(ctx)
	if err != nil {
		return fmt.Errorf("overview: %w", err)
	}
	v := templates.OverviewView{
		ArtifactFiles: storage.ArtifactFiles,
		ArtifactBytes: storage.ArtifactBytes,
		Stats:         make([]templates.OverviewStat, len(queue.States)),
		Dead:          make([]templates.OverviewDead, len(dead)),
		Workers:       make([]templates.OverviewWorker, len(workers)),
		WorkerCommand: listWorkerCommand(c),
	}
	for i, st := range queue.States {
		v.Stats[i] = templates.OverviewStat{State: string(st), Count: counts.Jobs[st]}
		v.Total += counts.Jobs[st]
	}
	for i, j := range dead {
		v.Dead[i] = templates.OverviewDead{
			ID: j.ID, App: listPayloadApp(j.Payload), Kind: j.Kind, Error: listErrorLine(j.LastError), At: j.FinishedAt,
		}
	}
	for i, w := range workers {
		v.Workers[i] = templates.OverviewWorker{ID: w.ID, Device: listDeref(w.Device), Running: w.Running, LastSeen: w.LastSeen}
	}
	page := h.page(c, "Overview", "overview")
	v.Pushed, page.Live = live != "", live
	return render(c, http.StatusOK, templates.Overview(page, v))
}
