package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// maxCompletionBatch bounds one completion statement.
const maxCompletionBatch = 500

// completionLinger is how long a batch that found company waits for more:
// under load, batches grow with it (fewer commits and statements per job);
// a lone completion of an idle worker still leaves at once.
const completionLinger = 5 * time.Millisecond

// firstCompanyWait is how long a lone completion waits for another while
// other jobs run, and completionCheck how often a lingering batch looks
// whether any still does.
const (
	firstCompanyWait = time.Millisecond
	completionCheck  = 250 * time.Microsecond
)

type completion struct {
	queue.Completion
	// ctx ends when the completion is no longer worth writing: its lease
	// has run out, and the database would refuse it.
	ctx   context.Context
	reply chan error
}

// completer writes successes in batches: whatever finished while the
// previous batch was being written goes out in the next one. An idle
// worker's single completion leaves at once, so batching adds no latency;
// a busy one commits once per batch instead of once per job. A lone
// completion while other jobs of the worker still run waits
// firstCompanyWait for company, and a batch stops waiting once no job
// can join it any more (joining): jobs claimed together end together,
// and one write of them all frees a capped queue's room at once, for
// one claim to fill, instead of a write (and a claim) for the first of
// them and another for the rest.
//
// A batch that fails for a passing reason (the database restarting, the
// server unreachable) is written again with backoff until each
// completion's lease has run out: a finished job must not turn into a
// lease_expired attempt that runs its work again because of an outage of a
// few seconds.
type completer struct {
	client Backend
	in     chan completion
	log    *slog.Logger
	// minDelay and maxDelay bound the backoff between tries.
	minDelay, maxDelay time.Duration
	// linger is completionLinger but in tests.
	linger time.Duration
	// executing counts the worker's jobs whose executors have not ended;
	// joining, those that may still hand over a completion (executing, or
	// ended with a completion the writer has not yet received): the
	// writer takes one off for each completion it receives (take), and a
	// job from which none will come takes itself off. A batch gathers
	// while any is joining: counting executing jobs alone, a batch left in
	// the moment between a job's end and the hand-over of its completion,
	// which then went in the next batch, and a keyed drain's rounds split
	// in two that never joined again.
	executing, joining atomic.Int64
	// pending counts completions handed over and not yet written, and
	// written hears when a batch was.
	pending atomic.Int64
	written chan struct{}

	// offered is set while the worker waits for room under its limits:
	// the next batch written claims for it in its own transaction (offer).
	// claimed answers each offer a batch took. claimParams is what to
	// claim then, for the worker's slots free at that moment, and false
	// when it may not claim (an unfit phone, no slot free). Only a Backend
	// that is a completeClaimer takes offers.
	offered     atomic.Bool
	claimed     chan offerAnswer
	claimParams func() (queue.ClaimParams, bool)
	// awaiting is set while the worker has an answer that leaves it short
	// and has not yet said whether it offers again; decided says it has.
	// The next batch waits for that (awaitDecision), so that it does not
	// leave without the offer only because the worker had not yet taken
	// the answer: written without a claim, its completions would be
	// announced, and the worker would claim their room by a transaction of
	// its own.
	awaiting atomic.Bool
	decided  chan struct{}
}

// offerAnswer is what a batch that took the worker's offer claimed,
// and when its statement was sent (the leases count from then); asked
// is how many jobs it asked for, 0 when it claimed nothing.
type offerAnswer struct {
	claim Claim
	sent  time.Time
	asked int
	err   error
}

func newCompleter(client Backend, capacity int, log *slog.Logger) *completer {
	return &completer{client: client, in: make(chan completion, capacity), log: log,
		minDelay: 50 * time.Millisecond, maxDelay: 2 * time.Second, linger: completionLinger, written: make(chan struct{}, 1),
		claimed: make(chan offerAnswer, 1), decided: make(chan struct{}, 1)}
}

// offer asks the next batch written to claim for the worker in its
// transaction; the worker has at most one offer out.
func (cp *completer) offer() {
	cp.offered.Store(true)
}

// answer hands a to the worker.
func (cp *completer) answer(a offerAnswer) {
	cp.claimed <- a
}

