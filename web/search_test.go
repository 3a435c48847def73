package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/templates/htmltest"
)

// q= searches from the API and the jobs page; bad text is a 400 that
// names q (a message on the page), never a 500, and what was typed comes
// back escaped.
func TestSearchFromTheAPIAndThePage(t *testing.T) {
	t.Parallel()
	f := setup(t)
	hit := f.submit(t, `{"kind":"app_investigation","payload":{"app":"com.example.notes","instructions":"Find the Export button"}}`)
	f.submit(t, `{"kind":"app_investigation","payload":{"app":"com.example.mail","instructions":"Open the inbox"}}`)

	var page struct {
		Jobs []jobJSON `json:"jobs"`
	}
	f.get(t, "/api/v1/jobs?q="+url.QueryEscape("export BUTTON")).want(t, http.StatusOK).decode(t, &page)
	if len(page.Jobs) != 1 || page.Jobs[0].ID != hit.ID {
		t.Fatalf("search from the API: %+v, want job %d", page.Jobs, hit.ID)
	}
	f.get(t, "/api/v1/jobs?state=dead&q=export").want(t, http.StatusOK).decode(t, &page)
	if len(page.Jobs) != 0 {
		t.Fatalf("dead jobs with export: %+v, want none", page.Jobs)
	}
	for _, q := range []string{"ab", "  ab  ", strings.Repeat("x", 201), "a\x00bc", "bad\xffutf"} {
		r := f.get(t, "/api/v1/jobs?q="+url.QueryEscape(q)).want(t, http.StatusBadRequest)
		if !strings.Contains(string(r.body), `"q"`) {
			t.Errorf("q=%q: 400 without naming q: %s", q, r.body)
		}
	}

	b := f.signIn(t, "alice")
	d := parseHTML(t, b.get(t, "/jobs?q=export+button").want(t, http.StatusOK))
	rows := d.All("job-row")
	if len(rows) != 1 || htmltest.Attr(rows[0], "data-job-id") != itoa(hit.ID) {
		t.Fatalf("search on the page: %d rows, want job %d", len(rows), hit.ID)
	}
	hostile := `<script>alert(1)</script>`
	r := b.get(t, "/jobs?q="+url.QueryEscape(hostile)).want(t, http.StatusOK)
	if strings.Contains(string(r.body), hostile) || !strings.Contains(string(r.body), "&lt;script&gt;") {
		t.Fatal("the search text came back unescaped, or not at all")
	}
	r = b.get(t, "/jobs?q=ab").want(t, http.StatusBadRequest)
	if !strings.Contains(string(r.body), `id="filter-q-error"`) {
		t.Fatalf("a too-short search shows no message by the field: %.500s", r.body)
	}
}
