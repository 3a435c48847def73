package maintenance

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/webhooksig"
)

// Webhook sender defaults.
const (
	webhookBaseDelay = 2 * time.Second
	webhookMaxDelay  = 10 * time.Minute
	webhookMaxAge    = 24 * time.Hour
	// DefaultWebhookTimeout bounds one request, answer included.
	DefaultWebhookTimeout = 10 * time.Second
	// webhookHoldMargin is how much longer than a request a claimed event
	// stays held: a sender that dies mid-request leaves it due again soon
	// after.
	webhookHoldMargin = 20 * time.Second
	// webhookOfflineAfter is how long a worker goes unseen before it is
	// announced offline.
	webhookOfflineAfter = queue.OnlineWindow
	// webhookMaxSleep bounds the idle sender's sleep: a fallback for a
	// notification lost while its listener reconnected. Notifications
	// carry the work.
	webhookMaxSleep = time.Minute
	// DefaultWebhookConcurrency is how many deliveries are under way at
	// once by default.
	DefaultWebhookConcurrency = 16
	// webhookSettle is the least time between two looks at the outbox
	// that notifications start: a steady stream of completion batches gets
	// one look per settle, not one per batch.
	webhookSettle = 10 * time.Millisecond
	// webhookMaxResponse is how much of a receiver's answer is read.
	webhookMaxResponse = 64 << 10
)

// The bounds of --webhook-concurrency and --webhook-timeout.
const (
	maxWebhookConcurrency = 256
	minWebhookTimeout     = 100 * time.Millisecond
	maxWebhookTimeout     = 5 * time.Minute
)

// CheckWebhookDelivery checks the sender's concurrency and request
// timeout as the server's flags give them.
func CheckWebhookDelivery(concurrency int, timeout time.Duration) error {
	if concurrency < 1 || concurrency > maxWebhookConcurrency {
		return fmt.Errorf("LEASEHOLD_WEBHOOK_CONCURRENCY (--webhook-concurrency) %d: want 1 to %d", concurrency, maxWebhookConcurrency)
	}
	if timeout < minWebhookTimeout || timeout > maxWebhookTimeout {
		return fmt.Errorf("LEASEHOLD_WEBHOOK_TIMEOUT (--webhook-timeout) %v: want %v to %v", timeout, minWebhookTimeout, maxWebhookTimeout)
	}
	return nil
}

// WebhookSenderConfig configures a WebhookSender.
type WebhookSenderConfig struct {
	Webhook queue.WebhookConfig
	Logger  *slog.Logger
	// Timeout bounds one request, answer included (10 s).
	Timeout time.Duration
	// Concurrency is how many deliveries may be under way at once (16):
	// each holds one slot until its answer or its timeout, and a free slot
	// takes the next due event at once, so a slow receiver holds back at
	// most the slots of its own requests.
	Concurrency int
	// Hold is how long a claimed event stays claimed (Timeout + 20 s): a
	// sender that dies mid-request leaves it due again then. Tests shorten
	// it.
	Hold time.Duration
	// BaseDelay is the first retry's delay (2 s), doubling up to MaxDelay
	// (10 min); an event is given up once its next try would come later
	// than MaxAge (24 h) after it. Tests shorten them.
	BaseDelay, MaxDelay, MaxAge time.Duration
	// OfflineAfter is how long a worker goes unseen before worker.offline
	// (30 s).
	OfflineAfter time.Duration
	// OnDelivery is called after every attempt (metrics), OnGiveUp for
	// every event given up.
	OnDelivery func(ok bool)
	OnGiveUp   func()
}

// WebhookSender delivers the outbox. Every server with a webhook URL runs
// one; one is active (the "webhooks" leader role, see lead), so an event is
// sent by one process at a time. The active one keeps up to Concurrency
// requests under way, each on its own; it sleeps until the next event is
// due, or a worker could go offline, by the database clock, and is woken
// by the outbox trigger's NOTIFY and by each delivery that ends.
type WebhookSender struct {
	leader
	client *queue.Client
	q      *db.Queries
	cfg    WebhookSenderConfig
	http   *http.Client
}

