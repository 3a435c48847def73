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

	// Later issues add their routes here:
	//   remote-worker API, worker tokens:
	//     worker := s.requireToken(apitoken.RoleWorker)
	//     api.POST("/worker/claim", …, worker), api.POST("/worker/jobs/:id/heartbeat", …, worker), …
	//   artifacts (session or admin token): e.GET("/artifacts/:id", …)
	//   dashboard (sessions, CSRF): e.GET("/login", …), e.POST("/login", …),
	//     e.GET("/static/*", …), e.GET("/", …), e.GET("/jobs", …), e.GET("/jobs/:id", …),
	//     e.GET("/dead", …), e.GET("/jobs/new", …), e.GET("/workers", …)
}
