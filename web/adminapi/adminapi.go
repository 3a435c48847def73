// Package adminapi is Leasehold's JSON API for people and scripts (admin
// tokens): jobs, their attempts' bundles and artifacts, schedules, queues,
// workers, stats and the audit trail. Its handlers are methods of
// Handler; package web registers them, with the middleware of package
// httpx, in its one routes.go. Handlers translate between HTTP and
// package queue, which decides.
package adminapi

import (
	"cmp"
	"log/slog"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/artifact"
	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web/httpx"
)

// Config is what the admin API needs.
type Config struct {
	Queue *queue.Client
	// Artifacts serves artifacts and attempt bundles; nil answers 503 on
	// those routes.
	Artifacts *artifact.Store
	// Audit reads the audit trail: the primary's queries.
	Audit  *db.Queries
	Logger *slog.Logger
}

// Handler serves the admin API; its exported methods are echo handlers.
type Handler struct {
	queue     *queue.Client
	artifacts *artifact.Store
	audit     *db.Queries
	logger    *slog.Logger
}

// New returns the admin API's handler.
func New(cfg Config) *Handler {
	return &Handler{queue: cfg.Queue, artifacts: cfg.Artifacts, audit: cfg.Audit, logger: cmp.Or(cfg.Logger, slog.Default())}
}

// read is the client c's answer reads with: the replica's on the routes
// that allow it while it keeps up (httpx.ReadReplica), else the
// primary's.
func (h *Handler) read(c echo.Context) *queue.Client { return httpx.Reader(c, h.queue) }
