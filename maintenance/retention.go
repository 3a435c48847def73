package maintenance

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// FinishedStates are the states retention applies to, in the order a pass
// prunes them.
var FinishedStates = []queue.State{queue.StateSucceeded, queue.StateCancelled, queue.StateDead}

// DefaultRetentionSpec is LEASEHOLD_RETENTION's default.
const DefaultRetentionSpec = "succeeded=7d,cancelled=7d,dead=30d"

// Retention is how long finished jobs of each state are kept after they
// finish; a state that is absent (or 0) is kept for ever.
type Retention map[queue.State]time.Duration

// DefaultRetention is succeeded and cancelled jobs for 7 days, dead ones
// for 30.
func DefaultRetention() Retention {
	return Retention{queue.StateSucceeded: 7 * day, queue.StateCancelled: 7 * day, queue.StateDead: 30 * day}
}

const day = 24 * time.Hour

// ParseRetention reads LEASEHOLD_RETENTION: "off" keeps everything;
// otherwise comma-separated STATE=DURATION, where DURATION is a Go
// duration ("2s", "36h") or whole days ("7d"), or "off" for that state.
// States not named keep their default.
func ParseRetention(spec string) (Retention, error) {
	spec = strings.TrimSpace(spec)
	if spec == "off" {
		return Retention{}, nil
	}
	r := DefaultRetention()
	if spec == "" {
		return r, nil
	}
	for _, item := range strings.Split(spec, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(item), "=")
		st := queue.State(strings.TrimSpace(name))
		if !ok || !isFinished(st) {
			return nil, fmt.Errorf("retention %q: want STATE=DURATION with STATE one of succeeded, cancelled, dead", item)
		}
		value = strings.TrimSpace(value)
		if value == "off" {
			delete(r, st)
			continue
		}
		d, err := parseRetentionDuration(value)
		if err != nil {
			return nil, fmt.Errorf("retention %s=%q: %w", st, value, err)
		}
		r[st] = d
	}
	return r, nil
}

// parseRetentionDuration reads a Go duration or N days ("7d"), at least
// one second.
func parseRetentionDuration(v string) (time.Duration, error) {
	var d time.Duration
	if n, ok := strings.CutSuffix(v, "d"); ok {
		days, err := strconv.ParseInt(n, 10, 64)
		if err != nil || days < 0 || days > 100*365 {
			return 0, fmt.Errorf("want whole days such as 7d, or a Go duration such as 36h")
		}
		d = time.Duration(days) * day
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, fmt.Errorf("want a Go duration such as 36h, or whole days such as 7d")
		}
	}
	if d < time.Second {
		return 0, fmt.Errorf("want at least 1s (or off)")
	}
	return d, nil
}

// String is the retention in ParseRetention's form.
func (r Retention) String() string {
	var parts []string
	for _, st := range FinishedStates {
		if d, ok := r[st]; ok && d > 0 {
			parts = append(parts, string(st)+"="+formatRetention(d))
		}
	}
	if len(parts) == 0 {
		return "off"
	}
	return strings.Join(parts, ",")
}

func formatRetention(d time.Duration) string {
	if d%day == 0 {
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	return d.String()
}

// Set implements flag.Value.
func (r *Retention) Set(v string) error {
	p, err := ParseRetention(v)
	if err != nil {
		return err
	}
	*r = p
	return nil
}

// AuditRetention is how long the audit trail keeps a row
// (LEASEHOLD_AUDIT_RETENTION, --audit-retention): a Go duration ("36h")
// or whole days ("365d"), at least a second; 0, written "off", keeps
// every row. It implements flag.Value.
type AuditRetention time.Duration

// Set implements flag.Value.
func (r *AuditRetention) Set(v string) error {
	v = strings.TrimSpace(v)
	if v == "off" {
		*r = 0
		return nil
	}
	d, err := parseRetentionDuration(v)
	if err != nil {
		return fmt.Errorf("audit retention %q: %w", v, err)
	}
	*r = AuditRetention(d)
	return nil
}

// String is the retention in Set's form.
func (r AuditRetention) String() string {
	if r <= 0 {
		return "off"
	}
	return formatRetention(time.Duration(r))
}

func isFinished(st queue.State) bool {
	for _, f := range FinishedStates {
		if st == f {
			return true
		}
	}
	return false
}
