package worker

import (
	"context"
	"sync"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// DeviceInfoFunc runs a worker's device-info command once: executor's
// DeviceInfo.Run. It must return within a bounded time.
type DeviceInfoFunc func(ctx context.Context) (queue.DeviceInfo, error)

// deviceInfoEvery is how often the device-info command runs when nothing
// else asks for it (a job ending does).
const deviceInfoEvery = time.Minute

// device is what a worker knows of its phone from its device-info runs,
// and whether it claims because of it. The claim loop only reads it: the
// command runs on a goroutine of its own.
type device struct {
	mu       sync.Mutex
	checked  bool             // a run has finished
	info     queue.DeviceInfo // of the last run that gave facts
	have     bool
	gathered time.Time // when info was gathered (monotonic)
	err      string    // why the last run failed; "" when it worked
	claiming bool
	reason   string
}

// firstCheck is why a worker does not claim before its first device-info
// run has ended: it cannot know yet whether its phone is fit.
const firstCheck = "checking the device (first device-info run)"

// update records a run's outcome and reports whether what presence says
// of the worker's health changed (claiming, its reason, the error).
func (d *device) update(info queue.DeviceInfo, err error, minBattery int, at time.Time) (changed bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	was, wasReason, wasErr, wasChecked := d.claiming, d.reason, d.err, d.checked
	d.checked = true
	if err != nil {
		// A command's stderr may hold anything (a NUL byte): cleaned,
		// the error can be sent, and presence keeps working.
		d.err = queue.CleanText(err.Error(), queue.MaxReasonBytes)
	} else {
		d.err, d.info, d.have, d.gathered = "", info, true, at
	}
	// A failing run proves nothing about the phone: the last facts known
	// decide, and with none, the worker claims as it would without a
	// device-info command.
	d.claiming, d.reason = true, ""
	if d.have {
		d.claiming, d.reason = queue.DeviceHealth(d.info, minBattery)
		d.reason = queue.CleanText(d.reason, queue.MaxReasonBytes) // "adb " and a 1,024-byte state is over
	}
	return !wasChecked || was != d.claiming || wasReason != d.reason || (wasErr == "") != (d.err == "")
}

// mayClaim reports whether the worker may claim now.
func (d *device) mayClaim() bool {
	if d == nil {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.checked && d.claiming
}

// report is what presence carries; nil for a worker without a device-info
// command.
func (d *device) report() *queue.DeviceReport {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.checked {
		return &queue.DeviceReport{Claiming: false, Reason: firstCheck}
	}
	r := &queue.DeviceReport{Error: d.err, Claiming: d.claiming, Reason: d.reason}
	if d.have {
		r.Info, r.InfoAge = d.info.Raw, time.Since(d.gathered)
	}
	return r
}

// deviceInfo runs the device-info command at start, every
// DeviceInfoEvery, and when a job has ended (w.checkDevice), one run at a
// time. A change of health is sent with presence at once; a recovery
// wakes the claim loop, and a phone gone unfit cuts a claim's long poll.
func (w *Worker) deviceInfo(ctx context.Context, wake chan<- struct{}) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-w.checkNow:
			timer.Stop()
		}
		info, err := w.cfg.DeviceInfo(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			w.log.Warn("device-info failed", "err", err)
		}
		if w.device.update(info, err, w.cfg.MinBattery, time.Now()) {
			r := w.device.report()
			if r.Claiming {
				w.log.Info("device fit: claiming", "info", string(r.Info))
				wakeUp(wake)
			} else {
				w.log.Warn("device unfit: not claiming", "reason", r.Reason, "info", string(r.Info))
				w.cutClaim()
			}
			wakeUp(w.presenceNow)
		}
		timer.Reset(w.cfg.DeviceInfoEvery)
	}
}

// checkDevice asks for a device-info run soon, without waiting for it;
// requests while one is pending are one run.
func (w *Worker) checkDevice() {
	if w.device != nil {
		wakeUp(w.checkNow)
	}
}

// cutClaim ends a claim's long poll under way, if any.
func (w *Worker) cutClaim() {
	w.claimMu.Lock()
	defer w.claimMu.Unlock()
	if w.claimCancel != nil {
		w.claimCancel()
	}
}
