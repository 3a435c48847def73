// Command server runs Leasehold: the JSON API, health and metrics, and the
// reaper that takes back expired leases. Subcommands manage the schema and
// API tokens.
package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/user"
	"runtime/debug"
	"time"
	// Schedules name IANA timezones: the server reads them the same on a
	// machine without a zoneinfo database (Windows, a scratch image).
	_ "time/tzdata"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/audit"
	"github.com/leasehold/leasehold/auth"
	"github.com/leasehold/leasehold/cmd/internal/cli"
	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/db/pgcluster"
	"github.com/leasehold/leasehold/live"
	"github.com/leasehold/leasehold/maintenance"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/replica"
	"github.com/leasehold/leasehold/web"
	"github.com/leasehold/leasehold/web/connlimit"
	"github.com/leasehold/leasehold/web/dashboard"
	"github.com/leasehold/leasehold/web/workerapi"
)

const usage = `usage:
  server [flags]                                   run the server
  server migrate up|down|version                   manage the schema (down is one step)
  server token create --role admin|operator|viewer|worker --name NAME
  server token list
  server token revoke NAME
  server user add --name NAME --role viewer|operator|admin --password P
                                                   a dashboard user (--password - reads it from stdin)
  server user set-role --name NAME --role viewer|operator|admin
  server user remove --name NAME                   also signs it out; the last admin stays
  server user list
  server prune [--dry-run] [--file-grace 1h]       one retention pass now; print what it removed
  server artifacts migrate --to URL [--artifacts FROM]
                                                   copy every artifact file to other storage (s3://bucket/prefix), verified; resumable
  server --version                                 print the version and commit

The database is $DATABASE_URL; when it is unset, a private PostgreSQL
cluster in ./.leasehold/pg. Every flag can also be set as LEASEHOLD_<FLAG>.`

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "migrate":
			return withDatabase("migrate", func(ctx context.Context, pool *pgxpool.Pool, out io.Writer) error {
				return migrateCmd(pool, out, args[1:])
			})
		case "token":
			return withDatabase("token", func(ctx context.Context, pool *pgxpool.Pool, out io.Writer) error {
				return tokenCmd(ctx, pool, out, args[1:])
			})
		case "user":
			return withDatabase("user", func(ctx context.Context, pool *pgxpool.Pool, out io.Writer) error {
				return userCmd(ctx, pool, out, os.Stdin, args[1:])
			})
		case "prune":
			return pruneCmd(args[1:])
		case "artifacts":
			return artifactsCmd(args[1:])
		case "help":
			return serve([]string{"--help"})
		case "version", "-version", "--version":
			fmt.Println(cli.Version("leasehold-server"))
			return nil
		}
	}
	return serve(args)
}

