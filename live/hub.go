// Package live fans the database's change notifications out to the
// dashboard's Server-Sent Event streams (GET /events): one LISTEN per
// server, any number of streams. Every event has an id; a stream that
// reconnects with the last id it saw gets what it missed from a ring of
// recent events, or a reset when the id is too old or not this server's.
// A stream that falls behind its bounded buffer is dropped (the browser
// reconnects), so a slow browser never holds up the others.
package live

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// Event names, as the browser sees them (htmx: hx-trigger="sse:NAME").
const (
	// EventJobs: jobs were submitted, changed state or were deleted
	// (overview, jobs list, workers).
	EventJobs = "jobs"
	// EventDead: jobs went dead or left the dead-letter queue.
	EventDead = "dead"
	// EventWorkers: a worker came, went silent or changed.
	EventWorkers = "workers"
	// EventJob goes only to a stream opened for one job: that job changed
	// or has something new (a progress message, a screenshot).
	EventJob = "job"
	// EventReset: what the stream missed cannot be replayed; reload the
	// live parts of the page.
	EventReset = "reset"
)

// Config tunes a Hub; zero values take the defaults.
type Config struct {
	// Buffer is how many events a stream may have waiting before it is
	// dropped (default 64).
	Buffer int
	// Ring is how many events are kept for replay (default 1024).
	Ring int
	// Coalesce is the least time between two events of one name (default
	// 250 ms; negative: none): a 20,000-job drain makes a few events a
	// second, not one per batch. The last change always gets its event.
	Coalesce time.Duration
	// WorkerOnline is how long after its last report a worker is
	// announced gone (default a second past queue.OnlineWindow, so that
	// the page it refreshes no longer counts the worker online).
	WorkerOnline time.Duration
	// MaxStreams bounds the streams open at once (default 1000).
	MaxStreams int
	// WatchRenew is how often KeepWatched renews the server's watch while
	// streams are open, and notices that none are (default 20 s; a watch
	// lasts three times that).
	WatchRenew time.Duration
}

// Errors of Subscribe.
var (
	ErrClosed     = errors.New("live updates have stopped")
	ErrTooMany    = errors.New("too many open event streams")
	errBadEventID = errors.New("malformed event id")
)

// maxNamedJobs is how many job ids one event names at most; past it the
// event concerns every job.
const maxNamedJobs = 100

// Event is one message of a stream.
type Event struct {
	ID   string // "BOOT-SEQ": BOOT is this hub's, SEQ grows by one per event
	Name string
	Data string // JSON, one line
}

// entry is an event as the ring keeps it, before it is addressed to a
// stream.
type entry struct {
	seq   uint64
	name  string
	ids   []int64 // nil: every job
	data  string
	about bool // ids say which jobs it is about (EventJobs, EventJob)
}

// pending is an event held back to coalesce with what follows.
type pending struct {
	all    bool // some change named no ids
	ids    []int64
	states []string
}

// Hub is the fan-out of one server.
type Hub struct {
	cfg  Config
	boot string

	mu      sync.Mutex
	closed  bool
	seq     uint64
	ring    []entry // circular, oldest at start
	start   int
	streams map[*Stream]struct{}
	held    map[string]*pending    // name → what waits for its coalescing window
	last    map[string]time.Time   // name → when its last event went out
	online  map[string]*time.Timer // worker → when to announce it silent
	opened  chan struct{}          // a stream opened while none was
}

// maxTrackedWorkers bounds the workers whose silence is timed.
const maxTrackedWorkers = 10_000

// NewHub returns a hub; feed it with Notify (queue.JobNotifier.WatchChanges).
func NewHub(cfg Config) *Hub {
	cfg.Buffer = cmp.Or(cfg.Buffer, 64)
	cfg.Ring = cmp.Or(cfg.Ring, 1024)
	cfg.Coalesce = cmp.Or(cfg.Coalesce, 250*time.Millisecond)
	cfg.WorkerOnline = cmp.Or(cfg.WorkerOnline, queue.OnlineWindow+time.Second)
	cfg.MaxStreams = cmp.Or(cfg.MaxStreams, 1000)
	cfg.WatchRenew = cmp.Or(cfg.WatchRenew, 20*time.Second)
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &Hub{
		cfg: cfg, boot: hex.EncodeToString(b[:]),
		streams: map[*Stream]struct{}{}, held: map[string]*pending{}, last: map[string]time.Time{},
		online: map[string]*time.Timer{}, opened: make(chan struct{}, 1),
	}
}

