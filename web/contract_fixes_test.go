package web_test

import (
	"net/http"
	"testing"
)

// The description's bounds of a claim: limit at least 1, lease_ms at
// least 100, and a queue list that names a queue. Left out, limit and
// lease_ms take their defaults; sent as 0 they are refused.
func TestWorkerClaimRefusesZeroesAndNoQueues(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, tc := range []struct{ body, field string }{
		{`{"limit":0}`, "limit"},
		{`{"lease_ms":0}`, "lease_ms"},
		{`{"queues":[]}`, "queues"},
	} {
		r := f.do(t, call{method: http.MethodPost, path: "/api/v1/worker/claim", body: tc.body, token: f.worker})
		if r.status != http.StatusBadRequest {
			t.Fatalf("%s: status %d, want 400: %s", tc.body, r.status, r.body)
		}
		if got := r.json(t)["field"]; got != tc.field {
			t.Fatalf("%s: field %v, want %s", tc.body, got, tc.field)
		}
	}
	f.claimAs(t, f.worker, `{"limit":null,"lease_ms":null,"queues":null}`)
	f.claimAs(t, f.worker, `{}`)
}
