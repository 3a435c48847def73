// Package web is Leasehold's HTTP server: health probes, Prometheus
// metrics and the OpenAPI description here; the admin API (package
// adminapi), the worker API (package workerapi) and the dashboard's pages
// (package dashboard), all registered in routes.go with the middleware of
// package httpx. Handlers translate between HTTP and the queue package,
// which alone changes job state.
package web

import (
	"cmp"
	"log/slog"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/artifact"
	"github.com/leasehold/leasehold/auth"
	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/live"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/replica"
	"github.com/leasehold/leasehold/web/adminapi"
	"github.com/leasehold/leasehold/web/dashboard"
	"github.com/leasehold/leasehold/web/httpx"
	"github.com/leasehold/leasehold/web/workerapi"
)

// Config is what the HTTP server needs.
type Config struct {
	Pool   *pgxpool.Pool
	Queue  *queue.Client
	Tokens *apitoken.Store
	Logger *slog.Logger
	// ArtifactsDir is where screenshots are stored; /health/ready checks
	// that it is writable.
	ArtifactsDir string
	// Metrics is shared with the server's reaper; nil makes a new one.
	Metrics *Metrics
	// Artifacts stores and serves screenshots and text artifacts; nil
	// answers 503 on the artifact routes. When set, /health/ready checks
	// its storage instead of ArtifactsDir.
	Artifacts *artifact.Store
	// Jobs, when set and running, lets remote workers' claims wait for new
	// jobs (long polling) instead of coming back empty at once.
	Jobs *queue.JobNotifier
	// Reads, when set, sends the read-only pages and admin lists to a
	// read replica while it keeps up (LEASEHOLD_READ_DATABASE_URL); nil:
	// everything reads Queue.
	Reads *replica.Reads
	// Auth signs people in to the dashboard.
	Auth *auth.Service
	// Live, when set, serves GET /events and makes pages update from it;
	// feed it from Jobs (queue.JobNotifier.WatchChanges). Without it pages
	// poll.
	Live *live.Hub
	// EventsKeepAlive is how often an idle event stream sends a comment,
	// so that proxies keep it open (default 20 s).
	EventsKeepAlive time.Duration
	// ReadTimeout bounds how long a request may take to send its body
	// (default 20 s); UploadReadTimeout, an artifact upload's (default
	// 10 min). Once a body is read the handler may take as long as it
	// needs: long polls wait, answers are not bounded.
	ReadTimeout, UploadReadTimeout time.Duration
	// RequestTimeout bounds how long a request may take, from its
	// headers to its answer (default 10 s; negative: unbounded): a
	// database that does not answer then costs a request at most this,
	// answered 503. A claim may take its wait and this; event streams and
	// artifact downloads are not bounded.
	RequestTimeout time.Duration
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the client (LEASEHOLD_TRUSTED_PROXIES); none: the TCP peer is.
	TrustedProxies []netip.Prefix
	// Handover is the hand-over deadline of remote workers' claims (SPEC
	// lease rule 11, LEASEHOLD_HANDOVER); zero is queue.DefaultHandover.
	Handover time.Duration
	// MaxClaimsPerToken bounds the claims one worker token may have open
	// at once (LEASEHOLD_MAX_CLAIMS_PER_TOKEN; default
	// workerapi.DefaultMaxClaimsPerToken); more are answered 429.
	MaxClaimsPerToken int
	// Presence, when set and running, records remote workers' presence
	// in batches (one statement for every report of an interval); nil
	// writes each report on its own.
	Presence *queue.PresenceBatch
	// MaxStreamsPerSession bounds the event streams one dashboard session
	// may have open at once (LEASEHOLD_MAX_STREAMS_PER_SESSION; default
	// dashboard.DefaultMaxStreamsPerSession); more are answered 429.
	MaxStreamsPerSession int
}

