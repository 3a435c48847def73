package queue

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
)

// PresenceBatch records the presence of a server's remote workers, many
// reports in one statement: a thousand workers reporting every 10 s cost
// the database one transaction every PresenceBatchEvery, not a hundred a
// second. A report waits for the statement that records it (group
// commit), so that its answer still says whether it was recorded: a lone
// report, after a quiet PresenceBatchEvery, is written at once. Each
// report's last_seen is when the server received it, not when the batch
// was written, so that the online window means what it did.
type PresenceBatch struct {
	c     *Client
	every time.Duration
	kick  chan struct{}

	mu      sync.Mutex
	pending map[string]pendingReport // by worker id
	// done is closed when the statement holding the pending reports ends;
	// recorded and err are its outcome.
	done *batchOutcome
	// stopped is set once Run returned: reports are written as they come.
	stopped bool
}

// PresenceBatchEvery is how often a server writes its remote workers'
// presence at most.
const PresenceBatchEvery = 2 * time.Second

type pendingReport struct {
	p        Presence
	received time.Time
}

type batchOutcome struct {
	done     chan struct{}
	recorded map[string]bool
	err      error
}

// NewPresenceBatch returns a batch that writes at most once every every
// (default PresenceBatchEvery); call Run.
func (c *Client) NewPresenceBatch(every time.Duration) *PresenceBatch {
	return &PresenceBatch{c: c, every: cmp.Or(every, PresenceBatchEvery), kick: make(chan struct{}, 1),
		pending: map[string]pendingReport{}, done: &batchOutcome{done: make(chan struct{})}}
}

// ErrNotRecorded means a presence was not recorded: the worker's token
// is no longer active (revoked since the request was let in).
var ErrNotRecorded = fmt.Errorf("%w: presence not recorded", ErrTokenRevoked)

// Record records p, the presence of the remote worker whose token is
// named p.ID, with the next statement of the batch, and returns once
// that statement ended: ErrNotRecorded when the token is not active. A
// report the workers table should not hold is refused at once, as by
// WorkerSeen.
func (b *PresenceBatch) Record(ctx context.Context, p Presence) error {
	if err := checkDevices(p.Devices); err != nil {
		return err
	}
	if p.Device != nil {
		if err := p.Device.check(); err != nil {
			return err
		}
	}
	b.mu.Lock()
	b.pending[p.ID] = pendingReport{p: p, received: time.Now()}
	out, stopped := b.done, b.stopped
	b.mu.Unlock()
	if stopped { // shutting down: no Run writes it
		b.flush(ctx)
	}
	select {
	case b.kick <- struct{}{}:
	default:
	}
	select {
	case <-out.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if out.err != nil {
		return out.err
	}
	if !out.recorded[p.ID] {
		return ErrNotRecorded
	}
	return nil
}

// Run writes the reports as they come, at most once every b.every, until
// ctx ends; then it writes what is pending one last time.
func (b *PresenceBatch) Run(ctx context.Context) {
	defer func() {
		b.mu.Lock()
		b.stopped = true
		b.mu.Unlock()
		b.flush(context.WithoutCancel(ctx))
	}()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.kick:
		}
		if wait := b.every - time.Since(last); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		last = time.Now()
		b.flush(ctx)
	}
}

// batchTimeout bounds one statement of the batch.
const batchTimeout = 10 * time.Second

// presenceRow is one row of WorkerSeenMany's reports.
type presenceRow struct {
	ID          string          `json:"id"`
	Device      *string         `json:"device,omitempty"`
	Queues      string          `json:"queues"`
	AgeMs       int64           `json:"age_ms"`
	Info        json.RawMessage `json:"info,omitempty"`
	InfoAgeMs   *int64          `json:"info_age_ms,omitempty"`
	InfoError   *string         `json:"info_error,omitempty"`
	Claiming    bool            `json:"claiming"`
	NotClaiming *string         `json:"not_claiming,omitempty"`
}

func (b *PresenceBatch) flush(ctx context.Context) {
	b.mu.Lock()
	reports, out := b.pending, b.done
	b.pending, b.done = map[string]pendingReport{}, &batchOutcome{done: make(chan struct{})}
	b.mu.Unlock()
	defer close(out.done)
	if len(reports) == 0 {
		return
	}
	now := time.Now()
	rows := make([]presenceRow, 0, len(reports))
	for _, r := range reports {
		row := presenceRow{ID: r.p.ID, Queues: strings.Join(r.p.Queues, ","), AgeMs: max(now.Sub(r.received).Milliseconds(), 0), Claiming: true}
		if len(r.p.Devices) > 0 {
			row.Device = ptr(strings.Join(r.p.Devices, ","))
		}
		if d := r.p.Device; d != nil {
			if d.Info != nil {
				row.Info, row.InfoAgeMs = d.Info, ptr(max(d.InfoAge.Milliseconds(), 0))
			}
			row.Claiming = d.Claiming
			if d.Error != "" {
				row.InfoError = ptr(d.Error)
			}
			if !d.Claiming {
				row.NotClaiming = ptr(cmp.Or(d.Reason, "not claiming"))
			}
		}
		rows = append(rows, row)
	}
	body, err := json.Marshal(rows)
	if err != nil {
		out.err = fmt.Errorf("recording workers: %w", err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, batchTimeout)
	defer cancel()
	ids, err := b.c.q.WorkerSeenMany(ctx, body)
	if err != nil {
		out.err = fmt.Errorf("recording workers: %w", err)
		return
	}
	out.recorded = make(map[string]bool, len(ids))
	for _, id := range ids {
		out.recorded[id] = true
	}
}