func serve(args []string) error {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprintf(fs.Output(), "%s\n\nflags:\n", usage); fs.PrintDefaults() }
	var (
		addr      = fs.String("addr", "127.0.0.1:8080", "listen address")
		migrate   = fs.Bool("migrate", true, "apply migrations at start")
		artifacts = fs.String("artifacts", "./.leasehold/artifacts", cli.ArtifactsUsage)
		logFormat = fs.String("log-format", "text", "log format: text or json")
		demo      = fs.Bool("demo", false, "submit a few simulated investigations at start (once)")
		maxConns  = fs.Int("max-connections", 4096, "most client connections open at once; more wait to be accepted")
		perClient = fs.Int("max-connections-per-client", 0,
			"most connections one client address may have open; more are closed at once (0: half of --max-connections, -1: no bound; trusted proxies are not bound)")
		perToken = fs.Int("max-claims-per-token", workerapi.DefaultMaxClaimsPerToken,
			"most claims one worker token may have open at once; more are answered 429 (a worker needs one)")
		perSession = fs.Int("max-streams-per-session", dashboard.DefaultMaxStreamsPerSession,
			"most live-update streams one dashboard session may have open; more are answered 429 and their pages poll")
		handover = fs.Duration("handover", queue.DefaultHandover, "how long a job claimed over the worker API waits for its worker's first heartbeat before it is given to another worker, uncounted (0.5s to 1m)")
		reqTime  = fs.Duration("request-timeout", web.DefaultRequestTimeout,
			"how long a request may take before it is answered 503, 0 for no bound (claims may wait longer, event streams and downloads are not bounded)")
		readURL = fs.String("read-database-url", "",
			"a streaming read replica of the database: the dashboard's pages and the admin API's lists read from it while it keeps up (default: none, everything reads the primary)")
		readMaxLag = fs.Duration("read-max-lag", replica.DefaultMaxLag,
			"how far the read replica may be behind the primary and still be read; past it, or while it does not answer, the primary is read")
		timeouts cli.DatabaseTimeouts
	)
	timeouts.Register(fs)
	retention := maintenance.DefaultRetention()
	fs.Var(&retention, "retention", "how long finished jobs are kept: STATE=DURATION,... (Go durations or Nd), or off")
	auditRetention := maintenance.AuditRetention(audit.DefaultRetention)
	fs.Var(&auditRetention, "audit-retention", "how long the audit trail keeps a row: a Go duration or Nd, or off")
	webhookURL := fs.String("webhook-url", "", "POST webhook events to this URL (needs --webhook-secret)")
	webhookSecret := fs.String("webhook-secret", "", "HMAC-SHA256 key of the Leasehold-Signature header, at least 16 characters")
	webhookEvents := fs.String("webhook-events", "", "comma-separated events to send: job.dead, job.failed, job.succeeded, worker.offline (default job.dead)")
	webhookConcurrency := fs.Int("webhook-concurrency", maintenance.DefaultWebhookConcurrency, "most webhook deliveries under way at once (1 to 256); a slow receiver holds one per request")
	webhookTimeout := fs.Duration("webhook-timeout", maintenance.DefaultWebhookTimeout, "how long one webhook request may take, answer included (100ms to 5m)")
	var trustedProxies []netip.Prefix
	fs.Func("trusted-proxies", "comma-separated IPs or CIDR ranges of reverse proxies whose X-Forwarded-For names the client (default: none)",
		func(v string) (err error) { trustedProxies, err = web.ParseTrustedProxies(v); return err })
	if err := cli.ParseFlags(fs, args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	webhooks, err := queue.ParseWebhookConfig(*webhookURL, *webhookSecret, *webhookEvents)
	if err != nil {
		return err
	}
	if err := maintenance.CheckWebhookDelivery(*webhookConcurrency, *webhookTimeout); err != nil {
		return err
	}
	if *perToken < 1 || *perSession < 1 {
		return fmt.Errorf("--max-claims-per-token %d, --max-streams-per-session %d: want at least 1", *perToken, *perSession)
	}
	if err := queue.CheckHandover(*handover); err != nil {
		return fmt.Errorf("--handover: %w", err)
	}
	if *readMaxLag < time.Second {
		return fmt.Errorf("--read-max-lag %s: want at least 1s (the replica is checked each second)", *readMaxLag)
	}
	logger := cli.NewLogger(*logFormat, slog.LevelInfo)
	defer cli.FlushLog(logger)
	ctx, stop := cli.SignalContext(logger)
	defer stop()

	pool, closeDB, err := openDatabase(ctx, logger, timeouts, false)
	if err != nil {
		return err
	}
	defer closeDB()
	// Every write of the start (migrations, tokens, the admin user, the
	// webhook events) goes to DATABASE_URL: a standby there would refuse
	// the first one with a cryptic "read-only transaction".
	if err := checkPrimary(ctx, pool); err != nil {
		return err
	}
	if *migrate {
		if err := db.Migrate(pool); err != nil {
			return err
		}
	}
	tokens := apitoken.NewStore(pool)
	tokens.SetLogger(logger)
	if secret := os.Getenv("LEASEHOLD_API_TOKEN"); secret != "" {
		if err := tokens.Ensure(ctx, "env", apitoken.RoleAdmin, secret); err != nil {
			return fmt.Errorf("registering LEASEHOLD_API_TOKEN: %w", err)
		}
	}
	signIn := auth.New(pool, logger)
	if err := signIn.Bootstrap(ctx, os.Getenv("LEASEHOLD_ADMIN_PASSWORD")); err != nil {
		return fmt.Errorf("setting up the admin user: %w", err)
	}
	client := queue.NewClient(pool, logger)
	reads, closeReads, err := openReadReplica(ctx, *readURL, *readMaxLag, client, logger, timeouts)
	if err != nil {
		return err
	}
	defer closeReads()
	store, err := cli.OpenArtifacts(ctx, *artifacts, client)
	if err != nil {
		return err
	}
	if *demo {
		if err := submitDemo(ctx, client); err != nil {
			return err
		}
	}
	metrics := web.NewMetrics(client)
	if reads.Status().Configured {
		metrics.ObserveReadReplica(reads)
		go func() { _ = reads.Run(ctx) }()
	}
	// Every process records the events this server sends (none without
	// a URL): replicas share one webhook configuration.
	if err := client.ConfigureWebhooks(ctx, webhooks.Events); err != nil {
		return err
	}
	// One LISTEN connection serves the remote workers' long polls, every
	// open dashboard's live updates and the reaper's wake-ups: every
	// listening session of the database is woken, a transaction, by
	// every notification on any channel.
	jobs := queue.NewJobNotifier(pool, logger)
	services := []maintenance.Service{
		maintenance.NewReaper(pool, maintenance.ReaperConfig{Logger: logger, OnReap: metrics.ObserveReap, Wakes: jobs.ReaperWakes()}),
		maintenance.NewPruner(pool, maintenance.PrunerConfig{Retention: retention, AuditRetention: time.Duration(auditRetention),
			Files: store, Logger: logger}),
		maintenance.NewScheduler(pool, maintenance.SchedulerConfig{Logger: logger}),
	}
	if webhooks.Enabled() {
		services = append(services, maintenance.NewWebhookSender(pool, maintenance.WebhookSenderConfig{
			Webhook: webhooks, Logger: logger, OnDelivery: metrics.ObserveWebhook, OnGiveUp: metrics.ObserveWebhookGivenUp,
			Concurrency: *webhookConcurrency, Timeout: *webhookTimeout,
		}))
	}
	for _, s := range services {
		metrics.ObserveRole(s.Role(), s.Active)
	}
	maintainer := maintenance.NewMaintainer(logger, services...)
	maintained := make(chan error, 1)
	go func() { maintained <- maintainer.Run(ctx) }()

	// Open dashboards may hold at most a quarter of the connections, so
	// that they never crowd out workers and page loads.
	hub := live.NewHub(live.Config{MaxStreams: max(1, min(1000, *maxConns/4))})
	jobs.WatchChanges(hub.Notify)
	// Tokens are checked from memory while the listener hears every
	// change of one (a revoke, on any server or the CLI, forgets them).
	jobs.WatchTokens(tokens.Listening)
	go tokens.Run(ctx)
	go jobs.Run(ctx)
	// Remote workers' presence, many reports a statement.
	presence := client.NewPresenceBatch(0)
	go presence.Run(ctx)
	// The database sends changes only while some server has streams open.
	go hub.KeepWatched(ctx, client, logger)
	handler := web.New(web.Config{
		Pool: pool, Queue: client, Tokens: tokens, Logger: logger, ArtifactsDir: *artifacts, Metrics: metrics,
		Jobs: jobs, Artifacts: store, Auth: signIn, TrustedProxies: trustedProxies, Live: hub, Reads: reads,
		Handover:       *handover,
		RequestTimeout: requestTimeout(*reqTime),

		MaxClaimsPerToken: *perToken, MaxStreamsPerSession: *perSession, Presence: presence,
	})
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	// Shutdown waits for requests to end; event streams end only when told.
	srv.RegisterOnShutdown(hub.Close)
	ln, err := listen(*addr, connlimit.Config{
		Max: *maxConns, PerClient: *perClient, Exempt: trustedProxies, Logger: logger,
	})
	if err != nil {
		return err
	}
	// Idle keep-alive connections live IdleTimeout, or a few seconds
	// while the server is near --max-connections.
	srv.ConnState = ln.ConnState
	// Start-up's large, short-lived allocations (the admin password's
	// argon2id hash alone takes 19 MiB, migrations parse every file) are
	// garbage now: hand the memory back rather than keep it resident.
	debug.FreeOSMemory()
	logger.Info("server listening", "addr", "http://"+ln.Addr().String())
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	var maintErr error
	select {
	case err := <-serveErr:
		return fmt.Errorf("serving: %w", err)
	case maintErr = <-maintained:
		maintained = nil
		if ctx.Err() == nil {
			// A service gave up for good: a server without it must not
			// look healthy, so it stops for its supervisor to restart it.
			_ = srv.Close()
			return fmt.Errorf("background services: %w", cmp.Or(maintErr, errors.New("stopped")))
		}
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		logger.Warn("shutting down HTTP", "err", err)
	}
	if maintained != nil {
		maintErr = <-maintained
	}
	if maintErr != nil {
		return fmt.Errorf("background services: %w", maintErr)
	}
	logger.Info("server stopped")
	return nil
}

