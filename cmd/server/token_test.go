package main

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/db/dbtest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
)

// TestTokenRevokeEndsWorkerLeases: `server token revoke NAME` of a worker
// token ends the leases that worker holds, so its jobs are not stuck until
// their deadlines; revoking an admin token touches no lease.
func TestTokenRevokeEndsWorkerLeases(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store := apitoken.NewStore(pool)
	client := queue.NewClient(pool, nil)
	lease := func(worker string) queue.Lease {
		t.Helper()
		testutil.InsertJob(t, ctx, client, testutil.Job{Kind: "x"})
		j := testutil.ClaimJob(t, ctx, client, worker, "default", time.Hour)
		return queue.Lease{JobID: j.ID, Token: j.LeaseToken, WorkerID: worker}
	}
	for name, role := range map[string]apitoken.Role{"phone-1": apitoken.RoleWorker, "ops": apitoken.RoleAdmin} {
		if _, _, err := store.Create(ctx, name, role); err != nil {
			t.Fatal(err)
		}
	}
	revoked, admin := lease("phone-1"), lease("ops") // "ops" could be a direct worker's name

	for _, name := range []string{"phone-1", "ops"} {
		if err := tokenCmd(ctx, pool, io.Discard, []string{"revoke", name}); err != nil {
			t.Fatalf("revoking %s: %v", name, err)
		}
	}
	if _, err := client.Heartbeat(ctx, revoked); !errors.Is(err, queue.ErrLeaseLost) {
		t.Errorf("the revoked worker's lease still runs: heartbeat %v", err)
	}
	if _, err := client.Heartbeat(ctx, admin); err != nil {
		t.Errorf("revoking an admin token ended a lease: %v", err)
	}
}
