package worker_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// A worker without --device sends "devices": [] in its claim and its
// presence: the description says array, and a validating proxy refuses
// null.
func TestRemoteSendsDevicesAsAnArray(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	bodies := map[string]map[string]json.RawMessage{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]json.RawMessage
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("%s: body %s: %v", r.URL.Path, b, err)
		}
		mu.Lock()
		bodies[r.URL.Path] = body
		mu.Unlock()
		if r.URL.Path == "/api/v1/worker/claim" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jobs":[],"waited_ms":0}`)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	r, err := worker.NewRemote(srv.URL, "secret", quiet)
	if err != nil {
		t.Fatal(err)
	}
	r.ClaimWait = 0
	ctx := t.Context()
	if _, err := r.Claim(ctx, queue.ClaimParams{WorkerID: "w", Queues: []string{"default"}, Limit: 1, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := r.WorkerSeen(ctx, queue.Presence{ID: "w", Queues: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, path := range []string{"/api/v1/worker/claim", "/api/v1/worker/presence"} {
		if got := string(bodies[path]["devices"]); got != "[]" {
			t.Errorf("%s sent devices %s, want []", path, got)
		}
	}
}

// A remote worker with more free slots than one claim may take asks for
// api.MaxClaimLimit (one answer's bound) and still gets its jobs, instead of a 400 forever.
func TestRemoteWorkerAboveTheClaimLimitGetsJobs(t *testing.T) {
	t.Parallel()
	f := setup(t)
	job := f.submit(t, `{"steps":1,"step_ms":10}`, 1)
	f.run(t, worker.Config{ID: "wide", Backend: f.remote(t), Concurrency: api.MaxClaimLimit + 50, Poll: 50 * time.Millisecond})
	f.waitState(t, job.ID, queue.StateSucceeded)
}

// The remote worker decides on the error's code, never on its message: a
// lease_lost answer in any words stops the attempt as a lost lease, and a
// conflict whose message reads like one does not.
func TestRemoteDecidesOnTheErrorCode(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		status   int
		body     string
		leaseErr bool
	}{
		{http.StatusConflict, `{"error":"Lease verloren","code":"lease_lost"}`, true},
		{http.StatusConflict, `{"error":"","code":"lease_lost"}`, true},
		{http.StatusConflict, `{"error":"lease lost: job 7 is held by another worker","code":"conflict"}`, false},
		{http.StatusConflict, `lease lost`, false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(c.status)
			_, _ = io.WriteString(w, c.body)
		}))
		r, err := worker.NewRemote(srv.URL, "secret", quiet)
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.Heartbeat(t.Context(), queue.Lease{JobID: 7, Token: 3, WorkerID: "w"})
		srv.Close()
		if err == nil {
			t.Fatalf("%d %s: heartbeat succeeded", c.status, c.body)
		}
		if got := errors.Is(err, queue.ErrLeaseLost); got != c.leaseErr {
			t.Errorf("%d %s: heartbeat error %v, lease lost %v, want %v", c.status, c.body, err, got, c.leaseErr)
		}
	}
}
