package templates_test

import (
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/leasehold/leasehold/templates"
	"github.com/leasehold/leasehold/templates/htmltest"
)

func TestNewJobFormMarksInvalidFieldsAndKeepsInput(t *testing.T) {
	t.Parallel()
	v := templates.NewJobView{
		App: "not a package", StoreURL: "https://play.example/app", Device: "pixel7", Instructions: "find <b>it</b>",
		Priority: "abc", MaxAttempts: "5", IdempotencyKey: "00ff",
		Errors: map[string]string{"app": "must be an Android package name", "priority": "must be a whole number"},
		Notice: "2 fields need a change.",
	}
	d := renderHTML(t, templates.NewJobForm(jobTestPage, v))
	for name, want := range map[string]string{"app": v.App, "store_url": v.StoreURL, "device": v.Device, "priority": "abc", "max_attempts": "5", "idempotency_key": "00ff"} {
		in := d.One(t, name)
		if got := htmltest.Attr(in, "value"); got != want {
			t.Errorf("%s value %q, want %q", name, got, want)
		}
		if htmltest.Attr(in, "name") != name {
			t.Errorf("%s has name %q", name, htmltest.Attr(in, "name"))
		}
	}
	if got := htmltest.Text(d.One(t, "instructions")); got != "find <b>it</b>" {
		t.Errorf("instructions kept as %q", got)
	}
	if htmltest.Attr(d.One(t, "idempotency_key"), "type") != "hidden" {
		t.Error("idempotency_key is not hidden")
	}
	if n := htmltest.Find(d.Root, func(n *html.Node) bool {
		return htmltest.Attr(n, "name") == "_csrf" && htmltest.Attr(n, "value") == "csrf-token-1"
	}); len(n) != 2 {
		// the form's, and the sign-out form's
		t.Errorf("%d CSRF fields, want 2", len(n))
	}
	for _, name := range []string{"app", "priority"} {
		in := d.One(t, name)
		if htmltest.Attr(in, "aria-invalid") != "true" {
			t.Errorf("%s not marked invalid", name)
		}
		msg := d.One(t, "field-error-"+name)
		if htmltest.Attr(msg, "id") != name+"-error" || !strings.Contains(htmltest.Attr(in, "aria-describedby"), name+"-error") {
			t.Errorf("%s: error %q not referenced by aria-describedby %q", name, htmltest.Attr(msg, "id"), htmltest.Attr(in, "aria-describedby"))
		}
		// Beside the field: in the same .field wrapper.
		if msg.Parent != in.Parent {
			t.Errorf("%s: the error is not beside the field", name)
		}
	}
	if got := htmltest.Text(d.One(t, "field-error-app")); got != "Must be an Android package name" {
		t.Errorf("app error %q", got)
	}
	for _, name := range []string{"store_url", "device", "instructions", "max_attempts"} {
		if htmltest.HasAttr(d.One(t, name), "aria-invalid") || len(d.All("field-error-"+name)) != 0 {
			t.Errorf("%s marked invalid", name)
		}
	}
	summary := htmltest.Text(d.One(t, "form-notice"))
	if !strings.Contains(summary, "2 fields need a change.") || !strings.Contains(summary, "App: must be") || !strings.Contains(summary, "Priority: must be") {
		t.Errorf("summary %q", summary)
	}
	htmltest.NoInlineCode(t, d.Root)
}

func TestNewJobFormFresh(t *testing.T) {
	t.Parallel()
	d := renderHTML(t, templates.NewJobForm(jobTestPage, templates.NewJobView{Priority: "0", MaxAttempts: "5", IdempotencyKey: "abc"}))
	form := d.One(t, "new-job-form")
	if htmltest.Attr(form, "method") != "post" || htmltest.Attr(form, "action") != "/jobs/new" {
		t.Errorf("form %v", form.Attr)
	}
	if len(d.All("form-notice")) != 0 || len(htmltest.Find(d.Root, func(n *html.Node) bool { return htmltest.HasAttr(n, "aria-invalid") })) != 0 {
		t.Error("a fresh form shows errors")
	}
	if !htmltest.HasAttr(d.One(t, "app"), "required") {
		t.Error("app is not required")
	}
	htmltest.NoInlineCode(t, d.Root)
}
