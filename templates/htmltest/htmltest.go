// Package htmltest parses the dashboard's HTML for tests and selects in
// it: by data-testid, by id, or by any predicate. It is imported by tests
// only: by the templates' own tests, which render components, and by the
// web tests, which fetch whole pages from a running server.
package htmltest

import (
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// Doc is a parsed HTML document and the text it was parsed from.
type Doc struct {
	Root *html.Node // the document node
	Raw  string     // the HTML, as parsed
}

// Parse parses body as an HTML document, failing the test if it cannot.
func Parse(t testing.TB, body string) Doc {
	t.Helper()
	root, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing HTML: %v", err)
	}
	return Doc{Root: root, Raw: body}
}

// All returns the elements of the document whose data-testid is id, in
// document order.
func (d Doc) All(id string) []*html.Node { return ByTestID(d.Root, id) }

// One returns the only element of the document whose data-testid is id.
// It fails the test, showing the start of the document, unless there is
// exactly one.
func (d Doc) One(t testing.TB, id string) *html.Node {
	t.Helper()
	nodes := d.All(id)
	if len(nodes) != 1 {
		t.Fatalf("%d elements with data-testid=%q, want 1\n%.3000s", len(nodes), id, d.Raw)
	}
	return nodes[0]
}

// Find returns the elements below n (n itself not included) for which
// keep is true, in document order.
func Find(n *html.Node, keep func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for c := range n.Descendants() {
		if c.Type == html.ElementNode && keep(c) {
			out = append(out, c)
		}
	}
	return out
}

// ByTestID returns the elements below n whose data-testid is id, in
// document order.
func ByTestID(n *html.Node, id string) []*html.Node {
	return Find(n, func(c *html.Node) bool { return Attr(c, "data-testid") == id })
}

// ByID returns the first element below n whose id attribute is id, or nil
// if there is none.
func ByID(n *html.Node, id string) *html.Node {
	for c := range n.Descendants() {
		if c.Type == html.ElementNode && Attr(c, "id") == id {
			return c
		}
	}
	return nil
}

// Attr returns the value of n's attribute key, or "" if n has none.
func Attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// HasAttr reports whether n has the attribute key, even an empty one.
func HasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

// Text returns the text of n and everything below it, with runs of white
// space collapsed to one space and none at either end.
func Text(n *html.Node) string {
	var b strings.Builder
	if n.Type == html.TextNode {
		b.WriteString(n.Data)
	}
	for c := range n.Descendants() {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// NoInlineCode fails the test, without stopping it, for everything below
// n that a Content-Security-Policy allowing no inline script or style
// would refuse: style attributes, event handler attributes (on…), <style>
// elements, and <script> elements that have no src or have content.
func NoInlineCode(t testing.TB, n *html.Node) {
	t.Helper()
	for _, e := range Find(n, func(*html.Node) bool { return true }) {
		for _, a := range e.Attr {
			if a.Key == "style" || strings.HasPrefix(a.Key, "on") {
				t.Errorf("<%s %s=%q>: inline code or style", e.Data, a.Key, a.Val)
			}
		}
		switch e.Data {
		case "style":
			t.Errorf("inline <style> element")
		case "script":
			if Attr(e, "src") == "" || e.FirstChild != nil {
				t.Errorf("inline <script> element")
			}
		}
	}
}
