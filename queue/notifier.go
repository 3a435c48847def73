package queue

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/db"
)

// JobNotifier tells any number of waiters that jobs became due in their
// queues, from one LISTEN connection: a direct worker's idle loop, or the
// server's long-polling claim endpoint for remote workers.
type JobNotifier struct {
	pool   *pgxpool.Pool
	logger *slog.Logger
	mu     sync.Mutex
	next   *notification
	latest uint64 // seq of the last notification published
	// changes, when set, hears every change the database announces.
	changes func(Change)
	// tokens, when set, hears when API tokens changed (WatchTokens).
	tokens func(listening bool)
	// reaper, when set, hears the reaper's wake-ups (ReaperWakes).
	reaper *ReaperWakes
}

// tokensChanged is the payload on the jobs channel that says an API
// token was revoked or given another secret (queries/api_tokens.sql,
// TokensChanged); no queue is named so (queue names never hold "!").
const tokensChanged = "!tokens"

// reaperChannel is the reaper's wake-ups (queries/jobs.sql).
const reaperChannel = "leasehold_reaper"

// notification is one link of a chain: done is closed when it arrives,
// and from then on queues and after are set.
type notification struct {
	done   chan struct{}
	queues string // comma-separated; "" means every queue
	seq    uint64 // 1, 2, 3, … in the order published
	after  *notification
}

// NewJobNotifier returns a notifier on pool's database; call Run.
func NewJobNotifier(pool *pgxpool.Pool, logger *slog.Logger) *JobNotifier {
	if logger == nil {
		logger = slog.Default()
	}
	return &JobNotifier{pool: pool, logger: logger, next: &notification{done: make(chan struct{})}}
}

