package templates_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/a-h/templ"
	"golang.org/x/net/html"

	"github.com/leasehold/leasehold/templates"
)

// listsDoc is a rendered component, parsed.
type listsDoc struct {
	root *html.Node
	raw  string
}

// listsRender renders c and checks what every page of ours must hold to:
// nothing inline for the CSP to refuse, and a CSRF field in every POST
// form.
func listsRender(t *testing.T, c templ.Component) listsDoc {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(context.Background(), &buf); err != nil {
		t.Fatalf("rendering: %v", err)
	}
	root, err := html.Parse(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatalf("parsing: %v", err)
	}
	d := listsDoc{root: root, raw: buf.String()}
	d.walk(func(n *html.Node) {
		for _, a := range n.Attr {
			if a.Key == "style" || strings.HasPrefix(a.Key, "on") {
				t.Errorf("<%s> has an inline %s attribute", n.Data, a.Key)
			}
		}
		switch n.Data {
		case "script":
			if listsAttr(n, "src") == "" || listsText(n) != "" {
				t.Errorf("inline <script>")
			}
		case "style":
			t.Errorf("inline <style>")
		case "form":
			if strings.EqualFold(listsAttr(n, "method"), "post") && !d.formHasCSRF(n) {
				t.Errorf("POST form %q (%s) has no _csrf field", listsAttr(n, "action"), listsAttr(n, "data-testid"))
			}
		}
	})
	return d
}

func (d listsDoc) walk(fn func(*html.Node)) { listsWalk(d.root, fn) }

func listsWalk(n *html.Node, fn func(*html.Node)) {
	if n.Type == html.ElementNode {
		fn(n)
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		listsWalk(c, fn)
	}
}

func (d listsDoc) formHasCSRF(form *html.Node) bool {
	found := false
	listsWalk(form, func(n *html.Node) {
		if n.Data == "input" && listsAttr(n, "name") == "_csrf" && listsAttr(n, "value") == listsCSRF {
			found = true
		}
	})
	return found
}

// all returns the elements with data-testid id, in document order.
func (d listsDoc) all(id string) []*html.Node { return listsAll(d.root, id) }

func listsAll(root *html.Node, id string) []*html.Node {
	var out []*html.Node
	listsWalk(root, func(n *html.Node) {
		if listsAttr(n, "data-testid") == id {
			out = append(out, n)
		}
	})
	return out
}

// one returns the only element with data-testid id.
func (d listsDoc) one(t *testing.T, id string) *html.Node {
	t.Helper()
	nodes := d.all(id)
	if len(nodes) != 1 {
		t.Fatalf("%d elements with data-testid=%q, want 1", len(nodes), id)
	}
	return nodes[0]
}

// byID returns the element with that id attribute, or nil.
func (d listsDoc) byID(id string) *html.Node {
	var found *html.Node
	d.walk(func(n *html.Node) {
		if found == nil && listsAttr(n, "id") == id {
			found = n
		}
	})
	return found
}

func listsAttr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func listsHasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

// listsText is the text of n, spaces collapsed.
func listsText(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

// listsHidden returns the hidden fields of form by name.
func listsHidden(form *html.Node) map[string][]string {
	out := map[string][]string{}
	listsWalk(form, func(n *html.Node) {
		if n.Data == "input" && listsAttr(n, "type") == "hidden" {
			out[listsAttr(n, "name")] = append(out[listsAttr(n, "name")], listsAttr(n, "value"))
		}
	})
	return out
}

const listsCSRF = "csrf-token-123"

var listsNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func listsPage(nav string) templates.Page {
	return templates.Page{Title: "T", Nav: nav, User: "alice", CSRF: listsCSRF, CSS: "/static/app.css", JS: "/static/app.js", HTMX: "/static/htmx.min.js", Now: listsNow}
}
