package queue

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/leasehold/leasehold/db"
)

// Presence is what a worker says about itself every few seconds.
type Presence struct {
	ID      string
	Devices []string
	Queues  []string
	// Device is what its device-info command last said; nil for a worker
	// that has none.
	Device *DeviceReport
	// Starting marks the first presence of a worker process: a worker of
	// this id (re)started, and /workers dates its start from now.
	Starting bool
}

// DeviceReport is the state of a worker's device-info runs.
type DeviceReport struct {
	// Info is the object of the last run that gave one (nil if none has),
	// gathered InfoAge before the presence was sent.
	Info    json.RawMessage
	InfoAge time.Duration
	// Error is why the last run failed; empty when it worked.
	Error string
	// Claiming is false while the phone is unfit (DeviceHealth), with
	// Reason saying why.
	Claiming bool
	Reason   string
}

// OnlineWindow is how recently a worker must have reported to count as
// online, everywhere: GET /api/v1/workers, the stats and the overview,
// the live updates' "gone" and the worker.offline webhook. Workers report
// every 10 s, so 30 s is three reports missed: long enough that one slow
// request does not flap a phone offline, short enough that an unplugged
// phone shows as gone within half a minute.
const OnlineWindow = 30 * time.Second

// SessionPresenceEvery is how often the active reaper records alive
// every direct worker whose reaper lock session is open
// (WorkersSeenBySession): one statement for the whole direct fleet, where
// each worker wrote its own presence every 10 s.
const SessionPresenceEvery = 10 * time.Second

// PresenceSessionName is the application_name of a direct worker's reaper
// lock session, by which WorkersSeenBySession knows the worker is alive:
// a fixed prefix and 40 hex digits of the SHA-256 of its id (an id may be
// longer than application_name's 63 bytes, or not ASCII).
func PresenceSessionName(workerID string) string {
	sum := sha256.Sum256([]byte(workerID))
	return "leasehold worker " + hex.EncodeToString(sum[:])[:40]
}

// WorkersSeenBySession records as seen now every direct worker whose
// session named by PresenceSessionName is open, and returns how many it
// recorded. Such a session ends with its process, and within 5 s of a
// freeze, so a worker killed or frozen drops out of the online window as
// if it had stopped writing its own presence.
func (c *Client) WorkersSeenBySession(ctx context.Context) (int64, error) {
	n, err := c.q.WorkersSeenBySession(ctx)
	if err != nil {
		return 0, fmt.Errorf("recording direct workers seen by their sessions: %w", err)
	}
	return n, nil
}

// WorkerSeen records that a worker is alive, with what it says of its
// device.
func (c *Client) WorkerSeen(ctx context.Context, p Presence) error {
	if err := checkDevices(p.Devices); err != nil {
		return err
	}
	params := db.WorkerSeenParams{ID: p.ID, Queues: p.Queues, Claiming: true, Starting: p.Starting}
	if len(p.Devices) > 0 {
		params.Device = ptr(strings.Join(p.Devices, ","))
	}
	if d := p.Device; d != nil {
		if err := d.check(); err != nil {
			return err
		}
		if d.Info != nil {
			params.Info, params.InfoAgeMs = d.Info, ptr(max(d.InfoAge.Milliseconds(), 0))
		}
		params.Claiming = d.Claiming
		if d.Error != "" {
			params.InfoError = ptr(d.Error)
		}
		if !d.Claiming {
			params.NotClaiming = ptr(cmp.Or(d.Reason, "not claiming"))
		}
	}
	if err := c.q.WorkerSeen(ctx, params); err != nil {
		return fmt.Errorf("recording worker: %w", err)
	}
	return nil
}

// check refuses a report the workers table should not hold: info that is
// not device info (ParseDeviceInfo), an implausible age, overlong texts.
func (d *DeviceReport) check() error {
	if d.Info != nil {
		if _, err := ParseDeviceInfo(d.Info); err != nil {
			return invalid("info", "%v", err)
		}
	}
	if d.InfoAge < 0 || d.InfoAge > 365*24*time.Hour {
		return invalid("info_age_ms", "must be between 0 and a year")
	}
	if err := CheckText("info_error", d.Error, MaxReasonBytes); err != nil {
		return err
	}
	return CheckText("reason", d.Reason, MaxReasonBytes)
}

// wakeReaper makes the active reaper look at the deadlines again.
func (c *Client) wakeReaper(ctx context.Context) {
	if err := c.q.ReaperWake(ctx); err != nil {
		c.logger.Warn("waking reaper", "err", err)
	}
}

// notifyJobs wakes idle workers of these queues with one notification.
func (c *Client) notifyJobs(ctx context.Context, queues []string) {
	if len(queues) == 0 {
		return
	}
	if err := c.q.JobNotify(ctx, notifyPayload(queues)); err != nil {
		c.logger.Warn("notifying workers", "err", err)
	}
}

// notifyJobsAtCommit is notifyJobs in q's transaction: the workers hear
// of the jobs when it commits, and a submission commits once rather than
// twice (a NOTIFY of its own is a transaction whose commit waits for
// the WAL too). The notify lock is taken at commit either way.
func notifyJobsAtCommit(ctx context.Context, q *db.Queries, queues []string) error {
	if len(queues) == 0 {
		return nil
	}
	if err := q.JobNotify(ctx, notifyPayload(queues)); err != nil {
		return fmt.Errorf("notifying workers: %w", err)
	}
	return nil
}

// notifyPayload names the queues of a notification.
func notifyPayload(queues []string) string {
	payload := strings.Join(queues, ",")
	if len(payload) > 7000 {
		payload = "" // too long to name them all: wake everyone
	}
	return payload
}