// Run listens until ctx ends, reconnecting with backoff. After every
// (re)connection it wakes all waiters, since notifications sent while it
// was not listening are lost.
//
// The backoff stays short (listenRetryMax) and starts afresh after a
// session that listened: long polls and live pages hear of new jobs
// again within a second of a database that comes back, however many
// outages came before.
func (n *JobNotifier) Run(ctx context.Context) {
	delay := time.Duration(0)
	for ctx.Err() == nil {
		listened, err := n.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if listened {
			delay = 0
		}
		delay = min(max(2*delay, listenRetryMin), listenRetryMax)
		n.logger.Warn("job listener stopped", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
	}
}

// The bounds of JobNotifier.Run's backoff.
const (
	listenRetryMin = 25 * time.Millisecond
	listenRetryMax = 250 * time.Millisecond
)

// WatchChanges makes the notifier also hear what changed for the
// dashboard (jobs, their progress and artifacts, workers' presence) on
// the same connection, and call fn with each change, and with
// ChangesMissed after every (re)connection. fn runs on the listener's
// goroutine: it must not block. Call it before Run.
func (n *JobNotifier) WatchChanges(fn func(Change)) { n.changes = fn }

// WatchTokens makes the notifier call fn(true) once it listens (after
// every reconnection) and on every change of an API token, and fn(false)
// when its connection ends: what apitoken.Store.Listening needs to
// remember tokens safely. fn runs on the listener's goroutine: it must
// not block. Call it before Run.
func (n *JobNotifier) WatchTokens(fn func(listening bool)) { n.tokens = fn }

// ReaperWakes makes the notifier also hear the reaper's wake-ups
// (leasehold_reaper) on the same connection, and returns where they
// arrive. PostgreSQL wakes every listening session of a database for
// every notification on any channel, each wake a transaction: a process
// whose reaper listened on a session of its own cost two for every job
// announced and every freed limit. Call it before Run.
func (n *JobNotifier) ReaperWakes() *ReaperWakes {
	if n.reaper == nil {
		n.reaper = &ReaperWakes{signal: make(chan struct{}, 1)}
	}
	return n.reaper
}

// ReaperWakes holds the soonest wake-up the reaper was asked for and not
// yet took. A claim's notification carries how soon its earliest new
// lease can end (ms); any other payload, and every (re)connection of the
// listener (notifications sent while it was not listening are lost), asks
// for a wake-up now.
type ReaperWakes struct {
	mu      sync.Mutex
	pending time.Time // zero: none
	signal  chan struct{}
}

func (r *ReaperWakes) note(payload string) {
	at := time.Now()
	if ms, err := strconv.ParseFloat(payload, 64); err == nil {
		at = at.Add(time.Duration(ms * float64(time.Millisecond)))
	}
	r.mu.Lock()
	if r.pending.IsZero() || at.Before(r.pending) {
		r.pending = at
	}
	r.mu.Unlock()
	select {
	case r.signal <- struct{}{}:
	default:
	}
}

// Sleep waits until until, or until a wake-up sooner than until was asked
// for (woke); wake-ups asked for at or after until are dropped, since
// the reaper looks again then anyway.
func (r *ReaperWakes) Sleep(ctx context.Context, until time.Time) (woke bool, err error) {
	timer := time.NewTimer(time.Until(until))
	defer timer.Stop()
	for {
		r.mu.Lock()
		at := r.pending
		r.pending = time.Time{}
		r.mu.Unlock()
		if !at.IsZero() && at.Before(until) {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-timer.C:
			return false, nil
		case <-r.signal:
		}
	}
}

// session listens on one connection until it fails; listened reports
// that it got as far as listening.
func (n *JobNotifier) session(ctx context.Context) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, n.pool.Config().ConnConfig.Copy())
	if err != nil {
		return false, fmt.Errorf("connecting listener: %w", err)
	}
	defer conn.Close(context.Background())
	if err := db.New(conn).ListenJobs(ctx); err != nil {
		return false, fmt.Errorf("listening: %w", err)
	}
	if n.reaper != nil {
		if err := db.New(conn).ListenReaper(ctx); err != nil {
			return false, fmt.Errorf("listening for reaper wake-ups: %w", err)
		}
		n.reaper.note("")
	}
	if n.tokens != nil {
		n.tokens(true)
		defer n.tokens(false)
	}
	if n.changes != nil {
		if err := db.New(conn).ListenChanges(ctx); err != nil {
			return false, fmt.Errorf("listening for changes: %w", err)
		}
		n.changes(Change{Kind: ChangesMissed})
	}
	n.publish("")
	for {
		msg, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, fmt.Errorf("waiting for jobs: %w", err)
		}
		if msg.Channel == reaperChannel {
			if n.reaper != nil {
				n.reaper.note(msg.Payload)
			}
			continue
		}
		if msg.Channel == changesChannel {
			if n.changes == nil {
				continue
			}
			ch, err := parseChange(msg.Payload)
			if err != nil {
				n.logger.Warn("ignoring a change notification", "err", err)
				continue
			}
			n.changes(ch)
			continue
		}
		if msg.Payload == tokensChanged {
			if n.tokens != nil {
				n.tokens(true)
			}
			// Waiting claims claim again: those of a revoked token end
			// (ErrTokenRevoked), even if its leases were never ended.
			n.publish("")
			continue
		}
		n.publish(msg.Payload)
	}
}

func (n *JobNotifier) publish(queues string) {
	n.mu.Lock()
	cur := n.next
	n.latest++
	cur.queues, cur.seq, cur.after = queues, n.latest, &notification{done: make(chan struct{})}
	n.next = cur.after
	close(cur.done)
	n.mu.Unlock()
}

// Waiter is a position in the notification stream. Take one before
// looking for jobs, so that nothing sent after the look is missed.
type Waiter struct {
	n    *JobNotifier
	cur  *notification
	seen uint64
	// from is the last notification published before the waiter was
	// taken: it hears every one after it.
	from uint64
}

// Waiter returns a waiter positioned at the next notification.
func (n *JobNotifier) Waiter() *Waiter {
	n.mu.Lock()
	defer n.mu.Unlock()
	return &Waiter{n: n, cur: n.next, from: n.latest}
}

// Wait blocks until a notification names one of queues (or all queues),
// or ctx ends.
func (w *Waiter) Wait(ctx context.Context, queues []string) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.cur.done:
		}
		got := w.cur.queues
		w.seen = w.cur.seq
		w.cur = w.cur.after
		if got == "" || slices.ContainsFunc(strings.Split(got, ","), func(q string) bool { return slices.Contains(queues, q) }) {
			return nil
		}
	}
}

