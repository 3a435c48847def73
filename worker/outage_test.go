package worker

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
)

// Ten minutes of a failure every second warn about fifteen times, not
// six hundred: at once, then after 1, 2, 4 … 60 s (then every minute), each warning counting
// what it held back, and the recovery is one INFO line with the total.
func TestOutageWarningsBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &testutil.LockedBuffer{}
		o := newOutageLog(slog.New(slog.NewTextHandler(logs, nil)), "claim failed", "claiming works again")
		boom := errors.New("connection refused")
		start := time.Now()
		var warnedAt []time.Duration
		for i := range 600 {
			before := strings.Count(logs.String(), "level=WARN")
			o.failed(boom)
			if strings.Count(logs.String(), "level=WARN") > before {
				warnedAt = append(warnedAt, time.Since(start))
			}
			if i < 599 {
				time.Sleep(time.Second)
			}
		}
		want := []int{0, 1, 3, 7, 15, 31, 63, 123, 183, 243, 303, 363, 423, 483, 543}
		if len(warnedAt) != len(want) {
			t.Fatalf("warned at %v, want at %v s", warnedAt, want)
		}
		for i, w := range want {
			if warnedAt[i] != time.Duration(w)*time.Second {
				t.Fatalf("warned at %v, want at %v s", warnedAt, want)
			}
		}
		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		if !strings.Contains(lines[0], `msg="claim failed" err="connection refused"`) || strings.Contains(lines[0], "suppressed") {
			t.Errorf("first warning: %s", lines[0])
		}
		if !strings.Contains(lines[2], "failures=4 suppressed=1 failing_for=3s next_warning_in=4s") {
			t.Errorf("third warning: %s", lines[2])
		}
		time.Sleep(time.Second)
		o.ok()
		o.ok() // a second success says nothing
		lines = strings.Split(strings.TrimSpace(logs.String()), "\n")
		last := lines[len(lines)-1]
		if len(lines) != 16 || !strings.Contains(last, "level=INFO") || !strings.Contains(last, `msg="claiming works again" failures=600 suppressed=56 failing_for=10m0s`) {
			t.Fatalf("%d lines; recovery: %s", len(lines), last)
		}

		// The next outage starts over: its first failure warns at once.
		o.failed(boom)
		if n := strings.Count(logs.String(), "level=WARN"); n != 16 {
			t.Errorf("a new outage's first failure: %d warnings in all, want 16", n)
		}
	})
}
