package queue

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/window"
)

// WaitKind names why a pending job is not running. The values are
// stable: the API, the pages and scripts use them.
type WaitKind string

// The reasons, in the order WhyWaiting tries them: when several hold,
// the first one is the answer. Those a person must act on come first
// (they hold until someone does), then those that end on their own at a
// known time, then those that end when other jobs finish:
//
//  1. WaitQueuePaused: nothing of a paused queue starts, whatever else.
//  2. WaitNoWorker, 3. WaitNoDevice, 4. WaitDevicesUnfit,
//     WaitOutsideWindow: no worker could take the job now even once it is
//     due and has room.
//  5. WaitBackoff, 6. WaitScheduled: the job is not due yet; claims do
//     not look at it before then, so no cap or key holds it back yet.
//     WaitRateLimited: due, but a rate-limit key's budget is spent until
//     a known time.
//  7. WaitQueueAtCap, then 8. WaitKeyHeld: due, but the queue or the
//     concurrency key has no room now.
//  9. WaitReady: due, with room and a worker: one picks it up now.
const (
	// WaitQueuePaused: the job's queue is paused (PausedBy, PausedAt).
	WaitQueuePaused WaitKind = "queue_paused"
	// WaitNoWorker: no worker seen within OnlineWindow takes the queue.
	WaitNoWorker WaitKind = "no_worker_for_queue"
	// WaitNoDevice: workers take the queue, but none online carries the
	// job's device label.
	WaitNoDevice WaitKind = "no_matching_device"
	// WaitDevicesUnfit: every online worker that could take the job holds
	// back (its phone is unfit: adb not "device", battery low); Unfit
	// says why, per worker.
	WaitDevicesUnfit WaitKind = "devices_unfit"
	// WaitBackoff: an attempt failed (or its lease expired) and the retry
	// is due at Until.
	WaitBackoff WaitKind = "backoff"
	// WaitScheduled: the job was submitted to start at Until.
	WaitScheduled WaitKind = "scheduled"
	// WaitQueueAtCap: Running jobs of the queue run, its cap is Limit.
	WaitQueueAtCap WaitKind = "queue_at_cap"
	// WaitKeyHeld: Running jobs share the job's concurrency key, at most
	// Limit may; HeldBy is one of them (the oldest).
	WaitKeyHeld WaitKind = "concurrency_key_held"
	// WaitOutsideWindow: fit workers online could take the job, but not
	// now by their availability windows (or not for as long as the job's
	// timeout_ms): Until is when the first of them can again, Window the
	// window that opens then (its text and zone), WindowOf whose it is
	// (the device label or the worker); Until is nil when their windows
	// are never open together.
	WaitOutsideWindow WaitKind = "outside_window"
	// WaitRateLimited: Key, one of the job's rate-limit keys, has spent
	// a budget of its current window; Until is when that window ends and
	// the budget returns (the latest such end of the job's spent keys).
	WaitRateLimited WaitKind = "rate_limited"
	// WaitReady: due, with room and a fit worker online: a worker picks it
	// up at its next claim (when one of them is free).
	WaitReady WaitKind = "ready"
)

// WaitKinds lists every kind in priority order.
var WaitKinds = []WaitKind{
	WaitQueuePaused, WaitNoWorker, WaitNoDevice, WaitDevicesUnfit, WaitOutsideWindow,
	WaitBackoff, WaitScheduled, WaitRateLimited, WaitQueueAtCap, WaitKeyHeld, WaitReady,
}

// maxUnfitReasons bounds the workers Waiting.Unfit names.
const maxUnfitReasons = 10

// Waiting is why one pending job is not running. Which fields are set
// depends on Kind; the others are zero.
type Waiting struct {
	JobID int64
	Kind  WaitKind
	Queue string
	// PausedBy ("user:alice", "token:ci") and PausedAt: the queue's pause,
	// nil where not recorded (WaitQueuePaused).
	PausedBy *string
	PausedAt *time.Time
	// Running of at most Limit: the queue's running jobs and its cap
	// (WaitQueueAtCap), or the running jobs of the key and the job's
	// concurrency limit (WaitKeyHeld).
	Running, Limit int64
	// Key and HeldBy: the concurrency key and the oldest running job that
	// holds it (WaitKeyHeld); Key alone: the spent rate-limit key
	// (WaitRateLimited).
	Key    string
	HeldBy int64
	// Until is when the job is due (WaitBackoff, WaitScheduled), or when
	// the spent budget returns (WaitRateLimited).
	Until *time.Time
	// Device is the job's device label, if it names one (every kind).
	// Online counts the workers online that take the queue and carry the
	// label, or take the queue for a job without one (WaitDevicesUnfit);
	// Unfit says why each holds back ("id: reason"), at most ten.
	Device string
	Online int64
	Unfit  []string
	// Window and WindowOf: the availability window that opens at Until
	// and the device label or worker it belongs to (WaitOutsideWindow).
	Window   *window.Window
	WindowOf string
}

