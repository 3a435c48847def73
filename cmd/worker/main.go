// Command worker claims Leasehold jobs and runs an executor for each,
// renewing its leases by heartbeat and fencing itself when it loses one.
package main

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/leasehold/leasehold/cmd/internal/cli"
	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/db/pgcluster"
	"github.com/leasehold/leasehold/executor"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/window"
	"github.com/leasehold/leasehold/worker"
)

const usage = `usage: worker [flags]

Claims jobs and runs an executor for each: straight on PostgreSQL
($DATABASE_URL or --database-url; unset, the private cluster in
./.leasehold/pg), or through a server's worker API (--server-url, --token).
Every flag can also be set as LEASEHOLD_<FLAG>.`

// A busy worker allocates a little for every job it runs, and with Go's
// default (a collection each time the heap doubles) the collector took a
// fifth of a worker's CPU draining no-op jobs. Unless GOGC or GOMEMLIMIT
// say otherwise, the heap may grow to five times what is live, and the
// collector works harder as the process nears workerMemoryLimit.
const (
	workerGCPercent   = 400
	workerMemoryLimit = 256 << 20
)

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(workerGCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(workerMemoryLimit)
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		fmt.Println(cli.Version("leasehold-worker"))
		return nil
	}
	host, _ := os.Hostname()
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	var (
		id          = fs.String("id", fmt.Sprintf("%s-%d", host, os.Getpid()), "worker identity")
		queues      = fs.String("queues", "default", "comma-separated queues to take jobs from")
		device      = fs.String("device", "", "comma-separated labels of this worker's device (jobs naming a device go only to a matching worker)")
		concurrency = fs.Int("concurrency", 1, "jobs held at once")
		lease       = fs.Duration("lease", queue.DefaultLease, fmt.Sprintf("lease duration of each claim (%v to %v)", queue.MinLease, queue.MaxLease))
		heartbeat   = fs.Duration("heartbeat", 0, "heartbeat interval (default lease/3)")
		execName    = fs.String("executor", "sim", "executor: sim, exec or noop")
		execCmd     = fs.String("exec", "", "command for the exec executor")
		databaseURL = fs.String("database-url", os.Getenv("DATABASE_URL"), "PostgreSQL URL (default $DATABASE_URL; unset: the private cluster in ./.leasehold/pg)")
		serverURL   = fs.String("server-url", "", "Leasehold server URL, to work through its worker API instead of PostgreSQL")
		token       = fs.String("token", "", "worker token for --server-url")
		artifacts   = fs.String("artifacts", "./.leasehold/artifacts", "where a direct worker stores screenshots, as the server: "+cli.ArtifactsUsage)
		grace       = fs.Duration("grace", 30*time.Second, "how long running jobs may finish after SIGTERM before their leases are released")
		killGrace   = fs.Duration("kill-grace", 10*time.Second, "how long an exec command has between SIGTERM and SIGKILL when its attempt must stop")
		poll        = fs.Duration("poll", 0, "fallback claim period when no notification arrives (default 10s direct, 1s remote)")
		reaper      = fs.Bool("reaper", true, "run a standby reaper, so expired leases are recovered even while no server runs; its open session also keeps this worker online without presence writes (docs/operating.md, Online)")
		deviceInfo  = fs.String("device-info", "", "command printing one JSON object about the phone (battery, charging, adb, model, …), run at start, every --device-info-every and after each job")
		infoEvery   = fs.Duration("device-info-every", time.Minute, "how often --device-info runs between jobs")
		minBattery  = fs.Int("min-battery", queue.DefaultMinBattery, "with --device-info: claim nothing while the battery is under this percentage and not charging")
		preflight   = fs.String("preflight", "", "command run before each job starts (is the phone unlocked, the app installable, …); failing, it releases the job uncounted and the worker claims nothing until it passes again")
		postflight  = fs.String("postflight", "", "command run after each job ends, whatever the outcome (uninstall, clear data, go home); failing, the worker claims nothing until a preflight passes")
		available   = fs.String("available", "", "this worker's weekly availability window in its owner's time zone, e.g. \"mon-fri 22:00-07:00, sat-sun 00:00-24:00 Europe/Berlin\": it claims nothing outside it (set at start; \"\" removes the window; unset leaves the one the API or dashboard set)")
		logFormat   = fs.String("log-format", "text", "log format: text or json")
		logLevel    slog.Level // info
		spoolDir    = fs.String("spool-dir", defaultSpoolDir(), "where artifacts wait until the server (or the artifact store) has them; a directory of its own per worker process inside it, and what killed workers left there is removed at start")
		spoolMax    = byteSize(worker.DefaultSpoolMax)
		timeouts    cli.DatabaseTimeouts
	)
	timeouts.Register(fs)
	fs.Var(&spoolMax, "spool-max", "most bytes of artifacts waiting in --spool-dir (KiB, MiB, GiB or bytes); an artifact that does not fit is given up, and recorded on its attempt")
	fs.TextVar(&logLevel, "log-level", slog.LevelInfo, "least level logged: debug (each job's claim too), info (each job's outcome), warn or error")
	fs.Usage = func() { fmt.Fprintf(fs.Output(), "%s\n\nflags:\n", usage); fs.PrintDefaults() }
	if err := cli.ParseFlags(fs, args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	logger := cli.NewLogger(*logFormat, logLevel)
	defer cli.FlushLog(logger)

	if *execCmd != "" && *execName != "exec" {
		return fmt.Errorf("--exec is for --executor exec, not %s", *execName)
	}
	exec, err := executor.New(*execName, executor.Options{Exec: *execCmd, KillGrace: *killGrace, Logger: logger})
	if err != nil {
		return err
	}
	if *lease < queue.MinLease || *lease > queue.MaxLease {
		return fmt.Errorf("--lease %v: must be between %v and %v", *lease, queue.MinLease, queue.MaxLease)
	}
	if *heartbeat < 0 || *heartbeat >= *lease {
		return fmt.Errorf("--heartbeat %v: must be shorter than --lease %v", *heartbeat, *lease)
	}

	if *available != "" {
		if _, err := window.Parse(*available); err != nil {
			return fmt.Errorf("--available %q: %w", *available, err)
		}
	}
	if *minBattery < 0 || *minBattery > 100 {
		return fmt.Errorf("--min-battery %d: must be between 0 and 100", *minBattery)
	}
	if *infoEvery < time.Second {
		return fmt.Errorf("--device-info-every %v: must be at least 1s", *infoEvery)
	}
	var infoFunc worker.DeviceInfoFunc
	if *deviceInfo != "" {
		probe, err := executor.NewDeviceInfo(*deviceInfo, 0, logger)
		if err != nil {
			return fmt.Errorf("--device-info: %w", err)
		}
		infoFunc = probe.Run
	}
	var preFunc, postFunc worker.CheckFunc
	if *preflight != "" {
		c, err := executor.NewCheck("preflight", *preflight, 0, logger)
		if err != nil {
			return fmt.Errorf("--preflight: %w", err)
		}
		preFunc = c.Run
	}
	if *postflight != "" {
		c, err := executor.NewCheck("postflight", *postflight, 0, logger)
		if err != nil {
			return fmt.Errorf("--postflight: %w", err)
		}
		postFunc = c.Run
	}
	if *minBattery == 0 {
		*minBattery = -1 // worker.Config's 0 is the default
	}

	spool, err := worker.OpenSpool(*spoolDir, int64(spoolMax))
	if err != nil {
		return fmt.Errorf("--spool-dir %s: %w", *spoolDir, err)
	}
	defer spool.Close()

	ctx, stop := cli.SignalContext(logger)
	defer stop()

	cfg := worker.Config{
		ID: *id, Queues: cli.SplitList(*queues), Devices: cli.SplitList(*device), Concurrency: *concurrency,
		Lease: *lease, Heartbeat: *heartbeat, Grace: *grace, Poll: *poll, Reaper: *reaper,
		Executor: exec, Logger: logger,
		DeviceInfo: infoFunc, DeviceInfoEvery: *infoEvery, MinBattery: *minBattery, Spool: spool,
		Preflight: preFunc, Postflight: postFunc,
	}
	var w *worker.Worker
	if *serverURL != "" || *token != "" {
		// At home behind a router: only the server's HTTPS API.
		if err := checkCertFile(os.Getenv("SSL_CERT_FILE")); err != nil {
			return err
		}
		remote, err := worker.NewRemote(*serverURL, *token, logger)
		if err != nil {
			return err
		}
		whoami, err := remote.Whoami(ctx)
		if err != nil {
			return fmt.Errorf("checking the worker token with %s: %w", *serverURL, err)
		}
		if idSet(fs) && *id != whoami {
			logger.Warn("--id differs from the token's name; the server knows this worker as the token's name", "id", *id, "token_name", whoami)
		}
		cfg.ID = whoami
		cfg.Backend = remote
		if flagSet(fs, "available") {
			if err := remote.SetAvailability(ctx, *available); err != nil {
				return fmt.Errorf("--available: %w", err)
			}
		}
		w = worker.New(cfg)
	} else {
		url := *databaseURL
		if url == "" {
			cluster, err := pgcluster.Start(ctx, pgcluster.Config{Logger: logger})
			if err != nil {
				return fmt.Errorf("no DATABASE_URL, and the private cluster could not start: %w", err)
			}
			defer cluster.Stop(context.Background())
			url = cluster.URL("leasehold")
		}
		pcfg := db.PoolConfig{URL: url, AppName: "leasehold-worker", MaxConns: int32(*concurrency + 4), Logger: logger}
		timeouts.Apply(&pcfg)
		pool, err := db.Open(ctx, pcfg)
		if err != nil {
			return err
		}
		defer pool.Close()
		// The same storage the server reads: its LEASEHOLD_ARTIFACTS (a
		// shared host or volume, or the same bucket).
		store, err := cli.OpenArtifacts(ctx, *artifacts, queue.NewClient(pool, logger))
		if err != nil {
			return err
		}
		if flagSet(fs, "available") {
			if err := setAvailability(ctx, queue.NewClient(pool, logger), cfg.ID, *available); err != nil {
				return fmt.Errorf("--available: %w", err)
			}
		}
		w = worker.NewDirect(pool, store, cfg)
	}
	return w.Run(ctx)
}

