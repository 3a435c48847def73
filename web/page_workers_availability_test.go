package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/templates/htmltest"
)

// TestWorkersPageWindows: the workers page sets, lists and removes
// availability windows; a window that does not parse is refused with a
// 422 that names the position and keeps what was typed.
func TestWorkersPageWindows(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	b.get(t, "/workers").want(t, http.StatusOK)
	b.post(t, "/workers/availability", url.Values{"scope": {"device"}, "name": {"pixel7"}, "window": {"mon-sun 00:00-24:00 Europe/Berlin"}}).
		want(t, http.StatusSeeOther)
	d := parseHTML(t, b.get(t, "/workers").want(t, http.StatusOK))
	rows := d.All("window-row")
	if len(rows) != 1 || htmltest.Attr(rows[0], "data-name") != "pixel7" {
		t.Fatalf("%d window rows, want pixel7's", len(rows))
	}
	if st := htmltest.Text(htmltest.ByTestID(rows[0], "window-state")[0]); st != "always open" {
		t.Errorf("state %q, want always open", st)
	}

	r := b.post(t, "/workers/availability", url.Values{"scope": {"device"}, "name": {"moto"}, "window": {"mon 09:00-17:60"}}).
		want(t, http.StatusUnprocessableEntity)
	d = parseHTML(t, r)
	if e := d.All("window-error"); len(e) != 1 || !strings.Contains(htmltest.Text(e[0]), "at 14") {
		t.Errorf("window error %v, want one naming position 14", e)
	}
	if in := d.All("window-text"); len(in) != 1 || htmltest.Attr(in[0], "value") != "mon 09:00-17:60" {
		t.Errorf("the typed window is not kept")
	}

	b.get(t, "/workers").want(t, http.StatusOK)
	b.post(t, "/workers/availability/delete", url.Values{"scope": {"device"}, "name": {"pixel7"}}).want(t, http.StatusSeeOther)
	b.get(t, "/workers").want(t, http.StatusOK)
	b.post(t, "/workers/availability/delete", url.Values{"scope": {"device"}, "name": {"pixel7"}}).want(t, http.StatusNotFound)
	if rows := parseHTML(t, b.get(t, "/workers").want(t, http.StatusOK)).All("window-row"); len(rows) != 0 {
		t.Errorf("%d window rows after removing the only one", len(rows))
	}
}
