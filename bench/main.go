// Command bench drains the same N no-op jobs through Leasehold and through
// River on one PostgreSQL, in one run, and prints each one's throughput and
// database work per job side by side.
//
// Each run creates a fresh database (leasehold_bench or river_bench),
// inserts N jobs in bulk (not measured), vacuums, then starts the consumer
// and measures until all N are done: Leasehold's worker process
// (cmd/worker built from the working tree, --executor noop
// --concurrency 200) from its start until the counters show N succeeded;
// a River client (200 workers, FetchCooldown 1 ms) from client.Start until
// N completion events. Work is the difference of pg_stat_database
// (xact_commit, tup_inserted+tup_updated+tup_deleted, blks_hit+blks_read)
// for that database, read after every consumer connection closed, and of
// pg_current_wal_lsn() (cluster-wide: other databases' writes count too).
//
//	go run . -n 20000 -runs 3
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// The Leasehold drain reads the counters at most every maxPollWait, and
// every pollEvery near the end.
const (
	pollEvery   = 5 * time.Millisecond
	maxPollWait = 500 * time.Millisecond
)

type bench struct {
	admin      *admin
	tmp        string
	statements bool
	streams    int // event streams to open in the idle measurement
	stops      []func()
	// idleSchedule, when set, is the cron of a schedule the idle server
	// holds during its window.
	idleSchedule string
	// maxRunning, when set, caps Leasehold's queue before the drain, so
	// that the drain measures the limited claim path.
	maxRunning int
	// keys, when set, spreads Leasehold's jobs over this many concurrency
	// keys of limit 1 (job i has key i mod keys), so that the drain
	// measures the keyed claim path.
	keys int
	// rated, when set, has every job name one rate-limit key whose
	// budget never binds, so that the drain measures the rate-limited
	// claim path.
	rated bool
	// workerArgs are more flags for the idle worker (-idle-worker-args).
	workerArgs []string
	// webhooks are the webhook events enabled (none when empty): the
	// drain's transitions record them, and the idle server sends them.
	webhooks []string
}

type result struct {
	system  string
	jobs    int
	elapsed time.Duration
	work    dbStat
	polls   int64
	// clientCPU is the consumer's CPU time: the worker process, or this
	// process for River.
	clientCPU time.Duration
}

