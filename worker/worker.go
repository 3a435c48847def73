package worker

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/maintenance"
	"github.com/leasehold/leasehold/queue"
)

// Config configures a Worker. Zero values take the documented defaults.
type Config struct {
	ID          string
	Queues      []string      // default ["default"]
	Devices     []string      // this worker's device labels
	Concurrency int           // jobs held at once, default 1
	Lease       time.Duration // default 30s
	Heartbeat   time.Duration // default Lease/3
	Grace       time.Duration // how long running jobs may finish at shutdown, default 30s
	// Poll is the fallback claim period; notifications normally wake the
	// worker first. Default 10s for a direct worker (it hears of new jobs
	// by LISTEN; the poll finds jobs inserted without a notification),
	// 1s between a remote worker's long polls.
	Poll time.Duration
	// Reaper runs a standby reaper in this process, so expired leases are
	// recovered even while no server runs. Needs Pool.
	Reaper   bool
	Executor Executor
	Logger   *slog.Logger
	// Backend is where jobs come from and outcomes go.
	Backend Backend
	// Pool, for a worker that reaches PostgreSQL, wakes it by LISTEN when
	// jobs arrive and hosts its standby reaper. Nil for a remote worker,
	// which polls.
	Pool *pgxpool.Pool
	// DeviceInfo, when set, describes the phone: it runs at start, every
	// DeviceInfoEvery (default a minute) and after each job, and its facts
	// go with presence. While they say the phone is unfit
	// (queue.DeviceHealth with MinBattery, default 15) the worker claims
	// nothing; running jobs go on. A negative MinBattery never holds back
	// for the battery.
	DeviceInfo      DeviceInfoFunc
	DeviceInfoEvery time.Duration
	// Preflight runs before each job starts, Postflight after it ends,
	// whatever the outcome (SPEC "Pre- and post-flight"). A failed
	// preflight releases the job (not counted) and holds the phone back
	// with the check's message; a failed postflight holds it back until a
	// later preflight passes (run every DeviceInfoEvery meanwhile). Both
	// outputs are kept on the attempt as text artifacts.
	Preflight, Postflight CheckFunc
	MinBattery            int
	// Spool keeps artifacts until they are stored (see Spool); nil
	// means one in memory of DefaultSpoolMax.
	Spool *Spool
}

// Worker claims and runs jobs.
type Worker struct {
	backend   Backend
	completer *completer
	cfg       Config
	log       *slog.Logger
	// device is nil without a device-info command.
	device      *device
	checkNow    chan struct{} // a device-info run is wanted
	presenceNow chan struct{} // presence should be sent now
	// reaper is a direct worker's standby reaper (nil otherwise): while
	// its lock session is open, the active reaper records this worker
	// alive, and an unchanged presence is not written.
	reaper      *maintenance.Reaper
	flight      flight // the last check's verdict
	claimMu     sync.Mutex
	claimCancel context.CancelFunc // of a claim under way
	// claimLog and presenceLog thin out the warnings of an outage.
	claimLog, presenceLog *outageLog
}

// NewDirect returns a Worker that works straight on PostgreSQL.
func NewDirect(pool *pgxpool.Pool, artifacts ArtifactStore, cfg Config) *Worker {
	cfg.Pool = pool
	cfg.Backend = Direct{Client: queue.NewClient(pool, cfg.Logger), Artifacts: artifacts}
	return New(cfg)
}

