package dashboard

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// waitSentence is the job page's answer to "why is this job not
// running?", with what to do about it where a person can.
func waitSentence(w queue.Waiting, now time.Time) string {
	switch w.Kind {
	case queue.WaitQueuePaused:
		var by []string
		if w.PausedBy != nil {
			by = append(by, "by "+pausedBy(*w.PausedBy))
		}
		if w.PausedAt != nil {
			by = append(by, "since "+waitTime(*w.PausedAt, now))
		}
		s := "Queue " + w.Queue + " is paused"
		if len(by) > 0 {
			s += " (" + strings.Join(by, ", ") + ")"
		}
		return s + ": nothing in it starts until it is resumed on the Queues page."
	case queue.WaitNoWorker:
		return fmt.Sprintf("No worker takes queue %s: none that does has reported in the last %d s. Start one with --queues %s.",
			w.Queue, int(queue.OnlineWindow.Seconds()), w.Queue)
	case queue.WaitNoDevice:
		// The device sentences are the ones the page has said since
		// phones got labels (e2e/devices_test.go reads them).
		return fmt.Sprintf("waiting for %s: no such phone online", w.Device)
	case queue.WaitDevicesUnfit:
		reasons := strings.Join(w.Unfit, "; ")
		if int64(len(w.Unfit)) < w.Online {
			reasons += "; …"
		}
		if w.Device == "" {
			if w.Online == 1 {
				return fmt.Sprintf("waiting for queue %s: its only worker online is not claiming (%s)", w.Queue, reasons)
			}
			return fmt.Sprintf("waiting for queue %s: all %d of its workers online are not claiming (%s)", w.Queue, w.Online, reasons)
		}
		if w.Online == 1 {
			return fmt.Sprintf("waiting for %s: the only such phone online is not claiming (%s)", w.Device, reasons)
		}
		return fmt.Sprintf("waiting for %s: all %d such phones online are not claiming (%s)", w.Device, w.Online, reasons)
	case queue.WaitOutsideWindow:
		return windowSentence(w, now)
	case queue.WaitBackoff:
		return "Waiting to retry after a failed attempt: due at " + waitTime(*w.Until, now) + "."
	case queue.WaitScheduled:
		return "Scheduled: due at " + waitTime(*w.Until, now) + "."
	case queue.WaitRateLimited:
		return fmt.Sprintf("Rate limit %s has spent its budget for this window: budget returns at %s (in %s).",
			w.Key, waitTime(*w.Until, now), untilText(w.Until.Sub(now)))
	case queue.WaitQueueAtCap:
		return fmt.Sprintf("Queue %s is at its cap: %d of %d running. This job starts when one of them ends.", w.Queue, w.Running, w.Limit)
	case queue.WaitKeyHeld:
		return fmt.Sprintf("Concurrency key %s is held by job #%d (%d of %d running). This job starts when one of them ends.",
			w.Key, w.HeldBy, w.Running, w.Limit)
	case queue.WaitReady:
		return "Due now: a worker of queue " + w.Queue + " picks it up at its next claim."
	}
	return string(w.Kind)
}

// waitBadge is the jobs list's short form of the reason; "" for a job
// about to be picked up.
func waitBadge(w queue.Waiting, now time.Time) string {
	switch w.Kind {
	case queue.WaitQueuePaused:
		return "paused"
	case queue.WaitNoWorker:
		return "no worker"
	case queue.WaitNoDevice:
		return "no phone"
	case queue.WaitDevicesUnfit:
		return "phone unfit"
	case queue.WaitOutsideWindow:
		if w.Until == nil {
			return "outside window"
		}
		return "window opens " + badgeTime(*w.Until, now)
	case queue.WaitBackoff:
		return "backoff until " + badgeTime(*w.Until, now)
	case queue.WaitScheduled:
		return "due " + badgeTime(*w.Until, now)
	case queue.WaitRateLimited:
		return "rate limited until " + badgeTime(*w.Until, now)
	case queue.WaitQueueAtCap:
		return "at cap " + strconv.FormatInt(w.Running, 10) + "/" + strconv.FormatInt(w.Limit, 10)
	case queue.WaitKeyHeld:
		return "key held by #" + strconv.FormatInt(w.HeldBy, 10)
	case queue.WaitReady:
		return ""
	}
	return string(w.Kind)
}

// waitTime is a time of a reason, in UTC like the rest of the pages: the
// clock time alone on the day it is now, with the date otherwise.
func waitTime(t, now time.Time) string {
	t, now = t.UTC(), now.UTC()
	if t.YearDay() == now.YearDay() && t.Year() == now.Year() {
		return t.Format("15:04:05 MST")
	}
	return t.Format("2006-01-02 15:04 MST")
}

// badgeTime is waitTime to the minute, without the zone: a badge is
// short, and its title has the full time.
func badgeTime(t, now time.Time) string {
	t, now = t.UTC(), now.UTC()
	if t.YearDay() == now.YearDay() && t.Year() == now.Year() {
		return t.Format("15:04")
	}
	return t.Format("Jan 2 15:04")
}

// pausedBy names who paused a queue: a user by name, anything else
// ("token:ci") as it was recorded.
func pausedBy(actor string) string {
	if name, ok := strings.CutPrefix(actor, "user:"); ok {
		return name
	}
	return actor
}

// windowSentence: "pixel7 is available again at 22:00 (in 3 h 10 min)",
// the time in the window's own zone (its owner's), as the window says it.
func windowSentence(w queue.Waiting, now time.Time) string {
	who := w.WindowOf
	if who == "" {
		who = cmp.Or(w.Device, "no phone of queue "+w.Queue)
	}
	if w.Until == nil {
		return fmt.Sprintf("%s is outside its availability window, and its windows are never open long enough for this job's timeout.", who)
	}
	at := w.Until.In(w.Window.Location())
	clock := at.Format("15:04")
	if at.Sub(now) >= 24*time.Hour || at.YearDay() != now.In(at.Location()).YearDay() {
		clock = at.Format("Mon 15:04")
	}
	if at.Location() != time.UTC {
		clock += " " + at.Format("MST")
	}
	return fmt.Sprintf("%s is available again at %s (in %s; window %s).", who, clock, untilText(w.Until.Sub(now)), w.Window.Text)
}

// untilText is a wait as "3 h 10 min", "12 min", "2 d 4 h", rounded up
// to the minute: an opening at 22:00 is "in 1 min" from 21:59:01 on.
func untilText(d time.Duration) string {
	m := int((d + time.Minute - 1) / time.Minute)
	switch {
	case m < 1:
		return "less than a minute"
	case m < 60:
		return fmt.Sprintf("%d min", m)
	case m < 24*60:
		if m%60 == 0 {
			return fmt.Sprintf("%d h", m/60)
		}
		return fmt.Sprintf("%d h %d min", m/60, m%60)
	}
	if h := (m / 60) % 24; h != 0 {
		return fmt.Sprintf("%d d %d h", m/(24*60), h)
	}
	return fmt.Sprintf("%d d", m/(24*60))
}