// defaultSpoolDir is leasehold/spool in the user's cache directory, or
// ./.leasehold/spool when there is none.
func defaultSpoolDir() string {
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "leasehold", "spool")
	}
	return filepath.Join(".leasehold", "spool")
}

// setAvailability sets (or, for "", removes) worker id's own window, as
// the worker API does for a remote worker.
func setAvailability(ctx context.Context, q *queue.Client, id, text string) error {
	if strings.TrimSpace(text) == "" {
		if err := q.ClearAvailability(ctx, queue.ScopeWorker, id); err != nil && !errors.Is(err, queue.ErrNotFound) {
			return err
		}
		return nil
	}
	_, err := q.SetAvailability(ctx, queue.ScopeWorker, id, text, "worker:"+id)
	return err
}

// flagSet reports whether flag name was given (or its LEASEHOLD_ variable set).
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	_, env := os.LookupEnv("LEASEHOLD_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")))
	return set || env
}

// idSet reports whether --id was given (or LEASEHOLD_ID set).
func idSet(fs *flag.FlagSet) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "id" })
	_, env := os.LookupEnv("LEASEHOLD_ID")
	return set || env
}

// checkCertFile refuses an SSL_CERT_FILE this process cannot use. Go reads
// it once, quietly falls back to the system's roots when it cannot, and
// then calls the server's certificate one "signed by unknown authority"
// until the worker restarts: a private CA's root copied with its 0600
// mode, read by the worker's service user, looked exactly like a wrong
// certificate.
func checkCertFile(path string) error {
	if path == "" {
		return nil
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("SSL_CERT_FILE: %w (this worker runs as uid %d; a CA root copied from Caddy is 0600: install -m 644 it)", err, os.Getuid())
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		return fmt.Errorf("SSL_CERT_FILE %s holds no PEM certificate", path)
	}
	return nil
}
