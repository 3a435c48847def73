package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/role"
)

// The users page: an admin adds a user, changes its role and removes it;
// bad input is refused on the page with why (never a 500) and changes
// nothing; the last admin stays; an operator cannot open it.
func TestUsersPage(t *testing.T) {
	t.Parallel()
	f := setup(t)
	admin := f.signIn(t, "root")
	page := admin.get(t, "/users").want(t, http.StatusOK)
	if !strings.Contains(string(page.body), `data-name="root"`) {
		t.Fatalf("the users page does not list root:\n%.2000s", page.body)
	}

	admin.post(t, "/users", url.Values{"name": {"otto"}, "role": {"operator"}, "password": {testPassword}}).want(t, http.StatusSeeOther)
	otto := f.signInAs(t, "otto")
	refused := otto.get(t, "/users").want(t, http.StatusForbidden)
	if !strings.HasPrefix(refused.header.Get("Content-Type"), "text/html") || !strings.Contains(string(refused.body), "it needs the admin role") {
		t.Errorf("an operator's refusal of /users: %s %q, want a page that says why", refused.header.Get("Content-Type"), refused.body)
	}
	otto.get(t, "/jobs/new").want(t, http.StatusOK)

	admin.post(t, "/users/otto/role", url.Values{"role": {"viewer"}}).want(t, http.StatusSeeOther)
	otto.get(t, "/jobs/new").want(t, http.StatusForbidden) // the open session has the new role

	for _, tc := range []struct {
		name   string
		path   string
		form   url.Values
		status int
		says   string
	}{
		{"taken name", "/users", url.Values{"name": {"otto"}, "role": {"viewer"}, "password": {testPassword}}, http.StatusConflict, "exists"},
		{"bad name", "/users", url.Values{"name": {"<script>alert(1)</script>"}, "role": {"viewer"}, "password": {testPassword}}, http.StatusUnprocessableEntity, "username"},
		{"long name", "/users", url.Values{"name": {strings.Repeat("a", 5000)}, "role": {"viewer"}, "password": {testPassword}}, http.StatusUnprocessableEntity, "username"},
		{"short password", "/users", url.Values{"name": {"pia"}, "role": {"viewer"}, "password": {"short"}}, http.StatusUnprocessableEntity, "8 to 1024"},
		{"worker role", "/users", url.Values{"name": {"pia"}, "role": {"worker"}, "password": {testPassword}}, http.StatusUnprocessableEntity, "role"},
		{"no role", "/users/otto/role", url.Values{}, http.StatusUnprocessableEntity, "role"},
		{"unknown user", "/users/nobody/role", url.Values{"role": {"viewer"}}, http.StatusNotFound, "no user"},
		{"last admin demoted", "/users/root/role", url.Values{"role": {"operator"}}, http.StatusConflict, "last admin"},
		{"last admin removed", "/users/root/remove", url.Values{}, http.StatusConflict, "last admin"},
	} {
		r := admin.post(t, tc.path, tc.form)
		if r.status != tc.status || !strings.Contains(string(r.body), tc.says) {
			t.Errorf("%s: %d, want %d saying %q; %.300s", tc.name, r.status, tc.status, tc.says, r.body)
		}
		if strings.Contains(string(r.body), "<script>alert") {
			t.Errorf("%s: the page echoes markup unescaped", tc.name)
		}
	}
	users, err := f.auth.Users(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 2 || users[0].Username != "otto" || users[0].Role != role.Viewer || users[1].Role != role.Admin {
		t.Fatalf("after the refusals: %+v; want otto a viewer and root an admin", users)
	}

	admin.post(t, "/users/otto/remove", url.Values{}).want(t, http.StatusSeeOther)
	if r := otto.get(t, "/"); r.status != http.StatusSeeOther {
		t.Errorf("a removed user's session still opens pages: %d", r.status)
	}
}