// server holds the dependencies of every handler.
type server struct {
	pool         *pgxpool.Pool
	queue        *queue.Client
	tokens       *apitoken.Store
	logger       *slog.Logger
	artifactsDir string
	metrics      *Metrics
	auth         *auth.Service
	artifacts    *artifact.Store
	reads        *replica.Reads
	// The handlers of each audience: scripts, remote workers, people.
	admin     *adminapi.Handler
	worker    *workerapi.Handler
	dashboard *dashboard.Handler
	// readTimeout and uploadReadTimeout bound how long a body may take.
	readTimeout, uploadReadTimeout time.Duration
	// requestTimeout bounds a request (httpx.RequestDeadline).
	requestTimeout time.Duration
	// versionCheck lets one schema-version check run at a time: the check
	// waits on golang-migrate's lock, and piled-up probes would hold pool
	// connections while a migration runs.
	versionCheck chan struct{}
}

// Read deadlines of request bodies (Config.ReadTimeout,
// Config.UploadReadTimeout); see httpx.BodyDeadline.
const (
	defaultReadTimeout       = 20 * time.Second
	defaultUploadReadTimeout = 10 * time.Minute
	// DefaultRequestTimeout is Config.RequestTimeout's default: under
	// the 15 s a client of a frozen database should wait at most.
	DefaultRequestTimeout = 10 * time.Second
)

// New returns the HTTP handler of Leasehold, with every route of routes.go.
func New(cfg Config) *echo.Echo {
	s := &server{
		pool:         cfg.Pool,
		queue:        cfg.Queue,
		tokens:       cfg.Tokens,
		logger:       cmp.Or(cfg.Logger, slog.Default()),
		artifactsDir: cfg.ArtifactsDir,
		metrics:      cfg.Metrics,
		auth:         cfg.Auth,
		artifacts:    cfg.Artifacts,
		reads:        cfg.Reads,
		versionCheck: make(chan struct{}, 1),

		readTimeout:       cmp.Or(cfg.ReadTimeout, defaultReadTimeout),
		uploadReadTimeout: cmp.Or(cfg.UploadReadTimeout, defaultUploadReadTimeout),
		requestTimeout:    cmp.Or(cfg.RequestTimeout, DefaultRequestTimeout),
	}
	if s.metrics == nil {
		s.metrics = NewMetrics(cfg.Queue)
	}
	// The audit trail is read from the primary: whoever changed something
	// finds its row at once.
	trail := db.New(cfg.Pool)
	s.admin = adminapi.New(adminapi.Config{Queue: cfg.Queue, Artifacts: cfg.Artifacts, Audit: trail, Logger: s.logger})
	s.worker = workerapi.New(workerapi.Config{Queue: cfg.Queue, Artifacts: cfg.Artifacts, Jobs: cfg.Jobs, Handover: cfg.Handover,
		MaxClaimsPerToken: cfg.MaxClaimsPerToken, Presence: cfg.Presence})
	s.dashboard = dashboard.New(dashboard.Config{
		Queue: cfg.Queue, Reads: cfg.Reads, Auth: cfg.Auth, Audit: trail, Logger: s.logger,
		Live: cfg.Live, EventsKeepAlive: cfg.EventsKeepAlive, MaxStreamsPerSession: cfg.MaxStreamsPerSession,
	})
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.IPExtractor = ipExtractor(cfg.TrustedProxies)
	// Used when the caller starts the server with e.Start: slow clients
	// must not hold connections open forever.
	e.Server.ReadHeaderTimeout = 10 * time.Second
	e.Server.IdleTimeout = 2 * time.Minute
	e.HTTPErrorHandler = httpx.ErrorHandler(s.logger)
	// Logging wraps recovery, so a panic is logged with its 500.
	e.Use(httpx.LogRequests(s.logger), httpx.RecoverPanics(s.logger),
		httpx.BodyDeadline(s.readTimeout, s.uploadReadTimeout, uploadRoutes),
		httpx.RequestDeadline(s.requestTimeout, s.requestBounds()))
	s.routes(e)
	return e
}
