package templates_test

import (
	"strings"
	"testing"
	"time"

	"github.com/a-h/templ"
	"golang.org/x/net/html"

	"github.com/leasehold/leasehold/templates"
	"github.com/leasehold/leasehold/templates/htmltest"
)

// listsRender renders c and checks what every page of ours must hold to:
// nothing inline for the CSP to refuse, and a CSRF field in every POST
// form.
func listsRender(t *testing.T, c templ.Component) htmltest.Doc {
	t.Helper()
	d := renderHTML(t, c)
	htmltest.NoInlineCode(t, d.Root)
	for _, form := range htmltest.Find(d.Root, func(n *html.Node) bool {
		return n.Data == "form" && strings.EqualFold(htmltest.Attr(n, "method"), "post")
	}) {
		csrf := htmltest.Find(form, func(n *html.Node) bool {
			return n.Data == "input" && htmltest.Attr(n, "name") == "_csrf" && htmltest.Attr(n, "value") == listsCSRF
		})
		if len(csrf) == 0 {
			t.Errorf("POST form %q (%s) has no _csrf field", htmltest.Attr(form, "action"), htmltest.Attr(form, "data-testid"))
		}
	}
	return d
}

// listsHidden returns the hidden fields of form by name.
func listsHidden(form *html.Node) map[string][]string {
	out := map[string][]string{}
	for _, n := range htmltest.Find(form, func(n *html.Node) bool { return n.Data == "input" && htmltest.Attr(n, "type") == "hidden" }) {
		out[htmltest.Attr(n, "name")] = append(out[htmltest.Attr(n, "name")], htmltest.Attr(n, "value"))
	}
	return out
}

const listsCSRF = "csrf-token-123"

var listsNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func listsPage(nav string) templates.Page {
	return templates.Page{Title: "T", Nav: nav, User: "alice", CSRF: listsCSRF, CSS: "/static/app.css", JS: "/static/app.js", HTMX: "/static/htmx.min.js", Now: listsNow}
}