// NewWebhookSender returns a sender for pool's database.
func NewWebhookSender(pool *pgxpool.Pool, cfg WebhookSenderConfig) *WebhookSender {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.BaseDelay = cmp.Or(cfg.BaseDelay, webhookBaseDelay)
	cfg.MaxDelay = cmp.Or(cfg.MaxDelay, webhookMaxDelay)
	cfg.MaxAge = cmp.Or(cfg.MaxAge, webhookMaxAge)
	cfg.OfflineAfter = cmp.Or(cfg.OfflineAfter, webhookOfflineAfter)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultWebhookTimeout)
	cfg.Hold = cmp.Or(cfg.Hold, cfg.Timeout+webhookHoldMargin)
	cfg.Concurrency = max(cmp.Or(cfg.Concurrency, DefaultWebhookConcurrency), 1)
	// No redirects followed: a 3xx is a failed attempt. Each slot may keep
	// its connection open for the next attempt.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = cfg.Concurrency
	hc := &http.Client{
		Timeout:       cfg.Timeout,
		Transport:     transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &WebhookSender{
		leader: leader{role: "webhooks", pool: pool, logger: cfg.Logger},
		client: queue.NewClient(pool, cfg.Logger), q: db.New(pool), cfg: cfg, http: hc,
	}
}

// Run sends while it holds the webhooks role, until ctx ends, taking the
// role again after errors.
func (s *WebhookSender) Run(ctx context.Context) error { return s.run(ctx, s.send) }

// inflight is the active sender's deliveries under way, by outbox id.
type inflight struct {
	mu   sync.Mutex
	busy map[int64]bool
	err  error // the first outcome that could not be recorded
	wg   sync.WaitGroup
	// ended gets a value when a delivery ends (coalesced): a slot is free,
	// and a failed event may be due again before anything else.
	ended chan struct{}
}

// ids is the events under way, never nil (a nil array is NULL in SQL).
func (f *inflight) ids() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]int64, 0, len(f.busy))
	for id := range f.busy {
		ids = append(ids, id)
	}
	return ids
}

func (f *inflight) failed() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// send is the active sender.
func (s *WebhookSender) send(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connecting webhook listener: %w", err)
	}
	defer conn.Close(context.Background())
	if err := db.New(conn).ListenWebhooks(ctx); err != nil {
		return fmt.Errorf("listening for webhook events: %w", err)
	}
	s.cfg.Logger.Info("webhook sender active", "url", s.cfg.Webhook.URL, "events", s.cfg.Webhook.Events,
		"concurrency", s.cfg.Concurrency, "timeout", s.cfg.Timeout)

	// Deliveries and the listener end with this role: deliveries cut
	// short release their events for whichever sender is next.
	ctx, cancel := context.WithCancel(ctx)
	f := &inflight{busy: map[int64]bool{}, ended: make(chan struct{}, 1)}
	notified := make(chan struct{}, 1)
	listenErr := make(chan error, 1)
	var listener sync.WaitGroup
	listener.Go(func() { listenErr <- listen(ctx, conn, notified) })
	defer func() {
		cancel()
		f.wg.Wait()
		listener.Wait()
	}()

	offline := slices.Contains(s.cfg.Webhook.Events, queue.WebhookWorkerOffline)
	// offlineDue is when workers are next looked at: when the next one
	// seen could count as offline, not at every delivery that ends.
	var looked, offlineDue time.Time
	for {
		if offline && !time.Now().Before(offlineDue) {
			if _, err := s.q.WebhookWorkersOffline(ctx, s.cfg.OfflineAfter.Milliseconds()); err != nil {
				return fmt.Errorf("looking for workers gone offline: %w", err)
			}
			ms, err := s.q.WebhookNextOffline(ctx, s.cfg.OfflineAfter.Milliseconds())
			if err != nil {
				return fmt.Errorf("reading next worker offline: %w", err)
			}
			// A millisecond late, so that the worker is surely past it; and
			// at least every OfflineAfter, since a worker that comes back
			// sends no notification.
			offlineDue = time.Now().Add(min(waitMs(ms)+time.Millisecond, s.cfg.OfflineAfter))
		}
		looked = time.Now()
		busy, err := s.startDue(ctx, f)
		if err != nil {
			return err
		}
		// Full: the next look comes when a delivery ends.
		wait := webhookMaxSleep
		if len(busy) < s.cfg.Concurrency {
			ms, err := s.q.WebhookNextDue(ctx, busy)
			if err != nil {
				return fmt.Errorf("reading next webhook due: %w", err)
			}
			wait = waitMs(ms)
		}
		if offline {
			wait = min(wait, time.Until(offlineDue))
		}
		timer := time.NewTimer(max(wait, time.Millisecond))
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case err := <-listenErr:
			timer.Stop()
			return err
		case <-f.ended:
			if err := f.failed(); err != nil {
				timer.Stop()
				return err
			}
		case <-notified:
			// Every completion batch notifies: one look serves all those
			// that come within webhookSettle of the last.
			if settle := webhookSettle - time.Since(looked); settle > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(settle):
				}
			}
		case <-timer.C:
		}
		timer.Stop()
	}
}

