package web

import (
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/static"
	"github.com/leasehold/leasehold/web/httpx"
	"github.com/leasehold/leasehold/web/workerapi"
)

// uploadRoutes are the routes whose bodies may take long to arrive (a
// screenshot sent from a home uplink): Config.UploadReadTimeout bounds
// them instead of Config.ReadTimeout.
var uploadRoutes = map[string]bool{"/api/v1/worker/jobs/:id/artifacts": true}

// requestBounds are the routes whose requests take longer than
// Config.RequestTimeout by design (httpx.RequestDeadline): a claim waits
// for a job, an upload may arrive slowly; 0 leaves streams unbounded:
// live updates and artifact downloads of any size.
func (s *server) requestBounds() map[string]time.Duration {
	return map[string]time.Duration{
		"/api/v1/worker/claim":                workerapi.MaxClaimWait + s.requestTimeout,
		"/api/v1/worker/jobs/:id/artifacts":   s.uploadReadTimeout + s.requestTimeout,
		"/artifacts/:id":                      0,
		"/api/v1/jobs/:id/attempts/:n/bundle": 0,
		"/events":                             0,
	}
}

// routes registers every route of the server; read it top to bottom to
// know what the server answers and who may ask.
func (s *server) routes(e *echo.Echo) {
	// Open: load balancers, orchestrators and scrapers carry no token.
	e.GET("/health/live", s.healthLive)
	e.HEAD("/health/live", s.healthLive)
	e.GET("/health/ready", s.healthReady)
	e.HEAD("/health/ready", s.healthReady)
	e.GET("/metrics", s.metricsHandler())
	e.GET("/api/v1/openapi.json", s.openapiGet) // the API describes itself

	// JSON API for people and scripts: admin tokens only. Authentication is
	// per route rather than per group, so that an unknown /api/v1 path is
	// a plain 404 and the worker API can take other tokens.
	a, admin := s.admin, httpx.RequireToken(s.tokens, apitoken.RoleAdmin)
	// Routes with `replica` may read from the read replica while it keeps
	// up (LEASEHOLD_READ_DATABASE_URL): lists, counts, pages. One job, and
	// anything a script reads back after writing it, stays on the primary.
	replica := httpx.ReadReplica(s.reads)
	api := e.Group("/api/v1")
	api.POST("/jobs", a.CreateJob, admin)
	api.POST("/jobs/batch", a.CreateJobBatch, admin)
	api.GET("/jobs", a.ListJobs, admin, replica)
	api.GET("/jobs/:id", a.GetJob, admin)
	api.POST("/jobs/:id/retry", a.RetryJob, admin)
	api.POST("/jobs/:id/cancel", a.CancelJob, admin)
	api.POST("/jobs/retry", a.RetryJobs, admin)
	api.POST("/jobs/cancel", a.CancelJobs, admin)
	api.GET("/stats", a.Stats, admin, replica)
	api.POST("/schedules", a.CreateSchedule, admin)
	api.GET("/schedules", a.ListSchedules, admin, replica)
	api.GET("/schedules/:name", a.GetSchedule, admin)
	api.PATCH("/schedules/:name", a.UpdateSchedule, admin)
	api.DELETE("/schedules/:name", a.DeleteSchedule, admin)
	api.GET("/queues", a.ListQueues, admin, replica)
	api.PATCH("/queues/:name", a.PatchQueue, admin)
	api.GET("/workers", a.ListWorkers, admin, replica)
	api.GET("/usage", a.GetUsage, admin, replica)
	api.GET("/availability", a.ListAvailability, admin)
	api.PUT("/availability/:scope/:name", a.PutAvailability, admin)
	api.DELETE("/availability/:scope/:name", a.DeleteAvailability, admin)
	api.GET("/rate-limits", a.ListRateLimits, admin)
	api.PUT("/rate-limits/:key", a.PutRateLimit, admin)
	api.DELETE("/rate-limits/:key", a.DeleteRateLimit, admin)

	// Remote-worker API: worker tokens only; the token's name is the
	// worker's identity. Every write is fenced by the attempt's lease token.
	w, worker := s.worker, httpx.RequireToken(s.tokens, apitoken.RoleWorker)
	api.GET("/worker/whoami", w.Whoami, worker)
	api.POST("/worker/claim", w.Claim, worker)
	api.POST("/worker/presence", w.Presence, worker)
	api.PUT("/worker/availability", w.Availability, worker)
	api.POST("/worker/jobs/:id/heartbeat", w.Heartbeat, worker)
	api.POST("/worker/jobs/:id/progress", w.Progress, worker)
	api.POST("/worker/jobs/:id/checkpoint", w.Checkpoint, worker)
	api.POST("/worker/jobs/:id/usage", w.Usage, worker)
	api.POST("/worker/jobs/:id/complete", w.Complete, worker)
	api.POST("/worker/jobs/:id/fail", w.Fail, worker)
	api.POST("/worker/jobs/:id/release", w.Release, worker)
	api.POST("/worker/jobs/:id/cancelled", w.Cancelled, worker)
	api.POST("/worker/jobs/:id/effects", w.Effect, worker)
	api.POST("/worker/jobs/:id/artifacts", w.UploadArtifact, worker)

	// Artifact bytes: for signed-in people and admin tokens.
	artifactAccess := httpx.RequireSessionOrToken(s.auth, s.tokens, apitoken.RoleAdmin)
	e.GET("/artifacts/:id", a.GetArtifact, artifactAccess)
	e.HEAD("/artifacts/:id", a.GetArtifact, artifactAccess)
	api.GET("/jobs/:id/attempts/:n/bundle", a.GetAttemptBundle, artifactAccess) // the job page's Download link

	// Dashboard: sign-in is open; every page needs a session, and every
	// state-changing request must come from this site with the session's
	// CSRF token. Pages read from the replica while it keeps up; a
	// browser that changed something reads from the primary for a few
	// seconds (httpx.PinPrimary), so the page it lands on shows it.
	e.GET("/static/*", echo.WrapHandler(http.StripPrefix("/static", static.Handler())))
	d := s.dashboard
	e.GET("/login", d.LoginPage, httpx.PageHeaders)
	e.POST("/login", d.Login, httpx.PageHeaders)
	// Middleware per route, not on the group: a group with middleware
	// catches every unknown path, which would send API clients to sign in
	// instead of answering 404/405.
	pages := e.Group("")
	page := []echo.MiddlewareFunc{httpx.PageHeaders, httpx.RequireSession(s.auth), httpx.PinPrimary(s.reads)}
	read := append(slices.Clone(page), replica)
	pages.POST("/logout", d.Logout, page...)
	pages.GET("/", d.OverviewPage, read...)
	// Jobs: the list with its bulk actions, the dead letters, one job
	// with its actions, and the submit form. /jobs/new is a static route,
	// so echo matches it before /jobs/:id.
	pages.GET("/jobs", d.JobsPage, read...)
	pages.POST("/jobs/retry", d.RetryJobs, page...)
	pages.POST("/jobs/cancel", d.CancelJobs, page...)
	pages.GET("/dead", d.DeadPage, read...)
	pages.GET("/jobs/new", d.NewJobForm, page...)
	pages.POST("/jobs/new", d.SubmitNewJob, page...)
	pages.GET("/jobs/:id", d.JobPage, read...)
	pages.POST("/jobs/:id/retry", d.RetryJob, page...)
	pages.POST("/jobs/:id/cancel", d.CancelJob, page...)
	pages.GET("/workers", d.WorkersPage, read...)
	pages.POST("/workers/availability", d.SetAvailability, page...)
	pages.POST("/workers/availability/delete", d.DeleteAvailability, page...)
	// Schedules: the list, its create form, Pause and Resume.
	pages.GET("/schedules", d.SchedulesPage, read...)
	pages.POST("/schedules", d.CreateSchedule, page...)
	pages.POST("/schedules/:name/pause", d.PauseSchedule, page...)
	pages.POST("/schedules/:name/resume", d.ResumeSchedule, page...)
	// Queues: pause, resume, cap.
	pages.GET("/usage", d.UsagePage, read...)
	pages.GET("/queues", d.QueuesPage, read...)
	pages.POST("/queues/:name/pause", d.PauseQueue, page...)
	pages.POST("/queues/:name/resume", d.ResumeQueue, page...)
	pages.POST("/queues/:name/limit", d.SetQueueLimit, page...)
	pages.POST("/rate-limits", d.SetRateLimit, page...)
	// What changed, pushed to the pages above (Server-Sent Events).
	pages.GET("/events", d.Events, page...)
}
