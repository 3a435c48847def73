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
}

// notification is one link of a chain: done is closed when it arrives,
// and from then on queues and after are set.
type notification struct {
	done   chan struct{}
	queues string // comma-separated; "" means every queue
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
func (n *JobNotifier) Run(ctx context.Context) {
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := n.session(ctx)
		if ctx.Err() != nil {
			return
		}
		n.logger.Warn("job listener stopped", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

func (n *JobNotifier) session(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, n.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connecting listener: %w", err)
	}
	defer conn.Close(context.Background())
	if err := db.New(conn).ListenJobs(ctx); err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	n.publish("")
	for {
		msg, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("waiting for jobs: %w", err)
		}
		n.publish(msg.Payload)
	}
}

func (n *JobNotifier) publish(queues string) {
	n.mu.Lock()
	cur := n.next
	cur.queues, cur.after = queues, &notification{done: make(chan struct{})}
	n.next = cur.after
	close(cur.done)
	n.mu.Unlock()
}

// Waiter is a position in the notification stream. Take one before
// looking for jobs, so that nothing sent after the look is missed.
type Waiter struct {
	n   *JobNotifier
	cur *notification
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
		w.cur = w.cur.after
		if got == "" || slices.ContainsFunc(strings.Split(got, ","), func(q string) bool { return slices.Contains(queues, q) }) {
			return nil
		}
	}
}
