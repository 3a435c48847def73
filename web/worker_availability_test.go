package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestWorkerAPIAvailability: a remote worker sets its own window (worker
// --available) and then claims nothing outside it, however it asks: the
// claim statement decides, not the worker.
func TestWorkerAPIAvailability(t *testing.T) {
	t.Parallel()
	f := setup(t)
	job := f.submit(t, `{"kind":"app_investigation","payload":{"app":"com.example.notes"}}`)
	opens := time.Now().UTC().Add(3 * time.Hour)
	text := strings.ToLower(opens.Weekday().String()[:3]) + " " + opens.Format("15:04") + "-" + opens.Add(time.Hour).Format("15:04") + " UTC"
	f.do(t, call{method: http.MethodPut, path: "/api/v1/worker/availability", body: `{"window":"` + text + `"}`, token: f.worker}).
		want(t, http.StatusNoContent)
	f.do(t, call{method: http.MethodPut, path: "/api/v1/worker/availability", body: `{"window":"someday"}`, token: f.worker}).
		want(t, http.StatusBadRequest)
	if jobs := f.claimAs(t, f.worker, `{"queues":["default"],"limit":5,"lease_ms":5000}`); len(jobs) != 0 {
		t.Fatalf("claimed %d jobs outside the worker's window", len(jobs))
	}
	var list struct {
		Windows []struct{ Scope, Name, Window, UpdatedBy string } `json:"windows"`
	}
	f.get(t, "/api/v1/availability").want(t, http.StatusOK).decode(t, &list)
	if len(list.Windows) != 1 || list.Windows[0].Scope != "worker" || list.Windows[0].Name != "worker" || list.Windows[0].Window != text {
		t.Fatalf("windows %+v, want the worker's %q", list.Windows, text)
	}
	// An empty window removes it.
	f.do(t, call{method: http.MethodPut, path: "/api/v1/worker/availability", body: `{"window":""}`, token: f.worker}).
		want(t, http.StatusNoContent)
	if jobs := f.claimAs(t, f.worker, `{"queues":["default"],"limit":5,"lease_ms":5000}`); len(jobs) != 1 || jobs[0].ID != job.ID {
		t.Fatalf("claimed %+v without a window, want job %d", jobs, job.ID)
	}
}