// Seen is the notification that ended the last Wait.
func (w *Waiter) Seen() uint64 { return w.seen }

// Latest is the last notification published so far.
func (n *JobNotifier) Latest() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.latest
}

// ClaimGate keeps a crowd of long-polling claims from all running a claim
// statement when one notification wakes them: a thousand idle home
// workers would otherwise make a thousand claims for every job announced.
// Woken claims take one of a few slots in turn, and one whose notification
// is older than the start of a claim with the same key (queues and
// devices) that came back empty skips its claim: that claim saw every job
// the notification announced, and they are all taken.
//
// Not every change that makes a job claimable notifies: time alone opens
// an availability window and ends a rate-limit window. So an empty claim
// is remembered for ClaimGateMemory at most; after it, the next poll of
// the key claims again (one claim per key and ClaimGateMemory, however
// many workers poll it).
type ClaimGate struct {
	notifier *JobNotifier
	slots    chan struct{}
	memory   time.Duration
	mu       sync.Mutex
	empty    map[string]emptyClaim
}

// emptyClaim is the latest notification when an empty claim of a key
// began, and when it ended.
type emptyClaim struct {
	seen uint64
	at   time.Time
}

// ClaimGateMemory is how long a ClaimGate trusts an empty claim: the
// longest a job made claimable by time alone (a window opening, a
// rate-limit budget returning) waits for a long-polling worker.
const ClaimGateMemory = 15 * time.Second

// maxGateKeys bounds the memory of empty claims; past it, the gate
// forgets them all (a forgotten one only costs a claim).
const maxGateKeys = 10_000

// NewClaimGate returns a gate that lets concurrent woken claims run at once.
func NewClaimGate(n *JobNotifier, concurrent int) *ClaimGate {
	return &ClaimGate{notifier: n, slots: make(chan struct{}, max(concurrent, 1)), memory: ClaimGateMemory, empty: map[string]emptyClaim{}}
}

// First runs a long poll's first claim, the one before its waiter w has
// heard anything, unless it need not: when a claim with the same key came
// back empty and began after every notification published before w was
// taken, nothing can have become due for this one that w will not hear
// of (every change that makes a job claimable notifies). So a fleet of
// idle workers whose polls end and begin again, each poll of the same
// key after the first, costs the database nothing. It returns no jobs
// and no error when it skipped.
func (g *ClaimGate) First(w *Waiter, p ClaimParams, claim func() ([]Job, error)) ([]Job, error) {
	key := gateKey(p)
	if g.emptySince(key, w.from) {
		return nil, nil
	}
	jobs, err := claim()
	if err == nil && len(jobs) == 0 {
		g.recordEmpty(key, w.from) // it began after w was taken
	}
	return jobs, err
}

func gateKey(p ClaimParams) string {
	return strings.Join(p.Queues, ",") + "|" + strings.Join(p.Devices, ",")
}

// emptySince reports whether a claim of key that began at or after
// notification seen came back empty within the gate's memory.
func (g *ClaimGate) emptySince(key string, seen uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.empty[key]
	return ok && e.seen >= seen && time.Since(e.at) < g.memory
}

func (g *ClaimGate) recordEmpty(key string, began uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.empty) >= maxGateKeys {
		clear(g.empty)
	}
	e := g.empty[key]
	g.empty[key] = emptyClaim{seen: max(e.seen, began), at: time.Now()}
}

// Claim runs claim for a waiter that w woke, unless it need not. It returns
// no jobs and no error when it skipped, or when ctx ended while it waited
// for a slot.
func (g *ClaimGate) Claim(ctx context.Context, w *Waiter, p ClaimParams, claim func() ([]Job, error)) ([]Job, error) {
	select {
	case g.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, nil
	}
	defer func() { <-g.slots }()
	key := gateKey(p)
	if g.emptySince(key, w.Seen()) {
		return nil, nil
	}
	began := g.notifier.Latest()
	jobs, err := claim()
	if err == nil && len(jobs) == 0 {
		g.recordEmpty(key, began)
	}
	return jobs, err
}
