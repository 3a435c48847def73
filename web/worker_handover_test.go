package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// A claim answer hands its jobs over (SPEC lease rule 11): it names the
// hand-over deadline, each lease runs only that long (never longer than
// the lease asked for), and the worker's first heartbeat gives the full
// lease.
func TestWorkerClaimHandsJobsOver(t *testing.T) {
	t.Parallel()
	f := setup(t)
	type answer struct {
		Jobs []struct {
			ID               int64 `json:"id"`
			LeaseToken       int64 `json:"lease_token"`
			LeaseRemainingMs int64 `json:"lease_remaining_ms"`
		} `json:"jobs"`
		HandoverMs *int64 `json:"handover_ms"`
	}
	for _, tc := range []struct {
		body           string
		handover, full int64
	}{
		{`{"lease_ms":30000}`, 5000, 30000}, // the default deadline
		{`{"lease_ms":2000}`, 2000, 2000},   // never longer than the lease
	} {
		job := f.submit(t, `{"kind":"test"}`)
		var out answer
		f.do(t, call{method: http.MethodPost, path: "/api/v1/worker/claim", body: tc.body, token: f.worker}).
			want(t, http.StatusOK).decode(t, &out)
		if len(out.Jobs) != 1 || out.Jobs[0].ID != job.ID || out.HandoverMs == nil || *out.HandoverMs != tc.handover {
			t.Fatalf("claim %s answered %+v, want job %d with handover_ms %d", tc.body, out, job.ID, tc.handover)
		}
		if ms := out.Jobs[0].LeaseRemainingMs; ms < tc.handover-20 || ms > tc.handover {
			t.Fatalf("claim %s: lease_remaining_ms %d, want the hand-over's %d", tc.body, ms, tc.handover)
		}
		var hb struct {
			RemainingMs int64 `json:"remaining_ms"`
		}
		f.workerPost(t, fmt.Sprintf("/api/v1/worker/jobs/%d/heartbeat", job.ID), fmt.Sprintf(`{"lease_token":%d}`, out.Jobs[0].LeaseToken)).
			want(t, http.StatusOK).decode(t, &hb)
		if hb.RemainingMs < tc.full-100 || hb.RemainingMs > tc.full {
			t.Fatalf("claim %s: the confirming heartbeat left %d ms, want the full lease %d", tc.body, hb.RemainingMs, tc.full)
		}
	}
}

// A hand-over never confirmed shows on the job page as a not_delivered
// attempt that does not count, and in the API with that outcome.
func TestJobPageShowsANotDeliveredAttempt(t *testing.T) {
	t.Parallel()
	f := setup(t)
	job := f.submitInvestigation(t, "com.example.notes")
	jobs, err := f.queue.Claim(f.ctx, queue.ClaimParams{WorkerID: "phone-1", Queues: []string{"default"}, Limit: 1,
		Lease: time.Minute, Handover: 5 * time.Second})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("handing over: %d jobs, %v", len(jobs), err)
	}
	// The worker is known to be gone: the hand-over ends at once.
	if n, err := f.queue.AbandonHandovers(f.ctx, jobs); err != nil || n != 1 {
		t.Fatalf("abandoning: %d, %v", n, err)
	}
	if reaped, err := f.queue.ReapExpired(f.ctx, 10); err != nil || len(reaped) != 1 {
		t.Fatalf("reaping: %+v, %v", reaped, err)
	}

	var detail struct {
		State           string `json:"state"`
		CountedAttempts int32  `json:"counted_attempts"`
		Attempts        []struct {
			Outcome *string `json:"outcome"`
		} `json:"attempts"`
	}
	f.get(t, fmt.Sprintf("/api/v1/jobs/%d", job.ID)).want(t, http.StatusOK).decode(t, &detail)
	if detail.State != "pending" || detail.CountedAttempts != 0 || len(detail.Attempts) != 1 ||
		detail.Attempts[0].Outcome == nil || *detail.Attempts[0].Outcome != "not_delivered" {
		t.Fatalf("job as the API shows it: %+v", detail)
	}

	page := string(f.signIn(t, "alice").get(t, fmt.Sprintf("/jobs/%d", job.ID)).want(t, http.StatusOK).body)
	for _, want := range []string{`class="badge outcome-not_delivered" data-testid="outcome">not_delivered<`, "0 counted against the limit"} {
		if !strings.Contains(page, want) {
			t.Fatalf("the job page lacks %q", want)
		}
	}
}
