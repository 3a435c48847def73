package queue_test

import (
	"errors"
	"testing"

	"github.com/leasehold/leasehold/queue"
)

// An empty selection is refused by queue itself, not taken as every job.
func TestBulkActionsRefuseAnEmptySelection(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	job, _, err := f.client.Insert(f.ctx, queue.NewJob{Kind: "noop"})
	if err != nil {
		t.Fatal(err)
	}
	for _, sel := range []queue.Selection{{}, {IDs: []int64{}}} {
		var ve *queue.ValidationError
		if jobs, err := f.client.Cancel(f.ctx, sel, "bob"); !errors.As(err, &ve) {
			t.Errorf("Cancel(%+v) = %d jobs, %v; want a ValidationError", sel, len(jobs), err)
		}
		if jobs, err := f.client.Retry(f.ctx, sel, "bob"); !errors.As(err, &ve) {
			t.Errorf("Retry(%+v) = %d jobs, %v; want a ValidationError", sel, len(jobs), err)
		}
	}
	if got, err := f.client.Get(f.ctx, job.ID); err != nil || got.State != queue.StatePending {
		t.Fatalf("the job is %s (%v) after refused bulk actions", got.State, err)
	}
}
