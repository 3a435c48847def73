package web

import (
	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/apitoken"
)

// routes registers every route of the server; read it top to bottom to
// know what the server answers and who may ask.
func (s *server) routes(e *echo.Echo) {
	// Open: load balancers, orchestrators and scrapers carry no token.
	e.GET("/health/live", s.healthLive)
	e.HEAD("/health/live", s.healthLive)
	e.GET("/health/ready", s.healthReady)
	e.HEAD("/health/ready", s.healthReady)
	e.GET("/metrics", s.metricsHandler())

	// JSON API for people and scripts: admin tokens only. Authentication is
	// per route rather than per group, so that an unknown /api/v1 path is
	// a plain 404 and the worker API can take other tokens.
	admin := s.requireToken(apitoken.RoleAdmin)
	api := e.Group("/api/v1")
	api.POST("/jobs", s.jobCreate, admin)
	api.POST("/jobs/batch", s.jobBatch, admin)
	api.GET("/jobs", s.jobList, admin)
	api.GET("/jobs/:id", s.jobGet, admin)
	api.POST("/jobs/:id/retry", s.jobRetry, admin)
	api.POST("/jobs/:id/cancel", s.jobCancel, admin)
	api.POST("/jobs/retry", s.jobRetryMany, admin)
	api.POST("/jobs/cancel", s.jobCancelMany, admin)
	api.GET("/stats", s.stats, admin)

	// Remote-worker API: worker tokens only; the token's name is the
	// worker's identity. Every write is fenced by the attempt's lease token.
	worker := s.requireToken(apitoken.RoleWorker)
	api.GET("/worker/whoami", s.workerWhoami, worker)
	api.POST("/worker/claim", s.workerClaim, worker)
	api.POST("/worker/presence", s.workerPresence, worker)
	api.POST("/worker/jobs/:id/heartbeat", s.workerHeartbeat, worker)
	api.POST("/worker/jobs/:id/progress", s.workerProgress, worker)
	api.POST("/worker/jobs/:id/complete", s.workerComplete, worker)
	api.POST("/worker/jobs/:id/fail", s.workerFail, worker)
	api.POST("/worker/jobs/:id/release", s.workerRelease, worker)
	api.POST("/worker/jobs/:id/cancelled", s.workerCancelled, worker)
	api.POST("/worker/jobs/:id/effects", s.workerEffect, worker)
	api.POST("/worker/jobs/:id/artifacts", s.workerArtifactUpload, worker)

	// Artifact bytes: admin tokens today; the dashboard issue adds sessions.
	e.GET("/artifacts/:id", s.artifactGet, admin)
	e.HEAD("/artifacts/:id", s.artifactGet, admin)

	// Later issues add their routes here:
	//   dashboard (sessions, CSRF): e.GET("/login", …), e.POST("/login", …),
	//     e.GET("/static/*", …), e.GET("/", …), e.GET("/jobs", …), e.GET("/jobs/:id", …),
	//     e.GET("/dead", …), e.GET("/jobs/new", …), e.GET("/workers", …)
}
