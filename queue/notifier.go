package queue

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
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
}

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
}

// Waiter returns a waiter positioned at the next notification.
func (n *JobNotifier) Waiter() *Waiter {
	n.mu.Lock()
	defer n.mu.Unlock()
	return &Waiter{n: n, cur: n.next}
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
type ClaimGate struct {
	notifier *JobNotifier
	slots    chan struct{}
	mu       sync.Mutex
	empty    map[string]uint64 // key → latest notification when an empty claim began
}

// maxGateKeys bounds the memory of empty claims; past it, the gate
// forgets them all (a forgotten one only costs a claim).
const maxGateKeys = 10_000

// NewClaimGate returns a gate that lets concurrent woken claims run at once.
func NewClaimGate(n *JobNotifier, concurrent int) *ClaimGate {
	return &ClaimGate{notifier: n, slots: make(chan struct{}, max(concurrent, 1)), empty: map[string]uint64{}}
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
	key := strings.Join(p.Queues, ",") + "|" + strings.Join(p.Devices, ",")
	g.mu.Lock()
	skip := g.empty[key] >= w.Seen()
	g.mu.Unlock()
	if skip {
		return nil, nil
	}
	began := g.notifier.Latest()
	jobs, err := claim()
	if err == nil && len(jobs) == 0 {
		g.mu.Lock()
		if len(g.empty) >= maxGateKeys {
			clear(g.empty)
		}
		g.empty[key] = max(g.empty[key], began)
		g.mu.Unlock()
	}
	return jobs, err
}
