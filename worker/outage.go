package worker

import (
	"log/slog"
	"sync"
	"time"
)

// Warnings of one kind of failure during an outage come first at once,
// then at doubling gaps up to outageLogMax, each saying how many were
// held back; the first success after them is one INFO line. A worker
// polling every second would otherwise warn every second for as long as
// the server or database is away.
const (
	outageLogFirstGap = time.Second
	outageLogMax      = time.Minute
)

// outageLog thins out the warnings of one repeated failure ("claim
// failed"). Safe for concurrent use.
type outageLog struct {
	log *slog.Logger
	// warn is the warning's message, recovered the INFO line's.
	warn, recovered string

	mu         sync.Mutex
	failing    bool
	since      time.Time // the first failure of this outage
	next       time.Time // the next failure at or after this warns
	gap        time.Duration
	failures   int // since since
	suppressed int // since the last warning
}

func newOutageLog(log *slog.Logger, warn, recovered string) *outageLog {
	return &outageLog{log: log, warn: warn, recovered: recovered}
}

// failed records a failure, and warns when it is the first of an outage
// or the gap since the last warning has passed.
func (o *outageLog) failed(err error, attrs ...any) {
	o.mu.Lock()
	now := time.Now()
	if !o.failing {
		o.failing, o.since, o.gap, o.failures, o.suppressed = true, now, outageLogFirstGap, 0, 0
		o.next = now.Add(o.gap)
	} else if now.Before(o.next) {
		o.failures++
		o.suppressed++
		o.mu.Unlock()
		return
	} else {
		o.gap = min(2*o.gap, outageLogMax)
		o.next = now.Add(o.gap)
	}
	o.failures++
	args := append([]any{"err", err}, attrs...)
	if o.failures > 1 {
		args = append(args, "failures", o.failures, "suppressed", o.suppressed,
			"failing_for", now.Sub(o.since).Round(time.Second), "next_warning_in", o.gap)
	}
	o.suppressed = 0
	o.mu.Unlock()
	o.log.Warn(o.warn, args...)
}

// ok records a success: after failures, one INFO line says the outage
// is over, how long it lasted and how many failures it had.
func (o *outageLog) ok() {
	o.mu.Lock()
	if !o.failing {
		o.mu.Unlock()
		return
	}
	failures, suppressed, lasted := o.failures, o.suppressed, time.Since(o.since).Round(time.Millisecond)
	o.failing = false
	o.mu.Unlock()
	o.log.Info(o.recovered, "failures", failures, "suppressed", suppressed, "failing_for", lasted)
}
