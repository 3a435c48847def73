package web_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/audit"
	"github.com/leasehold/leasehold/role"
)

var auditRowID = regexp.MustCompile(`data-testid="audit-row" data-id="(\d+)"`)

// auditPageIDs are the ids of the rows a page of /audit shows, in order.
func auditPageIDs(body []byte) []string {
	var ids []string
	for _, m := range auditRowID.FindAllSubmatch(body, -1) {
		ids = append(ids, string(m[1]))
	}
	return ids
}

// The audit page shows an admin the trail, newest first, every value
// escaped; it filters and pages like the API; an admin's menu links it
// and nobody else's.
func TestAuditPage(t *testing.T) {
	t.Parallel()
	f := setup(t)
	admin := f.signIn(t, "root")
	hostile := audit.Actor{Name: "user:<script>alert(1)</script>", Role: role.Admin, Addr: "203.0.113.9"}
	f.writeAudit(t, hostile, audit.Entry{Action: "user.add", Target: `<img src=x onerror="alert(2)">`,
		Detail: map[string]any{"note": "</td><script>alert(3)</script>", "ids": []int{1, 2, 3}}})
	alice := audit.Actor{Name: "user:alice", Role: role.Operator, Addr: "192.0.2.7"}
	var aliceIDs []int64
	for range 3 {
		aliceIDs = append(aliceIDs, f.writeAudit(t, alice, audit.Entry{Action: "job.retry", Target: "job:7"}))
	}

	page := admin.get(t, "/audit").want(t, http.StatusOK)
	body := string(page.body)
	for _, bad := range []string{"<script>alert", "<img src=x", "</td><script>"} {
		if strings.Contains(body, bad) {
			t.Errorf("the audit page echoes %q unescaped", bad)
		}
	}
	for _, escaped := range []string{"user:&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;img src=x onerror=", "203.0.113.9",
		html.EscapeString(`{"ids":[1,2,3],"note":"</td><script>alert(3)</script>"}`)} {
		if !strings.Contains(body, escaped) {
			t.Errorf("the audit page does not show %q:\n%.3000s", escaped, body)
		}
	}
	if !strings.Contains(body, `href="/audit"`) || !strings.Contains(body, `aria-current="page"`) {
		t.Errorf("an admin's menu does not link the audit page")
	}
	// root's own sign-in is in the trail too: it is a change.
	if ids := auditPageIDs(page.body); len(ids) != 5 || ids[0] != itoa(aliceIDs[2]) {
		t.Errorf("the page lists rows %v, want 5 with the newest (%d) first", ids, aliceIDs[2])
	}

	filtered := admin.get(t, "/audit?actor=user:alice&action=job").want(t, http.StatusOK)
	if ids := auditPageIDs(filtered.body); len(ids) != 3 {
		t.Errorf("filtered by alice and job: rows %v, want her 3", ids)
	}
	if !strings.Contains(string(filtered.body), `value="user:alice"`) {
		t.Errorf("the filter form does not keep the actor typed")
	}

	// Pages of two: the Older link keeps the filters and goes on from
	// the last row; the older page links back to the newest.
	first := admin.get(t, "/audit?actor=user:alice&limit=2").want(t, http.StatusOK)
	older := regexp.MustCompile(`href="([^"]+)" rel="next"`).FindSubmatch(first.body)
	if ids := auditPageIDs(first.body); len(ids) != 2 || older == nil {
		t.Fatalf("a page of 2: rows %v and an Older link %q", ids, older)
	}
	next := html.UnescapeString(string(older[1]))
	u, err := url.Parse(next)
	if err != nil || u.Query().Get("actor") != "user:alice" || u.Query().Get("before") != itoa(aliceIDs[1]) {
		t.Fatalf("the Older link is %q, want alice's filter and before=%d", next, aliceIDs[1])
	}
	second := admin.get(t, next).want(t, http.StatusOK)
	if ids := auditPageIDs(second.body); len(ids) != 1 || ids[0] != itoa(aliceIDs[0]) {
		t.Errorf("the older page: rows %v, want only %d", ids, aliceIDs[0])
	}
	if strings.Contains(string(second.body), `rel="next"`) || !strings.Contains(string(second.body), `data-testid="newest-link"`) {
		t.Errorf("the last page has an Older link, or no link to the newest")
	}

	empty := admin.get(t, "/audit?actor=user:nobody").want(t, http.StatusOK)
	if !strings.Contains(string(empty.body), "No changes match these filters") {
		t.Errorf("a filter that matches nothing does not say so:\n%.2000s", empty.body)
	}

	// Bad input: a 400 page that says which field, the form kept and
	// nothing echoed unescaped; never a 500.
	for _, tc := range []struct{ query, says string }{
		{"since=yesterday", "since"},
		{"until=2026-13-01T00:00:00Z", "until"},
		{"before=abc", "before"},
		{"limit=0", "limit"},
		{"limit=100000", "limit"},
		{"actor=" + url.QueryEscape("<script>alert(4)</script>"+strings.Repeat("a", 300)), "at most 255"},
		{"target=a%00b", "at most 255"},
		{"action=%ff", "at most 255"},
	} {
		r := admin.get(t, "/audit?"+tc.query)
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), tc.says) {
			t.Errorf("/audit?%.60s: %d, want 400 saying %q; %.300s", tc.query, r.status, tc.says, r.body)
		}
		if !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || !strings.Contains(string(r.body), `data-testid="audit-filters"`) {
			t.Errorf("/audit?%.60s: not the page with its form", tc.query)
		}
		if strings.Contains(string(r.body), "<script>alert") {
			t.Errorf("/audit?%.60s: the page echoes markup unescaped", tc.query)
		}
	}

	// Only admins: an operator is refused, and its menu has no link.
	if _, err := f.auth.AddUser(f.ctx, "otto", role.Operator, testPassword); err != nil {
		t.Fatal(err)
	}
	otto := f.signInAs(t, "otto")
	refused := otto.get(t, "/audit").want(t, http.StatusForbidden)
	if !strings.Contains(string(refused.body), "it needs the admin role") {
		t.Errorf("an operator's refusal of /audit: %q", refused.body)
	}
	if home := otto.get(t, "/").want(t, http.StatusOK); strings.Contains(string(home.body), `href="/audit"`) {
		t.Errorf("an operator's menu links the audit page")
	}
}
