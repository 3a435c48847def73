package web

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/role"
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

// Open is the need of a route that anyone may ask (health, metrics,
// sign-in, static files): no token, no session.
const Open role.Role = ""

// audience registers routes whose callers show who they are the same way
// (by: "token", "session", "session or token"; "" for open routes): auth
// makes the middleware that lets through only callers whose role allows
// need (nil: open routes); before runs ahead of it, after behind.
type audience struct {
	add           func(method, path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route
	by            string
	auth          func(need role.Role) []echo.MiddlewareFunc
	before, after []echo.MiddlewareFunc
}

// route registers method path with h, needing role need, and more
// middleware mw after the audience's. The route's name records what it
// needs (RouteNeed).
func (a audience) route(method, path string, need role.Role, h echo.HandlerFunc, mw ...echo.MiddlewareFunc) {
	chain := slices.Clone(a.before)
	if a.auth != nil {
		chain = append(chain, a.auth(need)...)
	}
	chain = append(append(chain, a.after...), mw...)
	a.add(method, path, h, chain...).Name = needPrefix + a.by + ":" + string(need)
}

const needPrefix = "leasehold-needs:"

// RouteNeed is what a route of New's handler needs, as routes declares
// it: the role (Open for none) and how the caller shows it (by: "token",
// "session", "session or token"; "" for an open route). ok is false for a
// route that declares nothing.
func RouteNeed(r echo.Route) (need role.Role, by string, ok bool) {
	rest, ok := strings.CutPrefix(r.Name, needPrefix)
	if !ok {
		return "", "", false
	}
	by, n, _ := strings.Cut(rest, ":")
	return role.Role(n), by, true
}

// routes registers every route of the server, each with the role it
// needs beside it; read it top to bottom to know what the server answers
// and who may ask. Viewers read, operators act on jobs, queues,
// schedules, rate limits and availability, admins manage users and read
// the audit trail, worker tokens speak the worker API (SPEC "Roles and
// audit").
func (s *server) routes(e *echo.Echo) {
	const (
		GET, HEAD, POST = http.MethodGet, http.MethodHead, http.MethodPost
		PUT, PATCH, DEL = http.MethodPut, http.MethodPatch, http.MethodDelete
	)
	// Open: load balancers, orchestrators and scrapers carry no token.
	open := audience{add: e.Add}
	open.route(GET, "/health/live", Open, s.healthLive)
	open.route(HEAD, "/health/live", Open, s.healthLive)
	open.route(GET, "/health/ready", Open, s.healthReady)
	open.route(HEAD, "/health/ready", Open, s.healthReady)
	open.route(GET, "/metrics", Open, s.metricsHandler())
	open.route(GET, "/api/v1/openapi.json", Open, s.openapiGet) // the API describes itself

	// JSON API for people and scripts: tokens of a person's role.
	// Authentication is per route rather than per group, so that an
	// unknown /api/v1 path is a plain 404 and the worker API can take
	// other tokens.
	api := e.Group("/api/v1")
	byToken := func(need role.Role) []echo.MiddlewareFunc {
		return []echo.MiddlewareFunc{httpx.RequireToken(s.tokens, need)}
	}
	a, people := s.admin, audience{add: api.Add, by: "token", auth: byToken}
	// Routes with `replica` may read from the read replica while it keeps
	// up (LEASEHOLD_READ_DATABASE_URL): lists, counts, pages. One job, and
	// anything a script reads back after writing it, stays on the primary.
	replica := httpx.ReadReplica(s.reads)
	people.route(POST, "/jobs", role.Operator, a.CreateJob)
	people.route(POST, "/jobs/batch", role.Operator, a.CreateJobBatch)
	people.route(GET, "/jobs", role.Viewer, a.ListJobs, replica)
	people.route(GET, "/jobs/:id", role.Viewer, a.GetJob)
	people.route(POST, "/jobs/:id/retry", role.Operator, a.RetryJob)
	people.route(POST, "/jobs/:id/cancel", role.Operator, a.CancelJob)
	people.route(POST, "/jobs/retry", role.Operator, a.RetryJobs)
	people.route(POST, "/jobs/cancel", role.Operator, a.CancelJobs)
	people.route(GET, "/stats", role.Viewer, a.Stats, replica)
	people.route(GET, "/failure-groups", role.Viewer, a.ListFailureGroups, replica)
	people.route(POST, "/schedules", role.Operator, a.CreateSchedule)
	people.route(GET, "/schedules", role.Viewer, a.ListSchedules, replica)
	people.route(GET, "/schedules/:name", role.Viewer, a.GetSchedule)
	people.route(PATCH, "/schedules/:name", role.Operator, a.UpdateSchedule)
	people.route(DEL, "/schedules/:name", role.Operator, a.DeleteSchedule)
	people.route(GET, "/queues", role.Viewer, a.ListQueues, replica)
	people.route(PATCH, "/queues/:name", role.Operator, a.PatchQueue)
	people.route(GET, "/workers", role.Viewer, a.ListWorkers, replica)
	people.route(GET, "/usage", role.Viewer, a.GetUsage, replica)
	people.route(GET, "/availability", role.Viewer, a.ListAvailability)
	people.route(PUT, "/availability/:scope/:name", role.Operator, a.PutAvailability)
	people.route(DEL, "/availability/:scope/:name", role.Operator, a.DeleteAvailability)
	people.route(GET, "/rate-limits", role.Viewer, a.ListRateLimits)
	people.route(PUT, "/rate-limits/:key", role.Operator, a.PutRateLimit)
	people.route(DEL, "/rate-limits/:key", role.Operator, a.DeleteRateLimit)
	// Who changed what: an admin's, from the primary (a script reads back
	// its own change).
	people.route(GET, "/audit", role.Admin, a.ListAudit)

	// Remote-worker API: worker tokens only; the token's name is the
	// worker's identity. Every write is fenced by the attempt's lease token.
	w, workers := s.worker, audience{add: api.Add, by: "token", auth: byToken}
	workers.route(GET, "/worker/whoami", role.Worker, w.Whoami)
	workers.route(POST, "/worker/claim", role.Worker, w.Claim)
	workers.route(POST, "/worker/presence", role.Worker, w.Presence)
	workers.route(PUT, "/worker/availability", role.Worker, w.Availability)
	workers.route(POST, "/worker/jobs/:id/heartbeat", role.Worker, w.Heartbeat)
	workers.route(POST, "/worker/jobs/:id/progress", role.Worker, w.Progress)
	workers.route(POST, "/worker/jobs/:id/checkpoint", role.Worker, w.Checkpoint)
	workers.route(POST, "/worker/jobs/:id/usage", role.Worker, w.Usage)
	workers.route(POST, "/worker/jobs/:id/complete", role.Worker, w.Complete)
	workers.route(POST, "/worker/jobs/:id/fail", role.Worker, w.Fail)
	workers.route(POST, "/worker/jobs/:id/release", role.Worker, w.Release)
	workers.route(POST, "/worker/jobs/:id/cancelled", role.Worker, w.Cancelled)
	workers.route(POST, "/worker/jobs/:id/effects", role.Worker, w.Effect)
	workers.route(POST, "/worker/jobs/:id/artifacts", role.Worker, w.UploadArtifact)

	// Artifact bytes: for signed-in people and tokens of a person's role.
	bySessionOrToken := func(need role.Role) []echo.MiddlewareFunc {
		return []echo.MiddlewareFunc{httpx.RequireSessionOrToken(s.auth, s.tokens, need)}
	}
	files := audience{add: e.Add, by: "session or token", auth: bySessionOrToken}
	files.route(GET, "/artifacts/:id", role.Viewer, a.GetArtifact)
	files.route(HEAD, "/artifacts/:id", role.Viewer, a.GetArtifact)
	filesAPI := audience{add: api.Add, by: "session or token", auth: bySessionOrToken}
	filesAPI.route(GET, "/jobs/:id/attempts/:n/bundle", role.Viewer, a.GetAttemptBundle) // the job page's Download link

	// Dashboard: sign-in is open; every page needs a session whose role
	// allows it, and every state-changing request must come from this
	// site with the session's CSRF token. Pages read from the replica
	// while it keeps up; a browser that changed something reads from the
	// primary for a few seconds (httpx.PinPrimary), so the page it lands
	// on shows it.
	open.route(GET, "/static/*", Open, echo.WrapHandler(http.StripPrefix("/static", static.Handler())))
	d := s.dashboard
	open.route(GET, "/login", Open, d.LoginPage, httpx.PageHeaders)
	open.route(POST, "/login", Open, d.Login, httpx.PageHeaders)
	// Middleware per route, not on the group: a group with middleware
	// catches every unknown path, which would send API clients to sign in
	// instead of answering 404/405.
	pages := e.Group("")
	bySession := func(need role.Role) []echo.MiddlewareFunc {
		return []echo.MiddlewareFunc{httpx.RequireSession(s.auth), httpx.RequireRole(need)}
	}
	page := audience{add: pages.Add, by: "session", auth: bySession,
		before: []echo.MiddlewareFunc{httpx.PageHeaders}, after: []echo.MiddlewareFunc{httpx.PinPrimary(s.reads)}}
	page.route(POST, "/logout", role.Viewer, d.Logout)
	page.route(GET, "/", role.Viewer, d.OverviewPage, replica)
	// Jobs: the list with its bulk actions, the dead letters, one job
	// with its actions, and the submit form. /jobs/new is a static route,
	// so echo matches it before /jobs/:id.
	page.route(GET, "/jobs", role.Viewer, d.JobsPage, replica)
	page.route(POST, "/jobs/retry", role.Operator, d.RetryJobs)
	page.route(POST, "/jobs/cancel", role.Operator, d.CancelJobs)
	page.route(GET, "/dead", role.Viewer, d.DeadPage, replica)
	page.route(GET, "/jobs/new", role.Operator, d.NewJobForm)
	page.route(POST, "/jobs/new", role.Operator, d.SubmitNewJob)
	page.route(GET, "/jobs/:id", role.Viewer, d.JobPage, replica)
	page.route(POST, "/jobs/:id/retry", role.Operator, d.RetryJob)
	page.route(POST, "/jobs/:id/cancel", role.Operator, d.CancelJob)
	page.route(GET, "/workers", role.Viewer, d.WorkersPage, replica)
	page.route(POST, "/workers/availability", role.Operator, d.SetAvailability)
	page.route(POST, "/workers/availability/delete", role.Operator, d.DeleteAvailability)
	// Schedules: the list, its create form, Pause and Resume.
	page.route(GET, "/schedules", role.Viewer, d.SchedulesPage, replica)
	page.route(POST, "/schedules", role.Operator, d.CreateSchedule)
	page.route(POST, "/schedules/:name/pause", role.Operator, d.PauseSchedule)
	page.route(POST, "/schedules/:name/resume", role.Operator, d.ResumeSchedule)
	// Queues: pause, resume, cap; rate limits; usage.
	page.route(GET, "/usage", role.Viewer, d.UsagePage, replica)
	page.route(GET, "/queues", role.Viewer, d.QueuesPage, replica)
	page.route(POST, "/queues/:name/pause", role.Operator, d.PauseQueue)
	page.route(POST, "/queues/:name/resume", role.Operator, d.ResumeQueue)
	page.route(POST, "/queues/:name/limit", role.Operator, d.SetQueueLimit)
	page.route(POST, "/rate-limits", role.Operator, d.SetRateLimit)
	// Users: an admin's (the same as `server user …`).
	page.route(GET, "/users", role.Admin, d.UsersPage)
	page.route(POST, "/users", role.Admin, d.AddUser)
	page.route(POST, "/users/:name/role", role.Admin, d.SetUserRole)
	page.route(POST, "/users/:name/remove", role.Admin, d.RemoveUser)
	// Who changed what (GET /api/v1/audit's page): an admin's.
	page.route(GET, "/audit", role.Admin, d.AuditPage)
	// What changed, pushed to the pages above (Server-Sent Events).
	page.route(GET, "/events", role.Viewer, d.Events)
}
