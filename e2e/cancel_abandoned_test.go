package e2e

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/leasehold/leasehold/client"
)

// Cancelling a running job whose worker is gone (offline: no presence,
// no heartbeat; or its token revoked) ends it cancelled at once, through
// the admin API, instead of waiting for a lease nobody renews.
func TestCancelOfAbandonedLeaseEndsAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startServer()
	token := e.workerToken("rv4")
	job, err := e.client().Submit(e.ctx, client.NewJob{Kind: "secret", Payload: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if r := e.postClaim(token, `{"lease_ms":3600000}`); r.status != http.StatusOK || r.jobs != 1 {
		t.Fatalf("claim: %d, %d jobs, %v", r.status, r.jobs, r.err)
	}
	// The worker went silent a minute ago (its last heartbeat then, no
	// presence since) and holds an hour's lease.
	if _, err := e.pool.Exec(e.ctx, `UPDATE jobs SET heartbeat_at = now() - interval '1 minute', handover_pending = false,
		lease_until = now() + interval '1 hour' WHERE id = $1`, job.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client().Cancel(e.ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	if n := e.count(`SELECT count(*) FROM jobs WHERE id = $1 AND state = 'cancelled'`, job.ID); n != 1 {
		t.Errorf("a cancelled job of an offline worker is not cancelled at once")
	}

	// Revoked: the same, though its heartbeat is fresh.
	job2, err := e.client().Submit(e.ctx, client.NewJob{Kind: "secret", Payload: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if r := e.postClaim(token, `{"lease_ms":3600000}`); r.status != http.StatusOK || r.jobs != 1 {
		t.Fatalf("claim: %d, %d jobs, %v", r.status, r.jobs, r.err)
	}
	// Revoked, but its lease left standing: a revoke made by an older
	// server, or cut short before it ended the leases.
	if _, err := e.pool.Exec(e.ctx, `UPDATE api_tokens SET revoked_at = now() WHERE name = 'rv4'`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(e.ctx, `UPDATE jobs SET handover_pending = false, lease_until = now() + interval '1 hour' WHERE id = $1`, job2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client().Cancel(e.ctx, job2.ID); err != nil {
		t.Fatal(err)
	}
	if n := e.count(`SELECT count(*) FROM jobs WHERE id = $1 AND state = 'cancelled'`, job2.ID); n != 1 {
		t.Errorf("a cancelled job of a revoked worker is not cancelled at once")
	}
}
