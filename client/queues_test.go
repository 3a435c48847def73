package client_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/client"
)

func TestQueuesAndPatchQueue(t *testing.T) {
	t.Parallel()
	f := setup(t)
	if _, err := f.client.Submit(f.ctx, client.NewJob{Kind: "noop", Queue: "phones", ConcurrencyKey: new("phone:1")}); err != nil {
		t.Fatal(err)
	}
	two := int32(2)
	q, err := f.client.PatchQueue(f.ctx, "phones", client.QueuePatch{Paused: api.Value(true), MaxRunning: api.Value(two)})
	if err != nil || !q.Paused || q.MaxRunning == nil || *q.MaxRunning != 2 || q.PausedBy == nil || *q.PausedBy != "token:admin" || q.Pending != 1 {
		t.Fatalf("patched: %+v %v", q, err)
	}
	// Clearing the cap sends null; paused, absent, stays.
	if q, err = f.client.PatchQueue(f.ctx, "phones", client.QueuePatch{MaxRunning: api.Null[int32]()}); err != nil || !q.Paused || q.MaxRunning != nil {
		t.Fatalf("cleared: %+v %v", q, err)
	}
	qs, err := f.client.Queues(f.ctx)
	if err != nil || len(qs) != 1 || qs[0].Name != "phones" || !qs[0].Paused {
		t.Fatalf("queues: %+v %v", qs, err)
	}
	var apiErr *client.Error
	neg := int32(-1)
	if _, err := f.client.PatchQueue(f.ctx, "phones", client.QueuePatch{MaxRunning: api.Value(neg)}); !errors.As(err, &apiErr) ||
		apiErr.Status != http.StatusBadRequest || apiErr.Field != "max_running" {
		t.Fatalf("negative cap: %v", err)
	}
}
