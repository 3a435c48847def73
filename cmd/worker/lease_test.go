package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// The --lease bounds are queue's, so a worker flag and a claim cannot
// disagree about them.
func TestLeaseFlagTakesQueueBounds(t *testing.T) {
	want := fmt.Sprintf("must be between %v and %v", queue.MinLease, queue.MaxLease)
	for _, lease := range []time.Duration{queue.MinLease - time.Millisecond, queue.MaxLease + time.Millisecond} {
		err := run([]string{"--lease", lease.String(), "--database-url", "postgres://nowhere.invalid/x"})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--lease %v: %v, want an error saying %q", lease, err, want)
		}
	}
}