// startDue claims due events for the free slots and starts a delivery for
// each. It returns the events under way.
func (s *WebhookSender) startDue(ctx context.Context, f *inflight) ([]int64, error) {
	busy := f.ids()
	free := s.cfg.Concurrency - len(busy)
	if free <= 0 {
		return busy, nil
	}
	rows, err := s.q.WebhookClaimDue(ctx, db.WebhookClaimDueParams{Max: int32(free), Busy: busy, HoldMs: s.cfg.Hold.Milliseconds()})
	if err != nil {
		return nil, fmt.Errorf("claiming webhook events: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, row := range rows {
		f.busy[row.ID] = true
		busy = append(busy, row.ID)
		f.wg.Go(func() {
			err := s.deliver(ctx, row)
			f.mu.Lock()
			delete(f.busy, row.ID)
			if err != nil && ctx.Err() == nil && f.err == nil {
				f.err = err
			}
			f.mu.Unlock()
			select {
			case f.ended <- struct{}{}:
			default:
			}
		})
	}
	return busy, nil
}

// listen passes the outbox trigger's notifications on, coalesced, until
// ctx ends or the connection fails.
func listen(ctx context.Context, conn *pgx.Conn, notified chan<- struct{}) error {
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("waiting for webhook events: %w", err)
		}
		select {
		case notified <- struct{}{}:
		default:
		}
	}
}

