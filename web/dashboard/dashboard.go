// Package dashboard is Leasehold's web pages for people: sign-in, the
// overview, jobs, dead letters, workers, schedules, queues, users and
// the audit trail, and the event stream that keeps them current. Its
// handlers are methods of Handler; package web registers them, with the
// middleware of package httpx, in its one routes.go.
package dashboard

import (
	"cmp"
	"log/slog"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/auth"
	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/live"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/replica"
	"github.com/leasehold/leasehold/web/httpx"
)

// Config is what the pages need.
type Config struct {
	Queue *queue.Client
	// Reads, when set, is where the read-only pages read from (see
	// httpx.ReadReplica), and what the overview says of it.
	Reads *replica.Reads
	Auth  *auth.Service
	// Audit reads the audit trail for /audit: the primary's queries.
	Audit  *db.Queries
	Logger *slog.Logger
	// Live, when set, serves GET /events and makes pages update from it.
	// Without it pages poll.
	Live *live.Hub
	// EventsKeepAlive is how often an idle event stream sends a comment,
	// so that proxies keep it open (default 20 s).
	EventsKeepAlive time.Duration
	// MaxStreamsPerSession bounds the event streams one session may have
	// open at once, below the hub's global bound; more are answered 429
	// and their pages poll (default DefaultMaxStreamsPerSession).
	MaxStreamsPerSession int
}

// Handler serves the pages; its exported methods are echo handlers.
type Handler struct {
	queue           *queue.Client
	reads           *replica.Reads
	auth            *auth.Service
	audit           *db.Queries
	logger          *slog.Logger
	live            *live.Hub
	eventsKeepAlive time.Duration
	streams         *sessionStreams
}

// New returns the pages' handler.
func New(cfg Config) *Handler {
	return &Handler{
		queue:           cfg.Queue,
		reads:           cfg.Reads,
		auth:            cfg.Auth,
		audit:           cfg.Audit,
		logger:          cmp.Or(cfg.Logger, slog.Default()),
		live:            cfg.Live,
		eventsKeepAlive: cmp.Or(cfg.EventsKeepAlive, eventsKeepAlive),
		streams:         newSessionStreams(cmp.Or(cfg.MaxStreamsPerSession, DefaultMaxStreamsPerSession)),
	}
}

// read is the client c's page reads with: the replica's when the route
// allows it and the replica keeps up (httpx.ReadReplica), else the
// primary's. Whatever must read its own write uses h.queue.
func (h *Handler) read(c echo.Context) *queue.Client { return httpx.Reader(c, h.queue) }
