package worker

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// CheckFunc runs a --preflight or --postflight command for job (nil for
// a preflight run with no job, to see whether an unfit phone recovered):
// executor.Check.Run. It returns the command's output, cleaned and
// bounded, and an error when the check failed. It must return within a
// bounded time.
type CheckFunc func(ctx context.Context, job *queue.Job, outcome string) (output string, err error)

// flight is whether the last pre- or post-flight check left the phone
// unfit, and why. A failed preflight or postflight sets it; only a
// preflight that passes clears it (SPEC "Pre- and post-flight").
type flight struct {
	mu     sync.Mutex
	reason string
}

func (f *flight) set(reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reason = reason
}

// clear reports whether the phone was unfit until now.
func (f *flight) clear() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	was := f.reason != ""
	f.reason = ""
	return was
}

func (f *flight) unfit() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reason
}

// checkReason is the unfit reason of a failed check, bounded as presence
// carries it.
func checkReason(which string, err error) string {
	msg := strings.TrimPrefix(err.Error(), which+": ")
	return queue.CleanText(which+" failed: "+msg, queue.MaxReasonBytes)
}

// mayClaim is whether the claim loop may claim: the phone's device-info
// health and its last check.
func (w *Worker) mayClaim() bool {
	return w.device.mayClaim() && w.flight.unfit() == ""
}

// deviceReport is what presence says of the phone: device-info's report,
// overruled while a failed check holds the phone back.
func (w *Worker) deviceReport() *queue.DeviceReport {
	r := w.device.report()
	reason := w.flight.unfit()
	if reason == "" {
		return r
	}
	if r == nil {
		return &queue.DeviceReport{Claiming: false, Reason: reason}
	}
	c := *r
	c.Claiming, c.Reason = false, reason
	return &c
}

// recheck runs the preflight with no job every DeviceInfoEvery while a
// failed check holds the phone back: the worker claims nothing then, so
// no job would run it. A pass wakes the claim loop.
func (w *Worker) recheck(ctx context.Context, wake chan<- struct{}) {
	t := time.NewTicker(w.cfg.DeviceInfoEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if w.flight.unfit() == "" {
			continue
		}
		if _, err := w.cfg.Preflight(ctx, nil, ""); err != nil {
			if ctx.Err() == nil {
				w.flight.set(checkReason("preflight", err))
				wakeUp(w.presenceNow)
			}
			continue
		}
		w.flight.clear()
		w.log.Info("preflight passed: claiming again")
		wakeUp(w.presenceNow)
		wakeUp(wake)
	}
}

// keepCheck stores a check's output on the attempt as a text artifact
// (preflight.txt, postflight.txt), fenced by its lease like every write.
func (w *Worker) keepCheck(ctx context.Context, lease queue.Lease, which, output string, err error, jl *jobLog) {
	text := output
	if err != nil {
		text += "\n[" + which + " failed: " + err.Error() + "]\n"
	}
	if text == "" {
		text = "(no output)\n"
	}
	if _, uerr := w.backend.UploadArtifact(ctx, lease, which+".txt", 0, strings.NewReader(queue.CleanText(text, queue.MaxDeviceInfoBytes+1024))); uerr != nil {
		jl.get().Warn("keeping the "+which+" output", "err", uerr)
	}
}
