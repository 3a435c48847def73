package htmltest_test

import (
	"fmt"
	"testing"

	"github.com/leasehold/leasehold/templates/htmltest"
)

// recorder keeps the errors a check reports instead of failing the test.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestSelectors(t *testing.T) {
	d := htmltest.Parse(t, `<div data-testid="row" id="a"><p data-testid="cell">one
		 <b>two</b></p></div><div data-testid="row"><input data-testid="cell" checked><em data-testid="note">n</em></div>`)
	rows := d.All("row")
	if len(rows) != 2 || htmltest.Attr(rows[0], "id") != "a" || htmltest.Attr(rows[1], "id") != "" {
		t.Fatalf("rows %v", rows)
	}
	if cells := htmltest.ByTestID(rows[0], "cell"); len(cells) != 1 || htmltest.Text(cells[0]) != "one two" {
		t.Errorf("cells of the first row %v", cells)
	}
	if in := htmltest.ByTestID(rows[1], "cell")[0]; !htmltest.HasAttr(in, "checked") || htmltest.HasAttr(in, "id") {
		t.Errorf("input %v", in.Attr)
	}
	if htmltest.ByID(d.Root, "a") != rows[0] || htmltest.ByID(d.Root, "b") != nil {
		t.Error("ByID")
	}
	if htmltest.Text(d.One(t, "note")) != "n" {
		t.Error("One")
	}
}

func TestNoInlineCode(t *testing.T) {
	for body, want := range map[string]int{
		`<script src="/app.js"></script><p class="x">fine</p>`: 0,
		`<p style="color:red">x</p>`:                           1,
		`<a href="#" onclick="go()">x</a>`:                     1,
		`<style>p{}</style>`:                                   1,
		`<script>alert(1)</script>`:                            1,
		`<script src="/app.js">alert(1)</script>`:              1,
	} {
		r := &recorder{TB: t}
		htmltest.NoInlineCode(r, htmltest.Parse(t, body).Root)
		if len(r.errs) != want {
			t.Errorf("%s: %d errors %q, want %d", body, len(r.errs), r.errs, want)
		}
	}
}
