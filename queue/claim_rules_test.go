package queue_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// A direct claim is held to the rules a remote worker's claim is: the
// bounds live in queue.Claim, not only in the worker API's handler.
func TestClaimRefusesWhatTheWorkerAPIRefuses(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	if _, _, err := f.client.Insert(f.ctx, queue.NewJob{Kind: "noop"}); err != nil {
		t.Fatal(err)
	}
	ok := queue.ClaimParams{WorkerID: "w", Queues: []string{"default"}, Limit: 1, Lease: time.Minute}
	many := make([]string, queue.MaxClaimQueues+1)
	for i := range many {
		many[i] = "q"
	}
	for _, tc := range []struct {
		name  string
		edit  func(*queue.ClaimParams)
		field string
	}{
		{"LimitZero", func(p *queue.ClaimParams) { p.Limit = 0 }, "limit"},
		{"LimitOverMax", func(p *queue.ClaimParams) { p.Limit = queue.MaxClaimLimit + 1 }, "limit"},
		{"NoQueues", func(p *queue.ClaimParams) { p.Queues = nil }, "queues"},
		{"EmptyQueues", func(p *queue.ClaimParams) { p.Queues = []string{} }, "queues"},
		{"TooManyQueues", func(p *queue.ClaimParams) { p.Queues = many }, "queues"},
		{"BadQueueName", func(p *queue.ClaimParams) { p.Queues = []string{"Bad Queue"} }, "queues"},
		{"LongQueueName", func(p *queue.ClaimParams) { p.Queues = []string{strings.Repeat("q", 65)} }, "queues"},
		{"LeaseShort", func(p *queue.ClaimParams) { p.Lease = queue.MinLease - time.Millisecond }, "lease_ms"},
		{"LeaseLong", func(p *queue.ClaimParams) { p.Lease = queue.MaxLease + time.Millisecond }, "lease_ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ok
			tc.edit(&p)
			jobs, err := f.client.Claim(f.ctx, p)
			var ve *queue.ValidationError
			if !errors.As(err, &ve) || ve.Field != tc.field {
				t.Fatalf("Claim(%+v) = %d jobs, %v; want a ValidationError on %s", p, len(jobs), err, tc.field)
			}
		})
	}
	jobs, err := f.client.Claim(f.ctx, ok)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("the valid claim: %d jobs, %v", len(jobs), err)
	}
}