// WhyWaiting says why each pending job of ids is not running, by job id;
// jobs that do not exist or are not pending have no entry. The answer
// takes one statement however many jobs there are (a list page asks for
// its fifty at once), and reads the workers' presence with OnlineWindow.
func (c *Client) WhyWaiting(ctx context.Context, ids ...int64) (map[int64]Waiting, error) {
	out := make(map[int64]Waiting, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := c.q.JobWaitFacts(ctx, db.JobWaitFactsParams{Now: c.now, Ids: ids, OnlineMs: OnlineWindow.Milliseconds()})
	if err != nil {
		return nil, fmt.Errorf("reading why jobs wait: %w", err)
	}
	var windows windowSet
	for _, r := range rows {
		w := waitingOf(r)
		if w.Kind == WaitOutsideWindow {
			if windows == nil {
				if windows, err = c.windowSet(ctx); err != nil {
					return nil, err
				}
			}
			c.nextOpening(&w, r, windows)
		}
		out[r.ID] = w
	}
	return out, nil
}

func (c *Client) windowSet(ctx context.Context) (windowSet, error) {
	all, err := c.Availabilities(ctx)
	if err != nil {
		return nil, err
	}
	set := make(windowSet, len(all))
	for _, a := range all {
		set[[2]string{a.Scope, a.Name}] = a.Window
	}
	return set, nil
}

// nextOpening fills in when the first of the job's claimers (at most
// maxUnfitReasons of them are looked at) may take it again.
func (c *Client) nextOpening(w *Waiting, r db.JobWaitFactsRow, windows windowSet) {
	now := time.Now()
	if c.now != nil {
		now = *c.now
	}
	for _, cl := range r.Claimers[:min(len(r.Claimers), maxUnfitReasons)] {
		id, labels, _ := strings.Cut(cl, " ")
		var devices []string
		if labels != "" {
			devices = strings.Split(labels, ",")
		}
		var timeout time.Duration
		if r.TimeoutMs != nil {
			timeout = time.Duration(*r.TimeoutMs) * time.Millisecond
		}
		at, win, ok := windows.opensFor(id, devices, w.Device, timeout, now)
		if !ok || win == nil {
			continue
		}
		if w.Until == nil || at.Before(*w.Until) {
			w.Until, w.Window, w.WindowOf = &at, win, id
			if windows[[2]string{ScopeWorker, id}] != win {
				w.WindowOf = w.Device
				for _, d := range devices {
					if windows[[2]string{ScopeDevice, d}] == win {
						w.WindowOf = d
					}
				}
			}
		}
	}
}

// waitingOf applies the priority order (see WaitKind) to one job's facts.
func waitingOf(r db.JobWaitFactsRow) Waiting {
	w := Waiting{JobID: r.ID, Queue: r.Queue}
	if r.Device != nil {
		w.Device = *r.Device
	}
	switch {
	case r.Paused:
		w.Kind, w.PausedBy, w.PausedAt = WaitQueuePaused, r.PausedBy, r.PausedAt
	case r.QueueWorkers == 0:
		w.Kind = WaitNoWorker
	case r.DevicesOnline == 0:
		// Workers take the queue (above), none with the label: only a job
		// that names a device gets here.
		w.Kind = WaitNoDevice
	case r.DevicesClaiming == 0:
		w.Kind, w.Online, w.Unfit = WaitDevicesUnfit, r.DevicesOnline, r.Unfit[:min(len(r.Unfit), maxUnfitReasons)]
	case r.DevicesInWindow == 0:
		w.Kind = WaitOutsideWindow
	case r.NotDue && r.Attempt > 0:
		w.Kind, w.Until = WaitBackoff, &r.RunAt
	case r.NotDue:
		w.Kind, w.Until = WaitScheduled, &r.RunAt
	case r.RateKey != "":
		until := r.RateUntil
		w.Kind, w.Key, w.Until = WaitRateLimited, r.RateKey, &until
	case r.MaxRunning != nil && r.QueueRunning >= int64(*r.MaxRunning):
		w.Kind, w.Running, w.Limit = WaitQueueAtCap, r.QueueRunning, int64(*r.MaxRunning)
	case r.ConcurrencyKey != nil && r.KeyRunning >= int64(r.ConcurrencyLimit):
		w.Kind, w.Running, w.Limit = WaitKeyHeld, r.KeyRunning, int64(r.ConcurrencyLimit)
		w.Key, w.HeldBy = *r.ConcurrencyKey, r.KeyHolder
	default:
		w.Kind = WaitReady
	}
	return w
}