// listen opens the server's socket, accepting at most cfg.Max
// connections at once: long-polling workers and open dashboards each hold
// one, and beyond the limit new ones wait in the kernel's backlog instead
// of exhausting file descriptors and memory. One client address may hold
// only cfg.PerClient of them, so that the rest stay for health probes,
// pages and other workers (connlimit).
func listen(addr string, cfg connlimit.Config) (*connlimit.Listener, error) {
	if cfg.Max < 1 {
		return nil, fmt.Errorf("--max-connections %d: want at least 1", cfg.Max)
	}
	if cfg.PerClient > cfg.Max {
		return nil, fmt.Errorf("--max-connections-per-client %d: want at most --max-connections (%d)", cfg.PerClient, cfg.Max)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening: %w", err)
	}
	return connlimit.New(ln, cfg), nil
}

// requestTimeout is web.Config.RequestTimeout of --request-timeout d:
// 0 is no bound there, the default here.
func requestTimeout(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// openDatabase connects to $DATABASE_URL, or starts the private cluster,
// and waits until the target database answers. A subcommand (existing)
// uses only a private cluster the server made before: one made for it
// would be an empty database that is not the server's.
func openDatabase(ctx context.Context, logger *slog.Logger, timeouts cli.DatabaseTimeouts, existing bool) (*pgxpool.Pool, func(), error) {
	url := os.Getenv("DATABASE_URL")
	stopCluster := func() {}
	if url == "" {
		cluster, err := pgcluster.Start(ctx, pgcluster.Config{Logger: logger, MustExist: existing})
		if errors.Is(err, pgcluster.ErrNoCluster) {
			return nil, nil, fmt.Errorf("DATABASE_URL is not set, so this would use the private cluster, and %w: "+
				"the server makes one there when it runs without DATABASE_URL; a subcommand never does. "+
				"Set DATABASE_URL to the server's database (under systemd, load its settings first: "+
				"set -a; . /etc/leasehold/server.env; set +a)", err)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("no DATABASE_URL, and the private cluster could not start: %w", err)
		}
		logger.Info("using the private PostgreSQL cluster", "url", cluster.URL("leasehold"))
		url = cluster.URL("leasehold")
		stopCluster = func() {
			if err := cluster.Stop(context.Background()); err != nil {
				logger.Warn("stopping private cluster", "err", err)
			}
		}
	}
	cfg := db.PoolConfig{URL: url, AppName: "leasehold-server", MaxConns: 32, Logger: logger, CustomPlans: true}
	timeouts.Apply(&cfg)
	pool, err := db.Open(ctx, cfg)
	if err != nil {
		stopCluster()
		return nil, nil, err
	}
	return pool, func() { pool.Close(); stopCluster() }, nil
}

// readConnectTimeout bounds each connection to the read replica: one
// that does not answer is given up fast, and its reads go to the primary.
const readConnectTimeout = time.Second

// openReadReplica returns where the server's read-only pages read: the
// replica of url (nothing waits for it to answer) and primary, or the
// primary alone when url is "".
func openReadReplica(ctx context.Context, url string, maxLag time.Duration, primary *queue.Client, logger *slog.Logger, timeouts cli.DatabaseTimeouts) (*replica.Reads, func(), error) {
	if url == "" {
		return replica.New(replica.Config{Primary: primary, Logger: logger}), func() {}, nil
	}
	cfg := db.PoolConfig{URL: url, AppName: "leasehold-server-read", MaxConns: 16, Logger: logger, CustomPlans: true, NoWait: true}
	timeouts.Apply(&cfg)
	cfg.ConnectTimeout = min(cfg.ConnectTimeout, readConnectTimeout)
	pool, err := db.Open(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("--read-database-url: %w", err)
	}
	reads := replica.New(replica.Config{Primary: primary, Replica: queue.NewClient(pool, logger), MaxLag: maxLag, Logger: logger})
	return reads, pool.Close, nil
}

// checkPrimary refuses a DATABASE_URL that reaches a standby: the server
// writes there. A replica belongs in --read-database-url.
func checkPrimary(ctx context.Context, pool *pgxpool.Pool) error {
	w, err := db.New(pool).WritableCheck(ctx)
	if err != nil {
		return fmt.Errorf("checking the database: %w", err)
	}
	if w.InRecovery {
		return errors.New("DATABASE_URL reaches a standby (in recovery), which refuses the server's writes: " +
			"give it the primary (a multi-host URL with target_session_attrs=read-write finds it), and the standby as LEASEHOLD_READ_DATABASE_URL")
	}
	return nil
}

// withDatabase runs subcommand name's fn on the server's database. What
// fn prints goes to stdout only once the database is closed and every log
// line is out on stderr, so that the answer is the end of the output even
// where the two streams are one (2>&1, docker compose exec): the last
// line of `token create` is the token. A database without this build's
// schema (not the server's, or never migrated) is named before fn runs,
// except by migrate, which is what fixes it.
func withDatabase(name string, fn func(context.Context, *pgxpool.Pool, io.Writer) error) error {
	logger := cli.NewLogger("text", slog.LevelInfo)
	ctx, stop := cli.SignalContext(logger)
	defer stop()
	var out bytes.Buffer
	err := func() error {
		// Migrations and retention passes may run long statements on
		// purpose: only connecting is bounded.
		pool, closeDB, err := openDatabase(ctx, logger, cli.DatabaseTimeouts{Connect: db.DefaultConnectTimeout}, true)
		if err != nil {
			return err
		}
		defer closeDB()
		if name != "migrate" {
			if err := checkSchema(pool); err != nil {
				return err
			}
		}
		return fn(audit.NewContext(ctx, cliActor()), pool, &out)
	}()
	cli.FlushLog(logger)
	_, _ = os.Stdout.Write(out.Bytes())
	return err
}

// cliActor is who the audit trail says ran a command: "cli:" and the
// operating system's user.
func cliActor() audit.Actor {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	} else if v := os.Getenv("USER"); v != "" {
		name = v
	}
	return audit.Actor{Name: "cli:" + name}
}