func (r result) rate() float64 { return float64(r.jobs) / r.elapsed.Seconds() }
func (r result) per(v int64) float64 {
	return float64(v) / float64(r.jobs)
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		n          = flag.Int("n", 20000, "jobs per drain")
		runs       = flag.Int("runs", 3, "runs of each system, alternating; the table shows the median of each figure")
		only       = flag.String("only", "", "run only leasehold or river")
		dbURL      = flag.String("database-url", cmp.Or(os.Getenv("DATABASE_URL"), "postgres://postgres@127.0.0.1:5432/postgres"), "PostgreSQL to run on (its database is only used to create and drop the benchmark's own)")
		repo       = flag.String("repo", "..", "Leasehold working tree whose cmd/worker and cmd/server are built")
		statements = flag.Bool("statements", false, "also print each statement's cost per job (needs pg_stat_statements in shared_preload_libraries)")
		keep       = flag.Bool("keep", false, "keep each system's database of the last run (to look at its tables and WAL afterwards)")
		idle       = flag.Duration("idle", 0, "instead of draining: measure an idle server plus one idle worker, and an idle River client, over this long")
		idleSched  = flag.String("idle-schedule", "", "with -idle: the idle server holds a schedule of this cron (e.g. @daily) during the window")
		maxRunning = flag.Int("max-running", 0, "cap Leasehold's queue at this many running jobs (PATCH max_running) before each drain: measures the limited claim path (with -limits: the capped drain's cap, default 100)")
		keys       = flag.Int("keys", 0, "spread Leasehold's jobs over this many concurrency keys of limit 1: measures the keyed claim path (with -limits: the keyed drain's keys, default 50)")
		ratedOnly  = flag.Bool("rated-only", false, "with -limits: drain only uncapped and rate-limited (every job names one key with a budget that never binds)")
		limits     = flag.Bool("limits", false, "instead of Leasehold against River: drain Leasehold uncapped, capped (-max-running) and keyed (-keys) in each run, and print each against the uncapped drain")
		workerArgs = flag.String("idle-worker-args", "", "more flags for the idle worker, split at spaces (e.g. --device-info=examples/device-info.sh --device-info-every=1s)")
		streams    = flag.Int("streams", 0, "with -idle: measure again with this many event streams (open dashboards) on the server")
		remote     = flag.Int("remote", 0, "with -idle: a fleet instead of one direct worker: this many simulated remote workers (each its own token, long polls and presence over HTTP, in this process)")
		direct     = flag.Int("direct", 0, "with -idle: a fleet instead of one direct worker: this many direct worker processes")
		latency    = flag.Int("latency", 20, "with -idle and -remote or -direct: then submit this many jobs one at a time and print how fast each reached an idle worker")
		webhooks   = flag.String("webhooks", "", "enable these webhook events (comma-separated, e.g. job.dead or job.succeeded): the drain records them in the outbox (no sender runs), the idle server gets a webhook URL")
		soak       = flag.Duration("soak", 0, "instead of draining: hold 200 heartbeating jobs under two workers and two servers this long, and print the jobs table's size, HOT share and oldest snapshot each minute")
		backend    = flag.Bool("backend-cpu", false, "instead of draining: claim and complete -n jobs of each system 100 at a time from one session, and print the PostgreSQL backend's CPU per job (PostgreSQL must run on this machine)")
	)
	flag.Parse()
	if *only != "" && *only != "leasehold" && *only != "river" {
		return fmt.Errorf("-only %q: want leasehold or river", *only)
	}
	if *n < 1 || *runs < 1 {
		return fmt.Errorf("-n and -runs must be at least 1")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := connectAdmin(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer a.conn.Close(context.Background())
	tmp, err := os.MkdirTemp("", "leasehold-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	repoDir, err := filepath.Abs(*repo)
	if err != nil {
		return err
	}
	if *only != "river" || *idle > 0 || *soak > 0 {
		if err := buildBinaries(ctx, repoDir, tmp); err != nil {
			return err
		}
	}
	if *maxRunning < 0 || *keys < 0 {
		return fmt.Errorf("-max-running and -keys must not be negative")
	}
	b := &bench{admin: a, tmp: tmp, statements: *statements, idleSchedule: *idleSched, maxRunning: *maxRunning, keys: *keys,
		workerArgs: strings.Fields(*workerArgs), streams: *streams}
	if *webhooks != "" {
		if b.webhooks, err = queue.ParseWebhookEvents(*webhooks); err != nil {
			return err
		}
	}
	defer func() {
		if *keep {
			return
		}
		for _, name := range []string{leaseholdDB, riverDB, idleDB, soakDB, fleetDB} {
			_ = a.dropDatabase(context.Background(), name)
		}
	}()
	if *idle > 0 && *remote+*direct > 0 {
		return b.fleet(ctx, *idle, fleetConfig{remote: *remote, direct: *direct, streams: *streams, latency: *latency})
	}
	if *idle > 0 {
		return b.idle(ctx, *idle)
	}
	if *soak > 0 {
		return b.soak(ctx, *soak)
	}
	if *backend {
		return b.backendCPU(ctx, *n)
	}
	if *limits {
		return b.limits(ctx, *n, *runs, cmp.Or(*maxRunning, 100), cmp.Or(*keys, 50), *ratedOnly)
	}

	systems := []func(context.Context, int) (result, error){b.runLeasehold, b.runRiver}
	switch *only {
	case "leasehold":
		systems = systems[:1]
	case "river":
		systems = systems[1:]
	}
	byName := map[string][]result{}
	for i := range *runs {
		for _, sys := range systems {
			r, err := sys(ctx, *n)
			if err != nil {
				return err
			}
			fmt.Printf("run %d %-9s %8.0f jobs/s  %6.2f row writes  %7.1f buffer touches  %6.3f commits  %7.0f WAL bytes per job  (%.2fs%s)\n",
				i+1, r.system, r.rate(), r.per(r.work.writes), r.per(r.work.touches), r.per(r.work.commits),
				r.per(r.work.walBytes), r.elapsed.Seconds(), pollNote(r))
			fmt.Printf("      CPU per 1000 jobs: consumer %.0f ms%s; WAL %s\n", r.perK(r.clientCPU), pgCPUNote(r), r.work.lsn)
			byName[r.system] = append(byName[r.system], r)
		}
	}
	printTable(*n, *runs, byName["Leasehold"], byName["River"])
	return nil
}

func (r result) perK(d time.Duration) float64 {
	return float64(d.Milliseconds()) * 1000 / float64(r.jobs)
}

func pgCPUNote(r result) string {
	if r.work.pgCPU <= 0 {
		return ""
	}
	return fmt.Sprintf(", PostgreSQL (whole cluster) %.0f ms", r.perK(r.work.pgCPU))
}

func pollNote(r result) string {
	if r.polls == 0 {
		return ""
	}
	return fmt.Sprintf(", %d counter polls not counted as commits", r.polls)
}

// printTable prints the median of each figure as a Markdown table.
func printTable(n, runs int, lh, rv []result) {
	type row struct {
		name   string
		format string
		value  func(result) float64
	}
	rows := []row{
		{"throughput (jobs/s)", "%.0f", result.rate},
		{"row writes (ins+upd+del)", "%.2f", func(r result) float64 { return r.per(r.work.writes) }},
		{"buffer touches (hit+read)", "%.1f", func(r result) float64 { return r.per(r.work.touches) }},
		{"commits", "%.3f", func(r result) float64 { return r.per(r.work.commits) }},
		{"WAL bytes", "%.0f", func(r result) float64 { return r.per(r.work.walBytes) }},
	}
	fmt.Printf("\n%d no-op jobs, median of %d runs each; per job except throughput\n\n", n, runs)
	fmt.Println("| per job | Leasehold | River | Leasehold/River |")
	fmt.Println("| --- | ---: | ---: | ---: |")
	for _, rw := range rows {
		l, lok := median(lh, rw.value)
		r, rok := median(rv, rw.value)
		cell := func(v float64, ok bool) string {
			if !ok {
				return "–"
			}
			return fmt.Sprintf(rw.format, v)
		}
		ratio := "–"
		if lok && rok && r != 0 {
			ratio = fmt.Sprintf("%.2f", l/r)
		}
		fmt.Printf("| %s | %s | %s | %s |\n", rw.name, cell(l, lok), cell(r, rok), ratio)
	}
}

func median(rs []result, value func(result) float64) (float64, bool) {
	if len(rs) == 0 {
		return 0, false
	}
	vs := make([]float64, len(rs))
	for i, r := range rs {
		vs[i] = value(r)
	}
	return medianOf(vs), true
}

// medianOf is the median of vs, which it sorts; vs is not empty.
func medianOf(vs []float64) float64 {
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}
