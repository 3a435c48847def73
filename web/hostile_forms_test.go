package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestLargeFormIs413: a dashboard form over its 256 KiB limit is too
// large (413), not a form without a token (403).
func TestLargeFormIs413(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	b.get(t, "/jobs/new")
	form := url.Values{"app": {"com.example.notes"}, "instructions": {strings.Repeat("x", 300<<10)}}
	r := b.post(t, "/jobs/new", form).want(t, http.StatusRequestEntityTooLarge)
	if !strings.Contains(string(r.body), "larger than 256 KiB") {
		t.Errorf("body %s", r.body)
	}
	if n := f.totalJobs(t); n != 0 {
		t.Errorf("%d jobs submitted", n)
	}
}

// TestCSRFTokenOnlyFromBodyOrHeader: a token in the URL does not count;
// in the form body or the X-CSRF-Token header it does.
func TestCSRFTokenOnlyFromBodyOrHeader(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	b.get(t, "/")
	post := func(query string, form url.Values, header string) *response {
		req := listsRawPost(t, f, "/logout"+query, form, f.srv.URL)
		if header != "" {
			req.Header.Set("X-CSRF-Token", header)
		}
		return b.do(t, req)
	}
	if r := post("?_csrf="+url.QueryEscape(b.csrf), url.Values{}, ""); r.status != http.StatusForbidden {
		t.Fatalf("token in the query string: status %d", r.status)
	}
	b.get(t, "/").want(t, http.StatusOK) // still signed in
	if r := post("", url.Values{}, b.csrf); r.status != http.StatusSeeOther {
		t.Fatalf("token in the header: status %d %s", r.status, r.body)
	}
	b = f.signIn(t, "alice")
	b.get(t, "/")
	if r := post("", url.Values{"_csrf": {b.csrf}}, ""); r.status != http.StatusSeeOther {
		t.Fatalf("token in the body: status %d %s", r.status, r.body)
	}
}

// TestPresenceBoundsDevices: a worker announces at most 32 device labels,
// each a label.
func TestPresenceBoundsDevices(t *testing.T) {
	t.Parallel()
	f := setup(t)
	labels := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("phone-%d", i)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		devices []string
		status  int
	}{
		{"ThirtyTwo", labels(32), http.StatusNoContent},
		{"ThirtyThree", labels(33), http.StatusBadRequest},
		{"TwentyThousand", labels(20_000), http.StatusBadRequest},
		{"NotALabel", []string{"<script>"}, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"devices": tc.devices})
			r := f.do(t, call{method: http.MethodPost, path: "/api/v1/worker/presence", body: body, token: f.worker}).want(t, tc.status)
			if tc.status == http.StatusBadRequest && r.json(t)["field"] != "devices" {
				t.Errorf("body %s", r.body)
			}
		})
	}
}