// Watcher tells the database whether this server has open streams: the
// database's change notifications are sent only while some server does
// (migration 13's live_watchers).
type Watcher interface {
	Watch(ctx context.Context, server string, ttl time.Duration) error
	Unwatch(ctx context.Context, server string) error
}

// KeepWatched keeps this server's watch while it has streams, until ctx
// ends: renewed every WatchRenew and lasting three times that, so that a
// server that dies stops the notifications within a minute. When a watch begins, every stream gets a reset: what changed
// before it went unannounced, so the pages reload their live parts.
func (h *Hub) KeepWatched(ctx context.Context, w Watcher, log *slog.Logger) {
	watching := false
	defer func() {
		if watching {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = w.Unwatch(ctx, h.boot)
		}
	}()
	renew := time.NewTicker(h.cfg.WatchRenew)
	defer renew.Stop()
	for {
		switch open := h.Streams() > 0; {
		case open:
			if err := w.Watch(ctx, h.boot, 3*h.cfg.WatchRenew); err != nil {
				log.Warn("live updates: watching changes", "err", err)
				break
			}
			if !watching {
				watching = true
				h.Notify(queue.Change{Kind: queue.ChangesMissed})
			}
		case watching:
			if err := w.Unwatch(ctx, h.boot); err != nil {
				log.Warn("live updates: unwatching changes", "err", err)
				break
			}
			watching = false
		}
		select {
		case <-ctx.Done():
			return
		case <-h.opened:
		case <-renew.C:
		}
	}
}

// Notify turns a change into events. It never blocks on a stream.
func (h *Hub) Notify(c queue.Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	switch c.Kind {
	case queue.ChangeJobs:
		states := make([]string, len(c.States))
		for i, s := range c.States {
			states[i] = string(s)
		}
		h.emit(EventJobs, c.JobIDs, states)
		if slices.Contains(c.States, queue.StateDead) {
			h.emit(EventDead, nil, nil)
		}
	case queue.ChangeJobActivity:
		h.emit(EventJob, c.JobIDs, nil)
	case queue.ChangeWorker:
		h.workerSeen(c.WorkerID, c.WorkerChanged)
	case queue.ChangesMissed:
		h.emit(EventReset, nil, nil)
	}
}

// workerSeen announces a worker that is new, changed, or back; and
// announces it again once it has been silent for WorkerOnline.
func (h *Hub) workerSeen(id string, changed bool) {
	t, known := h.online[id]
	if known {
		t.Reset(h.cfg.WorkerOnline)
	} else if len(h.online) < maxTrackedWorkers {
		h.online[id] = time.AfterFunc(h.cfg.WorkerOnline, func() { h.workerSilent(id) })
	}
	if changed || !known {
		h.emit(EventWorkers, nil, nil)
	}
}

func (h *Hub) workerSilent(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	delete(h.online, id)
	h.emit(EventWorkers, nil, nil)
}

// emit sends an event of name now, or holds it back until the name's
// coalescing window ends, merged with whatever else comes meanwhile.
// Callers hold h.mu.
func (h *Hub) emit(name string, ids []int64, states []string) {
	p := h.held[name]
	if p == nil {
		p = &pending{}
		wait := h.cfg.Coalesce - time.Since(h.last[name])
		if wait > 0 {
			h.held[name] = p
			time.AfterFunc(wait, func() { h.flush(name) })
		}
	}
	p.all = p.all || ids == nil
	if !p.all {
		for _, id := range ids {
			if !slices.Contains(p.ids, id) {
				p.ids = append(p.ids, id)
			}
		}
		if len(p.ids) > maxNamedJobs {
			p.all, p.ids = true, nil
		}
	}
	for _, s := range states {
		if !slices.Contains(p.states, s) {
			p.states = append(p.states, s)
		}
	}
	if h.held[name] != p {
		h.publish(name, p)
	}
}

func (h *Hub) flush(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.held[name]
	delete(h.held, name)
	if p != nil && !h.closed {
		h.publish(name, p)
	}
}

