// Package dashboard is Leasehold's web pages for people: sign-in, the
// overview, jobs, dead letters, workers, schedules and queues, and the
// event stream that keeps them current. Its handlers are methods of
// Handler; package web registers them, with the middleware of package
// httpx, in its one routes.go.
package dashboard

import (
	"cmp"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/auth"
	"github.com/leasehold/leasehold/live"
	"github.com/leasehold/leasehold/queue"
)

// Config is what the pages need.
type Config struct {
	Queue  *queue.Client
	Auth   *auth.Service
	Logger *slog.Logger
	// Live, when set, serves GET /events and makes pages update from it.
	// Without it pages poll.
	Live *live.Hub
	// EventsKeepAlive is how often an idle event stream sends a comment,
	// so that proxies keep it open (default 20 s).
	EventsKeepAlive time.Duration
	// Presence is how the API tells which workers to show and whether
	// they are online; the pages tell alike.
	Presence Presence
}

// Presence is when a worker is shown, and whether it claims. The API
// decides it; the pages take its rules so that a page and the API never
// disagree about a worker.
type Presence struct {
	// Recent is how recently a worker must have been seen to be on the
	// overview.
	Recent time.Duration
	// Listed is how far back the workers page looks.
	Listed time.Duration
	// Online is how recently a worker must have been seen to be online.
	Online time.Duration
	// Outcomes is the window of a worker's outcome counts.
	Outcomes time.Duration
	// Health says whether a worker claims, and why not.
	Health func(queue.WorkerStatus) (claiming bool, reason string)
}

// Handler serves the pages; its exported methods are echo handlers.
type Handler struct {
	queue           *queue.Client
	auth            *auth.Service
	logger          *slog.Logger
	live            *live.Hub
	eventsKeepAlive time.Duration
	presence        Presence
}

// New returns the pages' handler.
func New(cfg Config) *Handler {
	return &Handler{
		queue:           cfg.Queue,
		auth:            cfg.Auth,
		logger:          cmp.Or(cfg.Logger, slog.Default()),
		live:            cfg.Live,
		eventsKeepAlive: cmp.Or(cfg.EventsKeepAlive, eventsKeepAlive),
		presence:        cfg.Presence,
	}
}
