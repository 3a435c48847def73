package worker

import (
	"testing"
	"time"
)

func TestLeaseStart(t *testing.T) {
	sent := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name             string
		received, waited time.Duration
		want             time.Duration
	}{
		{"NoWait", 20 * time.Millisecond, 0, 0},
		// The server held the poll 20s before it claimed: the lease
		// began no earlier than that.
		{"LongPoll", 20*time.Second + 30*time.Millisecond, 20 * time.Second, 20 * time.Second},
		// A server cannot have waited longer than the answer took: a
		// larger figure never stretches the lease past received + lease.
		{"WaitBeyondTheAnswer", 5 * time.Second, time.Minute, 5 * time.Second},
		{"NegativeWait", time.Second, -time.Hour, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := leaseStart(sent, sent.Add(tc.received), tc.waited).Sub(sent)
			if got != tc.want {
				t.Fatalf("lease counted from sent+%v, want sent+%v", got, tc.want)
			}
		})
	}
}
