package executor

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// DefaultCheckTimeout is how long a pre- or post-flight command may run
// before its process group is killed.
const DefaultCheckTimeout = 60 * time.Second

// Check runs a worker's --preflight or --postflight command (SPEC "Pre-
// and post-flight") the way DeviceInfo runs --device-info: its own
// process group, no stdin, the worker's environment without its secrets,
// stdout read up to queue.MaxDeviceInfoBytes, bounded in time. The job
// is described in LEASEHOLD_JOB_ID, LEASEHOLD_JOB_KIND, LEASEHOLD_ATTEMPT,
// LEASEHOLD_APP and LEASEHOLD_DEVICE (empty for a preflight run with no
// job, as a worker whose phone is unfit runs it to see whether it has
// recovered), and for a postflight LEASEHOLD_OUTCOME.
type Check struct{ d DeviceInfo }

// NewCheck returns a Check running command for flag name
// ("preflight"); timeout 0 is DefaultCheckTimeout.
func NewCheck(name, command string, timeout time.Duration, logger *slog.Logger) (*Check, error) {
	args, err := splitCommand(name, command)
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	if timeout <= 0 {
		timeout = DefaultCheckTimeout
	}
	return &Check{d: DeviceInfo{args: args, timeout: timeout, log: logger, name: name}}, nil
}

// Run runs the command for job (nil for none) and returns its output,
// cleaned and bounded; the error, if it failed, quotes the end of its
// stderr.
func (c *Check) Run(ctx context.Context, job *queue.Job, outcome string) (string, error) {
	d := c.d
	d.env = []string{"LEASEHOLD_JOB_ID=", "LEASEHOLD_JOB_KIND=", "LEASEHOLD_ATTEMPT=", "LEASEHOLD_APP=", "LEASEHOLD_DEVICE=", "LEASEHOLD_OUTCOME=" + outcome}
	if job != nil {
		var p struct{ App, Device string }
		_ = json.Unmarshal(job.Payload, &p) // a payload without them names none
		d.env = []string{
			"LEASEHOLD_JOB_ID=" + strconv.FormatInt(job.ID, 10), "LEASEHOLD_JOB_KIND=" + job.Kind,
			"LEASEHOLD_ATTEMPT=" + strconv.Itoa(int(job.Attempt)),
			"LEASEHOLD_APP=" + p.App, "LEASEHOLD_DEVICE=" + p.Device, "LEASEHOLD_OUTCOME=" + outcome,
		}
	}
	out, err := d.output(ctx)
	return queue.CleanText(string(out), queue.MaxDeviceInfoBytes), err
}