// New returns a Worker on cfg.Backend.
func New(cfg Config) *Worker {
	if len(cfg.Queues) == 0 {
		cfg.Queues = []string{"default"}
	}
	cfg.Concurrency = max(cfg.Concurrency, 1)
	cfg.Lease = queue.ClampLease(cfg.Lease)
	cfg.Heartbeat = cmp.Or(cfg.Heartbeat, cfg.Lease/3)
	cfg.Grace = cmp.Or(cfg.Grace, 30*time.Second)
	if cfg.Poll == 0 {
		// A direct worker hears of new jobs by LISTEN, so its poll is a
		// rare fallback; a remote one long-polls the server.
		cfg.Poll = time.Second
		if cfg.Pool != nil {
			cfg.Poll = 10 * time.Second
		}
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.DeviceInfoEvery = cmp.Or(cfg.DeviceInfoEvery, deviceInfoEvery)
	cfg.MinBattery = cmp.Or(cfg.MinBattery, queue.DefaultMinBattery)
	if cfg.Spool == nil {
		cfg.Spool, _ = OpenSpool("", DefaultSpoolMax) // in memory: cannot fail
	}
	log := cfg.Logger.With("worker", cfg.ID)
	w := &Worker{
		backend: cfg.Backend, completer: newCompleter(cfg.Backend, cfg.Concurrency, log), cfg: cfg, log: log,
		checkNow: make(chan struct{}, 1), presenceNow: make(chan struct{}, 1),
		claimLog:    newOutageLog(log, "claim failed", "claiming works again"),
		presenceLog: newOutageLog(log, "recording presence", "presence recorded again"),
	}
	if cfg.DeviceInfo != nil {
		w.device = &device{}
	}
	w.completer.claimParams = w.offerParams
	return w
}

// offerParams is the claim a completion batch makes for this worker
// (completer.offer): for every slot whose executor has ended, those of
// the batch's own jobs too (the loop starts nothing while its offer is
// out), and whether it may claim at all now.
func (w *Worker) offerParams() (queue.ClaimParams, bool) {
	limit := min(w.cfg.Concurrency-int(w.completer.executing.Load()), w.maxClaim())
	return queue.ClaimParams{
		WorkerID: w.cfg.ID, Queues: w.cfg.Queues, Devices: w.cfg.Devices, Limit: limit, Lease: w.cfg.Lease,
	}, limit > 0 && w.mayClaim()
}

// presenceEvery is how often a worker reports itself alive (a worker seen
// within queue.OnlineWindow counts as online).
const presenceEvery = 10 * time.Second

// Errors that say why a job's executor was stopped.
var (
	errLeaseLost = errors.New("lease lost")
	errCancelled = errors.New("cancel requested")
	errShutdown  = errors.New("worker shutting down")
)

// Run claims and runs jobs until ctx ends, then stops claiming, lets
// running jobs finish within the grace period, releases the leases of
// those still running, and returns.
func (w *Worker) Run(ctx context.Context) error {
	// Background work (reaper, listener, presence) outlives ctx until the
	// running jobs are settled.
	bg, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBg()
	var bgWG sync.WaitGroup
	defer bgWG.Wait()
	defer stopBg()

	wake := make(chan struct{}, 1)
	var notes *queue.JobNotifier // a direct worker's one listener
	var reaperWakes *queue.ReaperWakes
	if w.cfg.Pool != nil {
		notes = queue.NewJobNotifier(w.cfg.Pool, w.log)
		if w.cfg.Reaper {
			// The reaper hears its wake-ups on the job listener's session:
			// a direct worker listens on one session only, since every
			// listening session is woken (a transaction) by every
			// notification of the database.
			reaperWakes = notes.ReaperWakes()
			w.reaper = maintenance.NewReaper(w.cfg.Pool, maintenance.ReaperConfig{Logger: w.log, Wakes: reaperWakes, Worker: w.cfg.ID})
		}
	}
	bgWG.Go(func() { w.presence(bg) })
	if w.device != nil {
		bgWG.Go(func() { w.deviceInfo(bg, wake) })
	}
	if w.cfg.Preflight != nil {
		bgWG.Go(func() { w.recheck(bg, wake) })
	}
	bgWG.Go(func() { w.completer.run(bg) })
	if w.cfg.Pool != nil {
		bgWG.Go(func() { notes.Run(bg) })
		bgWG.Go(func() { w.listen(bg, notes, wake) })
		if w.reaper != nil {
			// The maintainer logs a reaper that gives up; the jobs go on.
			m := maintenance.NewMaintainer(w.log, w.reaper)
			bgWG.Go(func() { _ = m.Run(bg) })
		}
	}

	jobsCtx, stopJobs := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopJobs(nil)
	done := make(chan struct{}, w.cfg.Concurrency)
	var jobsWG sync.WaitGroup
	inflight := 0
	poll := time.NewTicker(w.cfg.Poll)
	defer poll.Stop()
	w.log.Info("worker started", "queues", w.cfg.Queues, "devices", w.cfg.Devices,
		"concurrency", w.cfg.Concurrency, "lease", w.cfg.Lease, "heartbeat", w.cfg.Heartbeat)

	// A direct worker's poll is the fallback for lost notifications: it
	// claims only when one was published since its last empty claim (a
	// reconnected listener publishes one), or after maxSkippedPolls, so
	// that an idle fleet of direct workers costs the database nothing
	// per poll.
	var idle pollSkipper
	skip := false
	// short is set when a direct worker's claim came back with fewer jobs
	// than it asked for: the database had no more for it, and slots freed
	// since cannot change that; a new due job or a freed limit (the end of
	// a job under a cap or a key, written after its slot was freed here)
	// is announced, and the poll is the fallback. Claiming on every freed
	// slot instead finds a capped queue still full, since the jobs freeing
	// it are still being written: a transaction for nothing, several per
	// round of a capped queue.
	short := false
	// While a direct worker is short because its limits are full, the
	// completions that free them claim for it in their own transaction
	// (completer.offer); offered says an offer is out.
	offered := false
	// launch starts claim's jobs; with offer, it makes the offer once they
	// count as executing and before any can end, so that no completion is
	// written (and announced) without it, and none claims their slots.
	launch := func(claim Claim, start time.Time, offer bool) {
		inflight += len(claim.Jobs)
		w.completer.executing.Add(int64(len(claim.Jobs)))
		if offer {
			offered = true
			w.completer.offer()
		}
		for _, job := range claim.Jobs {
			j := w.completer.join()
			jobsWG.Go(func() {
				var once sync.Once
				free := func() {
					once.Do(func() {
						w.completer.executing.Add(-1)
						done <- struct{}{}
					})
				}
				defer free()
				defer j.out()
				// Each job in its own goroutine: the hand-overs of one
				// claim are confirmed at once, not one after another.
				w.run(jobsCtx, job.Job, start.Add(min(job.Remaining, w.cfg.Lease)), claim.Handover, free, j)
				w.checkDevice() // after each job
			})
		}
	}
	// answered starts what a completion claimed; with again, the worker
	// offers once more while it is still short.
	answered := func(a offerAnswer, again bool) {
		short = short && a.err == nil && len(a.claim.Jobs) < a.asked
		offered = false
		launch(a.claim, leaseStart(a.sent, time.Now(), 0), again && short)
		w.completer.answered()
		if a.err != nil && ctx.Err() == nil {
			w.claimLog.failed(a.err)
		}
	}
	retract := func() {
		if offered && !w.completer.retract() {
			answered(<-w.completer.claimed, false)
		}
		offered = false
	}
	for ctx.Err() == nil {
		// An unfit phone (or one not checked yet) claims nothing; its
		// device-info run wakes the loop when that changes.
		if free := w.cfg.Concurrency - inflight; free > 0 && w.mayClaim() && !skip && !short {
			sent := time.Now()
			idle.claiming(notes)
			claim, err := w.claim(ctx, free)
			idle.claimed(err == nil && len(claim.Jobs) == 0)
			switch {
			case err == nil:
				w.claimLog.ok()
			case ctx.Err() == nil && !(errors.Is(err, context.Canceled) && !w.mayClaim()):
				w.claimLog.failed(err)
			}
			full := len(claim.Jobs) == min(free, w.maxClaim())
			short = !full && notes != nil && err == nil
			launch(claim, leaseStart(sent, time.Now(), claim.Waited), short)
			if full {
				continue // there may be more
			}
		}
		skip = false
		select {
		case <-ctx.Done():
		case a := <-w.completer.claimed:
			answered(a, true)
		case <-wake:
			retract()
			if short {
				w.completer.settle(ctx)
			}
			short = false
		case <-poll.C:
			retract()
			skip, short = idle.skip(notes), false
		case <-done:
			inflight--
		}
		// Claim for every slot freed meanwhile in one statement.
		for drained := false; !drained; {
			select {
			case <-done:
				inflight--
			default:
				drained = true
			}
		}
	}

	// Jobs a completion claimed meanwhile run within the grace period,
	// as any others.
	retract()
	w.log.Info("shutting down: no more claims", "running", inflight, "grace", w.cfg.Grace)
	settled := make(chan struct{})
	go func() { jobsWG.Wait(); close(settled) }()
	select {
	case <-settled:
	case <-time.After(w.cfg.Grace):
		w.log.Info("grace period over: releasing leases")
		stopJobs(errShutdown)
		<-settled
	}
	w.log.Info("worker stopped")
	return nil
}

// claim leases up to limit jobs. Shutdown cuts a remote claim's long
// poll, but not a direct claim's one statement: cut after it committed,
// the jobs it leased would be known to nobody until their leases ran out
// (counted attempts), instead of being run within the grace period and
// released.
func (w *Worker) claim(ctx context.Context, limit int) (Claim, error) {
	if _, waits := w.backend.(*Remote); !waits {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
	} else {
		// A phone found unfit while the long poll waits cuts it
		// (cutClaim): it must not be handed a job then.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		w.claimMu.Lock()
		w.claimCancel = cancel
		w.claimMu.Unlock()
		defer func() {
			w.claimMu.Lock()
			w.claimCancel = nil
			w.claimMu.Unlock()
			cancel()
		}()
	}
	// One claim takes at most maxClaim; the loop claims again for the
	// slots still free.
	return w.backend.Claim(ctx, queue.ClaimParams{
		WorkerID: w.cfg.ID, Queues: w.cfg.Queues, Devices: w.cfg.Devices, Limit: min(limit, w.maxClaim()), Lease: w.cfg.Lease,
	})
}

// maxClaim is the most jobs one claim of this worker's backend may take:
// the statement's bound, or through the worker API the bound of its answer.
func (w *Worker) maxClaim() int {
	if _, remote := w.backend.(*Remote); remote {
		return api.MaxClaimLimit
	}
	return queue.MaxClaimLimit
}

// leaseStart is the moment, by this worker's clock, from which it counts a
// lease it was just given; the lease must never be believed to last
// longer than it does by the database clock.
//
// The database set lease_until = now() + lease, now() being the claim
// statement's start, T. The worker cannot read T, but it can bound it from
// below: the request left at sent, the server received it no earlier, and
// then held it for waited (its long poll, by its own clock) before it
// began the statement; so T >= sent + waited, and sent + waited + lease is
// no later than lease_until, which is what safety needs. Counting from
// sent alone (as before) is safe too, but charges the lease with the
// server's waiting: a job that arrived 20s into a 25s poll had 10s of a
// 30s lease left, and a 6s lease was already over on arrival.
//
// waited cannot exceed received - sent (the answer came after the claim):
// a larger figure, from a confused or lying server, is capped there, so
// no lease is believed to end later than received + lease. Clock rates of
// the two machines are taken as equal; the heartbeat's margin absorbs
// drift over one lease.
func leaseStart(sent, received time.Time, waited time.Duration) time.Time {
	return sent.Add(min(max(waited, 0), received.Sub(sent)))
}

// run runs one job to its end and writes the outcome, unless the lease was
// lost: then the worker writes nothing more for it. validUntil is when the
// lease ends at the earliest, by this worker's clock. A job handed over
// is confirmed first (confirm), and not run at all unless that succeeds.
//
// free is called once the executor has ended: the slot takes its next
// job while this one's outcome is still being written, so claims and
// completions overlap instead of taking turns (the lease stays held, and
// fenced, until the outcome is written).
//
// j leaves completer.joining once no completion will come from the job,
// or its completion is handed over.
func (w *Worker) run(jobsCtx context.Context, job queue.Job, validUntil time.Time, handover bool, free func(), j *joiner) {
	claimedAt := time.Now()
	lease := queue.Lease{JobID: job.ID, Token: job.LeaseToken, WorkerID: w.cfg.ID}
	jl := &jobLog{base: w.log, job: job}
	// One line per job at info (its outcome); its claim is debug, since at
	// thousands of short jobs a second the log is a cost of its own.
	if w.log.Enabled(jobsCtx, slog.LevelDebug) {
		jl.get().Debug("job claimed", "kind", job.Kind)
	}

	// A hand-over's lease is short by design until it is confirmed: it
	// is never "late".
	if late := !handover && !time.Now().Before(validUntil.Add(-w.margin())); handover || late {
		// A hand-over runs only once the worker says it has the job; and
		// an answer that came too late to trust its lease (held up on
		// the network, say) is checked with the database before anything
		// starts. One renewal does both.
		var ok, cancelled bool
		if validUntil, cancelled, ok = w.confirm(jobsCtx, lease, late, jl); !ok {
			return
		}
		if cancelled {
			// Asked to stop before it started: end it cancelled unrun.
			free()
			j.out()
			ctx, cancel := context.WithDeadline(context.WithoutCancel(jobsCtx), validUntil)
			defer cancel()
			if err := w.retry(ctx, "cancelled", func(ctx context.Context) error { _, aerr := w.backend.AckCancel(ctx, lease); return aerr }); err != nil {
				jl.get().Warn("writing outcome", "err", err)
			}
			jl.get().Info("job cancelled before it started")
			return
		}
	}

	execCtx, stop := context.WithCancelCause(jobsCtx)
	defer stop(nil)
	beat := w.startHeartbeat(execCtx, lease, validUntil, stop, jl)

	if w.cfg.Preflight != nil {
		out, perr := w.cfg.Preflight(execCtx, &job, "")
		w.keepCheck(execCtx, lease, "preflight", out, perr, jl)
		if perr != nil && context.Cause(execCtx) == nil {
			// The phone is not fit: the job goes back unrun and uncounted,
			// and nothing is claimed until a preflight passes.
			reason := checkReason("preflight", perr)
			w.flight.set(reason)
			w.cutClaim()
			wakeUp(w.presenceNow)
			validUntil = beat.end()
			free()
			j.out()
			ctx, cancel := context.WithDeadline(context.WithoutCancel(jobsCtx), validUntil)
			defer cancel()
			if err := w.retry(ctx, "release", func(ctx context.Context) error { _, rerr := w.backend.Release(ctx, lease); return rerr }); err != nil {
				jl.get().Warn("writing outcome", "err", err)
			}
			jl.get().Warn("preflight failed: job released, not claiming", "reason", reason)
			return
		}
		if perr == nil && w.flight.clear() {
			wakeUp(w.presenceNow)
		}
	}

	rep := w.reporter(lease, jl, stop)
	result, err := w.cfg.Executor.Run(execCtx, job, rep)
	cause := context.Cause(execCtx)
	if w.cfg.Postflight != nil && !errors.Is(cause, errLeaseLost) {
		// While the lease still holds, so that its output is kept on the
		// attempt; the outcome is written after it.
		outcome := "succeeded"
		if err != nil {
			outcome = "failed"
		}
		pctx := context.WithoutCancel(execCtx)
		out, perr := w.cfg.Postflight(pctx, &job, outcome)
		w.keepCheck(pctx, lease, "postflight", out, perr, jl)
		if perr != nil {
			reason := checkReason("postflight", perr)
			w.flight.set(reason)
			w.cutClaim()
			wakeUp(w.presenceNow)
			jl.get().Warn("postflight failed: not claiming until a preflight passes", "reason", reason)
		}
	}
	validUntil = beat.end()
	free()
	if err != nil || errors.Is(cause, errLeaseLost) {
		j.out() // no completion follows
	}
	if errors.Is(cause, errLeaseLost) {
		rep.uploads.abandon()
		jl.get().Warn("job stopped: lease lost; writing nothing")
		return
	}

	// Writes of the outcome must happen even while the worker shuts down,
	// and are retried through outages for as long as the lease lasts:
	// after that the database refuses them anyway. They wait for the
	// attempt's uploads first (see uploads.settle).
	ctx, cancel := context.WithDeadline(context.WithoutCancel(jobsCtx), validUntil)
	defer cancel()
	rep.uploads.settle(ctx, validUntil)
	var werr error
	switch {
	case err == nil:
		werr = queue.CheckResult(result) // the rule the queue applies, before anything is sent
		if werr == nil {
			werr = w.completer.complete(ctx, queue.Completion{Lease: lease, Result: result}, j)
		} else {
			j.out()
		}
		if refused(werr) {
			// A result the queue will never take: end the attempt with the
			// reason now, rather than let its lease run out unexplained.
			jl.get().Warn("result refused; failing the attempt", "err", werr)
			reason := "result refused: " + werr.Error()
			werr = w.retry(ctx, "fail", func(ctx context.Context) error {
				_, ferr := w.backend.Fail(ctx, lease, reason, true)
				return ferr
			})
			break
		}
		if werr == nil {
			w.log.LogAttrs(ctx, slog.LevelInfo, "job succeeded", append(jl.attrs(),
				slog.String("kind", job.Kind), slog.Duration("took", time.Since(claimedAt)))...)
		}
	case errors.Is(cause, errCancelled):
		werr = w.retry(ctx, "cancelled", func(ctx context.Context) error { _, aerr := w.backend.AckCancel(ctx, lease); return aerr })
		jl.get().Info("job cancelled")
	case errors.Is(cause, errShutdown):
		werr = w.retry(ctx, "release", func(ctx context.Context) error { _, rerr := w.backend.Release(ctx, lease); return rerr })
		jl.get().Info("job released at shutdown")
	default:
		werr = w.retry(ctx, "fail", func(ctx context.Context) error {
			_, ferr := w.backend.Fail(ctx, lease, err.Error(), !IsPermanent(err))
			return ferr
		})
		jl.get().Info("job failed", "kind", job.Kind, "err", err, "permanent", IsPermanent(err))
	}
	if werr != nil {
		jl.get().Warn("writing outcome", "err", werr)
	}
}

// retry runs write until it succeeds, fails for a reason retrying cannot
// change, or ctx (the lease's deadline) ends; it backs off from 50ms to
// 2s between tries, so that a database or server restart of a few
// seconds costs no finished work.
func (w *Worker) retry(ctx context.Context, op string, write func(context.Context) error) error {
	return retryWrite(ctx, w.log, op, write)
}

func retryWrite(ctx context.Context, log *slog.Logger, op string, write func(context.Context) error) error {
	delay := 50 * time.Millisecond
	for {
		err := write(ctx)
		if !transient(err) || ctx.Err() != nil {
			return err
		}
		log.Warn("write failed; retrying until the lease ends", "op", op, "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
	}
}

// margin is how long before its lease could end the worker stops a job it
// cannot renew.
func (w *Worker) margin() time.Duration { return min(w.cfg.Heartbeat/2, time.Second) }

// confirm renews a lease before its executor starts: a job handed over
// (SPEC lease rule 11), whose first heartbeat tells the database that the
// worker has it, or one whose claim answered too late (late) for the
// worker to count on its lease. A renewal the database accepts proves the
// lease is current and says how long it has (the full lease, after a
// hand-over's short one). Otherwise the job is left alone: nothing has
// run, and the reaper takes it back (a hand-over not_delivered, uncounted).
//
// cancelled says a cancel was requested meanwhile.
func (w *Worker) confirm(ctx context.Context, lease queue.Lease, late bool, jl *jobLog) (validUntil time.Time, cancelled, ok bool) {
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.Heartbeat)
	defer cancel()
	sent := time.Now()
	res, err := w.backend.Heartbeat(callCtx, lease)
	why := "confirming the hand-over"
	if late {
		why = "the claim came too late to count on its lease, and renewing it"
	}
	if err != nil {
		jl.get().Warn(why+" failed: not running the job", "err", err)
		return time.Time{}, false, false
	}
	validUntil = sent.Add(min(res.Remaining, w.cfg.Lease))
	if !time.Now().Before(validUntil.Add(-w.margin())) {
		jl.get().Warn("the lease is too short to start the job: not running it", "lease_valid_for", time.Until(validUntil))
		return time.Time{}, false, false
	}
	if late {
		jl.get().Info("a late claim's lease confirmed by renewal", "lease_valid_for", time.Until(validUntil))
	}
	return validUntil, res.CancelRequested, true
}

// heartbeat renews the lease at once (it is called when the first renewal
// is due) and then every Heartbeat until done closes, and
// returns when the lease ends at the earliest. A refused renewal stops the
// executor at once. When renewals fail for another reason (database
// unreachable), the worker fences itself: it stops the executor before the
// lease could have run out by the database clock, measured from the moment
// the last successful renewal was sent.
func (w *Worker) heartbeat(ctx context.Context, lease queue.Lease, validUntil time.Time, stop context.CancelCauseFunc,
	done <-chan struct{}, log *slog.Logger) time.Time {
	// Deadlines here are local, measured from when a request was sent, by
	// durations the database computed: the two clocks are never compared.
	// A renewal in flight when the job ends is abandoned: the outcome's
	// write should not wait for it, and the lease it might have extended
	// is only longer than validUntil says.
	callBase, abandon := context.WithCancel(context.WithoutCancel(ctx))
	defer abandon()
	go func() { <-done; abandon() }()
	margin := w.margin()
	cancelled := false
	for {
		select {
		case <-done:
			return validUntil
		default:
		}
		if !time.Now().Before(validUntil.Add(-margin)) {
			log.Warn("fencing: lease could not be renewed in time", "lease_valid_for", time.Until(validUntil))
			stop(errLeaseLost)
			return validUntil
		}
		sent := time.Now()
		callCtx, cancel := context.WithDeadline(callBase, validUntil.Add(-margin))
		res, err := w.backend.Heartbeat(callCtx, lease)
		cancel()
		wait := w.cfg.Heartbeat
		switch {
		case callBase.Err() != nil:
			return validUntil // the job ended meanwhile
		case errors.Is(err, queue.ErrLeaseLost) || errors.Is(err, queue.ErrNotFound):
			log.Warn("heartbeat refused: lease lost")
			stop(errLeaseLost)
			return validUntil
		case err != nil:
			log.Warn("heartbeat failed", "err", err, "lease_valid_for", time.Until(validUntil))
			wait = min(w.cfg.Heartbeat, 250*time.Millisecond)
		default:
			validUntil = sent.Add(min(res.Remaining, w.cfg.Lease))
			if res.CancelRequested && !cancelled {
				cancelled = true
				log.Info("cancel requested: stopping job")
				stop(errCancelled)
			}
		}
		timer := time.NewTimer(min(wait, time.Until(validUntil.Add(-margin))))
		select {
		case <-done:
			timer.Stop()
			return validUntil
		case <-timer.C:
		}
	}
}

// A beat is a job's lease renewal. Most short jobs end before their first
// renewal is due, and for them it is one timer: the goroutine that renews
// starts only when the first renewal is.
type beat struct {
	timer      *time.Timer
	done       chan struct{} // closed when the job has ended
	finished   chan struct{} // closed when renewing has stopped
	validUntil time.Time
}

// startHeartbeat renews lease, first after Heartbeat (or sooner, if the
// lease would end first), until end is called.
func (w *Worker) startHeartbeat(ctx context.Context, lease queue.Lease, validUntil time.Time, stop context.CancelCauseFunc, jl *jobLog) *beat {
	b := &beat{done: make(chan struct{}), finished: make(chan struct{}), validUntil: validUntil}
	first := min(w.cfg.Heartbeat, time.Until(validUntil.Add(-w.margin())))
	b.timer = time.AfterFunc(first, func() {
		defer close(b.finished)
		b.validUntil = w.heartbeat(ctx, lease, b.validUntil, stop, b.done, jl.get())
	})
	return b
}

// end stops renewing and returns when the lease ends at the earliest.
func (b *beat) end() time.Time {
	close(b.done)
	if !b.timer.Stop() {
		<-b.finished // renewing had begun: let it return its last deadline
	}
	return b.validUntil
}

// jobLog is a job's logger, made when a job first has something to say
// beyond its one outcome line: With formats its attributes up front, and
// at thousands of short jobs a second that is a cost of its own.
type jobLog struct {
	base *slog.Logger
	job  queue.Job
	once sync.Once
	l    *slog.Logger
}

func (j *jobLog) attrs() []slog.Attr {
	return []slog.Attr{slog.Int64("job_id", j.job.ID), slog.Int("attempt", int(j.job.Attempt)), slog.Int64("token", j.job.LeaseToken)}
}

func (j *jobLog) get() *slog.Logger {
	j.once.Do(func() { j.l = slog.New(j.base.Handler().WithAttrs(j.attrs())) })
	return j.l
}

// listen turns job notifications for this worker's queues into wake-ups;
// the poll is the fallback when notifications are lost.
func (w *Worker) listen(ctx context.Context, n *queue.JobNotifier, wake chan<- struct{}) {
	waiter := n.Waiter()
	for waiter.Wait(ctx, w.cfg.Queues) == nil {
		wakeUp(wake)
	}
}

func wakeUp(wake chan<- struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}

// presence records this worker as alive for /workers and the stats. A
// direct worker whose reaper lock session is open is recorded alive by
// the active reaper (maintenance.ReaperConfig.Worker), so it writes only
// what changed: its first presence, a changed device report, devices or
// queues. An idle direct fleet then costs the database one statement per
// queue.SessionPresenceEvery, not one per worker.
func (w *Worker) presence(ctx context.Context) {
	every := presenceEvery
	// Until one presence of this process is recorded, each says it is
	// the first: that dates the worker's start (a worker restarted under
	// the same id is a new start, not the id's first presence ever).
	starting := true
	var last presenceKey
	for {
		p := queue.Presence{
			ID: w.cfg.ID, Devices: w.cfg.Devices, Queues: w.cfg.Queues, Device: w.deviceReport(), Starting: starting,
		}
		key := keyOf(p, time.Now())
		if starting || w.reaper == nil || !w.reaper.SessionOpen() || !key.same(last) {
			// Bounded, so that a network gone silent cannot stall presence.
			callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := w.backend.WorkerSeen(callCtx, p)
			cancel()
			switch {
			case err == nil:
				starting = false
				last = key
				w.presenceLog.ok()
			case ctx.Err() == nil:
				w.presenceLog.failed(err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		case <-w.presenceNow: // the phone's health changed
		}
	}
}

// presenceKey is what a presence says, but for when it was sent: two
// equal keys need not both be written.
type presenceKey struct {
	devices, queues string
	device          bool
	info            string
	gathered        time.Time // when the info was gathered
	infoError       string
	claiming        bool
	reason          string
}

func keyOf(p queue.Presence, now time.Time) presenceKey {
	k := presenceKey{devices: strings.Join(p.Devices, "\x00"), queues: strings.Join(p.Queues, "\x00")}
	if d := p.Device; d != nil {
		k.device, k.info, k.infoError, k.claiming, k.reason = true, string(d.Info), d.Error, d.Claiming, d.Reason
		if d.Info != nil {
			k.gathered = now.Add(-d.InfoAge)
		}
	}
	return k
}

// same reports whether k says what o said: the same info counts as new
// when it was gathered again (a second or more apart), since the workers
// page shows when.
func (k presenceKey) same(o presenceKey) bool {
	gap := k.gathered.Sub(o.gathered)
	k.gathered, o.gathered = time.Time{}, time.Time{}
	return k == o && gap < time.Second && gap > -time.Second
}

// maxSkippedPolls is how many polls in a row a direct worker skips at
// most: a deployment without any reaper (none announces scheduled jobs
// as they fall due) still finds them within that many polls.
const maxSkippedPolls = 30

// pollSkipper remembers whether a direct worker's last claim came back
// empty, and what its listener had published before it began.
type pollSkipper struct {
	before  uint64 // the notifier's latest when the claim began
	pending uint64
	empty   bool
	skipped int
}

func (p *pollSkipper) claiming(n *queue.JobNotifier) {
	if n != nil {
		p.pending = n.Latest()
	}
}

func (p *pollSkipper) claimed(empty bool) {
	p.empty, p.before, p.skipped = empty, p.pending, 0
}

// skip reports whether the poll may skip its claim: the last one came
// back empty, and nothing was published since it began.
func (p *pollSkipper) skip(n *queue.JobNotifier) bool {
	if n == nil || !p.empty || n.Latest() != p.before || p.skipped >= maxSkippedPolls {
		return false
	}
	p.skipped++
	return true
}