// publish numbers an event, keeps it in the ring and hands it to every
// stream that wants it; a stream whose buffer is full is dropped. Callers
// hold h.mu.
func (h *Hub) publish(name string, p *pending) {
	h.seq++
	h.last[name] = time.Now()
	e := entry{seq: h.seq, name: name}
	if name == EventJobs || name == EventJob {
		e.about = true
		if !p.all {
			e.ids = slices.Clone(p.ids)
			slices.Sort(e.ids)
		}
	}
	e.data = eventData(e, p.states)
	if len(h.ring) < h.cfg.Ring {
		h.ring = append(h.ring, e)
	} else {
		h.ring[h.start] = e
		h.start = (h.start + 1) % len(h.ring)
	}
	for s := range h.streams {
		ev, ok := s.address(h, e)
		if !ok {
			continue
		}
		select {
		case s.ch <- ev:
		default:
			h.drop(s)
		}
	}
}

func eventData(e entry, states []string) string {
	v := map[string]any{}
	if e.about {
		v["ids"] = e.ids
	}
	if states != nil {
		slices.Sort(states)
		v["states"] = states
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// drop ends a stream; callers hold h.mu.
func (h *Hub) drop(s *Stream) {
	if _, ok := h.streams[s]; !ok {
		return
	}
	delete(h.streams, s)
	close(s.done)
}

func (h *Hub) id(seq uint64) string { return h.boot + "-" + strconv.FormatUint(seq, 10) }

// LastID is the id of the latest event: a page rendered now passes it to
// its stream, so that what happens before the stream opens is replayed.
func (h *Hub) LastID() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.id(h.seq)
}

// Subscribe opens a stream. job > 0 makes it a job page's: it hears only
// EventJob (about that job) and EventReset. lastID is the last event the
// browser saw (Last-Event-ID), or "": replay holds what came after it, or
// a reset when it cannot be replayed.
func (h *Hub) Subscribe(lastID string, job int64) (s *Stream, replay []Event, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil, ErrClosed
	}
	if len(h.streams) >= h.cfg.MaxStreams {
		return nil, nil, ErrTooMany
	}
	s = &Stream{h: h, job: job, ch: make(chan Event, h.cfg.Buffer), done: make(chan struct{})}
	if lastID != "" {
		replay = h.replay(s, lastID)
	}
	h.streams[s] = struct{}{}
	if len(h.streams) == 1 {
		select {
		case h.opened <- struct{}{}:
		default:
		}
	}
	return s, replay, nil
}

// replay is what came after lastID for s, or a reset. Callers hold h.mu.
func (h *Hub) replay(s *Stream, lastID string) []Event {
	seq, err := h.parseID(lastID)
	oldest := h.seq - uint64(len(h.ring)) + 1 // the ring holds oldest…h.seq
	if err != nil || seq > h.seq || seq+1 < oldest {
		return []Event{{ID: h.id(h.seq), Name: EventReset, Data: `{}`}}
	}
	var out []Event
	for i := range h.ring {
		e := h.ring[(h.start+i)%len(h.ring)]
		if e.seq <= seq {
			continue
		}
		if ev, ok := s.address(h, e); ok {
			out = append(out, ev)
		}
	}
	return out
}

// parseID reads an id of this hub; another server's, or garbage, is an
// error.
func (h *Hub) parseID(id string) (uint64, error) {
	boot, seq, ok := strings.Cut(id, "-")
	if !ok || boot != h.boot {
		return 0, errBadEventID
	}
	n, err := strconv.ParseUint(seq, 10, 64)
	if err != nil {
		return 0, errBadEventID
	}
	return n, nil
}

// Close ends every stream and refuses new ones (graceful shutdown).
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	for s := range h.streams {
		h.drop(s)
	}
	for _, t := range h.online {
		t.Stop()
	}
}

// Streams is how many streams are open.
func (h *Hub) Streams() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.streams)
}

// Stream is one browser's subscription.
type Stream struct {
	h    *Hub
	job  int64
	ch   chan Event
	done chan struct{}
}

// Events delivers the stream's events in order.
func (s *Stream) Events() <-chan Event { return s.ch }

// Done is closed when the hub drops the stream: it fell behind, or the
// hub closed. The stream should end; the browser reconnects.
func (s *Stream) Done() <-chan struct{} { return s.done }

// Close unsubscribes.
func (s *Stream) Close() {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	s.h.drop(s)
}

// address is e as s sees it, if s wants it at all.
func (s *Stream) address(h *Hub, e entry) (Event, bool) {
	ev := Event{ID: h.id(e.seq), Name: e.name, Data: e.data}
	if e.name == EventReset {
		return ev, true
	}
	if s.job > 0 {
		if !e.about || (e.ids != nil && !slices.Contains(e.ids, s.job)) {
			return Event{}, false
		}
		ev.Name = EventJob
		return ev, true
	}
	return ev, e.name != EventJob
}
