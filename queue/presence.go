package queue

import (
	"context"
	"fmt"
	"strings"

	"github.com/leasehold/leasehold/db"
)

// WorkerSeen records that a worker is alive.
func (c *Client) WorkerSeen(ctx context.Context, id string, devices, queues []string) error {
	if err := checkDevices(devices); err != nil {
		return err
	}
	var device *string
	if len(devices) > 0 {
		device = ptr(strings.Join(devices, ","))
	}
	if err := c.q.WorkerSeen(ctx, db.WorkerSeenParams{ID: id, Device: device, Queues: queues}); err != nil {
		return fmt.Errorf("recording worker: %w", err)
	}
	return nil
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
	payload := strings.Join(queues, ",")
	if len(payload) > 7000 {
		payload = "" // too long to name them all: wake everyone
	}
	if err := c.q.JobNotify(ctx, payload); err != nil {
		c.logger.Warn("notifying workers", "err", err)
	}
}
