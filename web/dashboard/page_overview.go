package dashboard

import (
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates"
	"github.com/leasehold/leasehold/web/httpx"
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
	counts, err := h.read(c).Counts(ctx)
	if err != nil {
		return fmt.Errorf("overview: %w", err)
	}
	dead, err := h.read(c).RecentDead(ctx, overviewDeadLetters)
	if err != nil {
		return fmt.Errorf("overview: %w", err)
	}
	workers, err := h.read(c).Workers(ctx, queue.OnlineWindow)
	if err != nil {
		return fmt.Errorf("overview: %w", err)
	}
	storage, err := h.read(c).ArtifactStorage(ctx)
	if err != nil {
		return fmt.Errorf("overview: %w", err)
	}
	usage, err := h.read(c).UsageTotals(ctx)
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
		Usage:         overviewUsage(usage),
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
	v.ReadFrom, v.FromReplica = h.readFrom(c)
	page := h.page(c, "Overview", "overview")
	v.Pushed, page.Live = live != "", live
	return render(c, http.StatusOK, templates.Overview(page, v))
}

// readFrom says where c's page was read, when there is a read replica:
// "replica, lag 0s", or why the primary was ("primary: replica lag 7s
// (more than 5s)", "primary: this browser just made a change").
func (h *Handler) readFrom(c echo.Context) (string, bool) {
	if h.reads == nil {
		return "", false
	}
	s := h.reads.Status()
	switch {
	case !s.Configured:
		return "", false
	case httpx.FromReplica(c):
		return "replica, lag " + s.Lag.Round(time.Second).String(), true
	case s.Reading:
		return "primary: this browser just made a change", false
	}
	return "primary: " + s.Why, false
}
