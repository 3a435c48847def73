package maintenance

import (
	"testing"
	"time"
)

// The pause after a batch keeps the pass's statements to their duty share
// of its time, and is never shorter than the configured least pause.
func TestPrunerPauseKeepsDutyShare(t *testing.T) {
	for _, c := range []struct {
		cfg        PrunerConfig
		busy, want time.Duration
	}{
		{PrunerConfig{}, 100 * time.Millisecond, 100 * time.Millisecond}, // default duty 0.5
		{PrunerConfig{}, 5 * time.Millisecond, prunePause},               // a short batch: the least pause
		{PrunerConfig{Duty: 0.25}, 30 * time.Millisecond, 90 * time.Millisecond},
		{PrunerConfig{Duty: 1, Pause: 7 * time.Millisecond}, time.Second, 7 * time.Millisecond}, // duty 1: the fixed pause alone
		{PrunerConfig{Duty: 2}, 40 * time.Millisecond, 40 * time.Millisecond},                   // out of range: the default
	} {
		p := NewPruner(nil, c.cfg)
		if got := p.pause(c.busy); got != c.want {
			t.Errorf("%+v: pause after %v = %v, want %v", c.cfg, c.busy, got, c.want)
		}
	}
}