// checkSchema says when pool's database is not at this build's schema
// version, which a subcommand would otherwise meet as a missing table.
func checkSchema(pool *pgxpool.Pool) error {
	mg, err := db.NewMigrator(pool)
	if err != nil {
		return err
	}
	v, dirty, err := mg.Version()
	err = errors.Join(err, mg.Close())
	switch {
	case err != nil:
		return err
	case v == 0:
		return fmt.Errorf("%s has no Leasehold schema: it is not the server's database, "+
			"or no server has started on it yet (start the server once, or run `server migrate up`)", describeDatabase(pool))
	case dirty:
		return fmt.Errorf("%s is at schema version %d, dirty: a migration failed half-way; fix it by hand", describeDatabase(pool), v)
	case v != db.SchemaVersion:
		return fmt.Errorf("%s is at schema version %d, this build needs %d: "+
			"run this build's server once, or `server migrate up`", describeDatabase(pool), v, db.SchemaVersion)
	}
	return nil
}

// describeDatabase names pool's database for a message: host and
// database name, never the password.
func describeDatabase(pool *pgxpool.Pool) string {
	c := pool.Config().ConnConfig
	return fmt.Sprintf("the database %q on %s", c.Database, c.Host)
}

func migrateCmd(pool *pgxpool.Pool, out io.Writer, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: server migrate up|down|version")
	}
	mg, err := db.NewMigrator(pool)
	if err != nil {
		return err
	}
	defer mg.Close()
	switch args[0] {
	case "up":
		err = mg.Up()
	case "down":
		err = mg.Down()
	case "version":
	default:
		return fmt.Errorf("unknown migrate command %q: want up, down or version", args[0])
	}
	if err != nil {
		return err
	}
	v, dirty, err := mg.Version()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "version %d (expected %d)", v, db.SchemaVersion)
	if dirty {
		fmt.Fprint(out, ", dirty: a migration failed half-way; fix it by hand")
	}
	fmt.Fprintln(out)
	return nil
}