// answered tells the completer that the worker took its answer and, if
// it still waits for room, offered again.
func (cp *completer) answered() {
	cp.awaiting.Store(false)
	select {
	case cp.decided <- struct{}{}:
	default:
	}
}

// awaitDecision waits, at most settleWait, until the worker has taken the
// last answer that left it short.
func (cp *completer) awaitDecision(ctx context.Context) {
	if !cp.awaiting.Load() {
		return
	}
	t := time.NewTimer(settleWait)
	defer t.Stop()
	for cp.awaiting.Load() {
		select {
		case <-cp.decided:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// retract takes the offer back: false when a batch took it, and its
// answer is (or will be) on claimed.
func (cp *completer) retract() bool {
	return cp.offered.Swap(false)
}

// takeOffer takes the worker's offer, if it made one, for a batch about
// to be written.
func (cp *completer) takeOffer() bool {
	if _, ok := cp.client.(completeClaimer); !ok || cp.claimParams == nil {
		return false
	}
	return cp.offered.Swap(false)
}

// claimTimeout bounds a completion batch that claims: like a direct
// claim, it is not cut by the worker's shutdown or by its completions'
// leases, since jobs it leased and committed would be known to nobody.
const claimTimeout = 30 * time.Second

// completeThenClaim writes cs and claims for p in one transaction,
// and answers the worker's offer with what it claimed. On an error
// nothing was written.
func (cp *completer) completeThenClaim(ctx context.Context, cs []queue.Completion, p queue.ClaimParams) ([]error, error) {
	sent := time.Now()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
	defer cancel()
	errs, claim, err := cp.client.(completeClaimer).CompleteManyThenClaim(cctx, cs, p)
	if err == nil && len(claim.Jobs) < p.Limit {
		// Still short: the worker offers again once it has taken this.
		select {
		case <-cp.decided:
		default:
		}
		cp.awaiting.Store(true)
	}
	cp.answer(offerAnswer{claim: claim, sent: sent, asked: p.Limit, err: err})
	return errs, err
}

// joiner is one job's place in completer.joining, left once: by out, when
// no completion will come from the job, or by the writer receiving its
// completion (take), after which handedOver only marks it left.
type joiner struct {
	cp   *completer
	once sync.Once
}

// join counts a job about to start in joining.
func (cp *completer) join() *joiner {
	cp.joining.Add(1)
	return &joiner{cp: cp}
}

func (j *joiner) out()        { j.once.Do(func() { j.cp.joining.Add(-1) }) }
func (j *joiner) handedOver() { j.once.Do(func() {}) }

// complete hands c to the writer and waits for its outcome, at most until
// ctx ends; the writer gives c up when ctx ends. The writer counts c's job
// out of joining when it receives c; if c is never handed over, j does.
func (cp *completer) complete(ctx context.Context, c queue.Completion, j *joiner) error {
	reply := make(chan error, 1)
	cp.pending.Add(1)
	select {
	case cp.in <- completion{Completion: c, ctx: ctx, reply: reply}:
		j.handedOver()
	case <-ctx.Done():
		j.out()
		cp.pending.Add(-1)
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run writes batches until ctx ends.
func (cp *completer) run(ctx context.Context) {
	for {
		var batch []completion
		select {
		case <-ctx.Done():
			return
		case c := <-cp.in:
			batch = cp.take(batch, c)
		}
		batch = cp.gather(batch)
		cp.write(ctx, batch)
		cp.pending.Add(-int64(len(batch)))
		select {
		case cp.written <- struct{}{}:
		default:
		}
	}
}

// settleWait bounds how long settle waits.
const settleWait = 2 * completionLinger

// settle waits until the completions handed over so far are written, at
// most settleWait. A worker whose last claim was short because limits
// were full claims again when a freed limit is announced; if its own
// completions are being written then, they free more of its limits a
// moment later, and one claim after them fills what two would: claiming
// at once splits the worker's jobs into rounds that never join again
// (measured: claims of 47 and 3 jobs, in turn, for 50 keys of limit 1).
func (cp *completer) settle(ctx context.Context) {
	deadline := time.After(settleWait)
	for cp.pending.Load() > 0 {
		select {
		case <-cp.written:
		case <-deadline:
			return
		case <-ctx.Done():
			return
		}
	}
}

// gather adds to batch what is queued, and when that was anything (the
// worker is busy), what arrives within completionLinger while jobs still
// run; a lone completion waits firstCompanyWait for company while others
// run.
func (cp *completer) gather(batch []completion) []completion {
	var linger <-chan time.Time
	var check *time.Ticker
	defer func() {
		if check != nil {
			check.Stop()
		}
	}()
	for len(batch) < maxCompletionBatch {
		select {
		case c := <-cp.in:
			batch = cp.take(batch, c)
			if linger == nil {
				linger = time.After(cp.linger)
			}
			continue
		default:
		}
		if linger == nil {
			if cp.joining.Load() == 0 {
				return batch
			}
			select {
			case c := <-cp.in:
				batch = cp.take(batch, c)
				linger = time.After(cp.linger)
				continue
			case <-time.After(firstCompanyWait):
				return batch
			}
		}
		if cp.joining.Load() == 0 {
			return batch
		}
		if check == nil {
			check = time.NewTicker(completionCheck)
		}
		select {
		case c := <-cp.in:
			batch = cp.take(batch, c)
		case <-check.C:
		case <-linger:
			return batch
		}
	}
	return batch
}

// take adds c, just received, to batch: its job no longer joins.
func (cp *completer) take(batch []completion, c completion) []completion {
	cp.joining.Add(-1)
	return append(batch, c)
}

// write writes batch, retrying while the failure is transient.
func (cp *completer) write(ctx context.Context, batch []completion) {
	delay := cp.minDelay
	// The worker's offer, if it made one, goes with the first try.
	cp.awaitDecision(ctx)
	claim := cp.takeOffer()
	defer func() {
		if claim {
			cp.answer(offerAnswer{}) // every offer taken is answered
		}
	}()
	for {
		batch = cp.dropExpired(batch)
		if len(batch) == 0 {
			return
		}
		cs := make([]queue.Completion, len(batch))
		for i, c := range batch {
			cs[i] = c.Completion
		}
		var p queue.ClaimParams
		if claim {
			var may bool
			if p, may = cp.claimParams(); !may {
				p = queue.ClaimParams{}
				cp.answer(offerAnswer{})
			}
			claim = false
		}
		var errs []error
		var err error
		if p.Limit > 0 {
			errs, err = cp.completeThenClaim(ctx, cs, p)
		} else {
			wctx, cancel := cp.batchContext(ctx, batch)
			errs, err = cp.client.CompleteMany(wctx, cs)
			cancel()
		}
		switch {
		case err == nil:
			// Per completion: nil, or a refusal that retrying cannot change
			// (ErrLeaseLost, ErrNotFound); but one that failed for a passing
			// reason (a remote write cut off) goes round again.
			var again []completion
			for i, c := range batch {
				if transient(errs[i]) && c.ctx.Err() == nil {
					again, err = append(again, c), errs[i]
					continue
				}
				c.reply <- errs[i]
			}
			if len(again) == 0 {
				return
			}
			batch = again
		case !transient(err) || ctx.Err() != nil:
			// One bad row must not fail the others: write them one by one.
			cp.log.Warn("batch completion failed; completing one by one", "jobs", len(batch), "err", err)
			for _, c := range batch {
				c.reply <- retryWrite(c.ctx, cp.log, "complete", func(ctx context.Context) error {
					_, err := cp.client.Complete(ctx, c.Lease, c.Result)
					return err
				})
			}
			return
		}
		cp.log.Warn("completing jobs failed; retrying until their leases end", "jobs", len(batch), "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(delay*2, cp.maxDelay)
	}
}

// dropExpired answers the completions whose leases have run out and
// returns the others.
func (cp *completer) dropExpired(batch []completion) []completion {
	live := batch[:0]
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.reply <- errors.Join(errors.New("lease ran out before the completion could be written"), err)
			continue
		}
		live = append(live, c)
	}
	return live
}

// batchContext bounds one write of batch by the latest of its leases: the
// database fences each row by its own.
func (cp *completer) batchContext(ctx context.Context, batch []completion) (context.Context, context.CancelFunc) {
	var last time.Time
	for _, c := range batch {
		d, ok := c.ctx.Deadline()
		if !ok {
			return context.WithCancel(ctx)
		}
		if d.After(last) {
			last = d
		}
	}
	return context.WithDeadline(ctx, last)
}