// waitMs turns a wait the database computed into a duration, at most
// webhookMaxSleep.
func waitMs(ms float64) time.Duration {
	if math.IsInf(ms, 1) || ms > float64(webhookMaxSleep/time.Millisecond) {
		return webhookMaxSleep
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// deliver makes one attempt and records its outcome; an error means the
// outcome could not be recorded (the event is held, and due again later).
func (s *WebhookSender) deliver(ctx context.Context, row db.WebhookClaimDueRow) error {
	var body []byte
	if row.Body != nil {
		body = []byte(*row.Body)
	} else {
		var err error
		if body, err = s.render(ctx, row); err != nil {
			return err
		}
	}
	status, sendErr := s.post(ctx, row, body)
	log := s.cfg.Logger.With("event_id", row.EventID, "event", row.Type, "attempt", row.Attempts)
	if row.JobID != nil {
		log = log.With("job_id", *row.JobID)
	}
	if ctx.Err() != nil && sendErr != nil {
		// Shutting down: due again at once, for whichever sender is next
		// (a release that fails leaves it held until its hold ends).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = s.q.WebhookRelease(rctx, row.ID)
		return ctx.Err()
	}
	if sendErr == nil {
		// Delivered, even if the sender is stopping now: recorded, so that
		// the next sender does not send it again.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Timeout)
		defer cancel()
		if err := s.q.WebhookDelivered(rctx, db.WebhookDeliveredParams{OutboxID: row.ID, Status: int32(status)}); err != nil {
			return fmt.Errorf("recording webhook delivered: %w", err)
		}
		log.Info("webhook delivered", "status", status)
		if s.cfg.OnDelivery != nil {
			s.cfg.OnDelivery(true)
		}
		return nil
	}
	var st *int32
	if status != 0 {
		st = new(int32(status))
	}
	delay := webhookBackoff(row.Attempts, s.cfg.BaseDelay, s.cfg.MaxDelay)
	givenUp, err := s.q.WebhookFailed(ctx, db.WebhookFailedParams{
		OutboxID: row.ID, DelayMs: delay.Milliseconds(), MaxAgeMs: s.cfg.MaxAge.Milliseconds(),
		SentBody: string(body), Status: st, Error: queue.CleanText(sendErr.Error(), 1000),
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // deleted meanwhile
	}
	if err != nil {
		return fmt.Errorf("recording webhook failure: %w", err)
	}
	if s.cfg.OnDelivery != nil {
		s.cfg.OnDelivery(false)
	}
	if givenUp {
		log.Warn("webhook given up", "err", sendErr, "age", time.Since(row.At).Round(time.Second))
		if s.cfg.OnGiveUp != nil {
			s.cfg.OnGiveUp()
		}
		return nil
	}
	log.Warn("webhook failed", "err", sendErr, "retry_in", delay)
	return nil
}

// webhookBackoff is the delay after the n-th failed attempt:
// base·2^(n-1), at most max.
func webhookBackoff(n int32, base, maxDelay time.Duration) time.Duration {
	d := base
	for i := int32(1); i < n && d < maxDelay; i++ {
		d *= 2
	}
	return min(d, maxDelay)
}

// render builds an event's body: the job as the API shows it (as it is
// at the first attempt; every later attempt sends the same body), or the
// worker. A job deleted meanwhile is sent as its id alone.
func (s *WebhookSender) render(ctx context.Context, row db.WebhookClaimDueRow) ([]byte, error) {
	ev := api.WebhookEvent{ID: row.EventID, Type: row.Type, At: api.Time(row.At)}
	switch {
	case row.JobID != nil:
		job, err := s.client.Get(ctx, *row.JobID)
		switch {
		case errors.Is(err, queue.ErrNotFound):
			ev.Job = json.RawMessage(`{"id":` + strconv.FormatInt(*row.JobID, 10) + `}`)
		case err != nil:
			return nil, fmt.Errorf("reading the job of a webhook event: %w", err)
		default:
			if ev.Job, err = json.Marshal(job.API()); err != nil {
				return nil, fmt.Errorf("encoding job: %w", err)
			}
		}
	case row.WorkerID != nil:
		ev.Worker = &api.WebhookWorker{ID: *row.WorkerID, Queues: []string{}}
		w, err := s.q.WebhookWorkerGet(ctx, *row.WorkerID)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("reading the worker of a webhook event: %w", err)
		}
		if err == nil {
			ev.Worker = &api.WebhookWorker{ID: w.ID, Device: w.Device, Queues: w.Queues, StartedAt: api.Time(w.StartedAt), LastSeen: api.Time(w.LastSeen)}
		}
	}
	return json.Marshal(ev)
}

// post sends one attempt. A 2xx is success; anything else, a network
// error or a timeout is a failed attempt (status 0 when no answer came).
func (s *WebhookSender) post(ctx context.Context, row db.WebhookClaimDueRow, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.Webhook.URL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Leasehold-Webhooks/1")
	req.Header.Set("Leasehold-Event-Id", row.EventID)
	req.Header.Set("Leasehold-Event-Type", row.Type)
	req.Header.Set(webhooksig.Header, webhooksig.Sign(s.cfg.Webhook.Secret, time.Now(), body))
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, webhookMaxResponse))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("receiver answered %s", resp.Status)
	}
	return resp.StatusCode, nil
}
