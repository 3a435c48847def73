package templates_test

import (
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/leasehold/leasehold/templates"
)

func TestNewJobFormMarksInvalidFieldsAndKeepsInput(t *testing.T) {
	t.Parallel()
	v := templates.NewJobView{
		App: "not a package", StoreURL: "https://play.example/app", Device: "pixel7", Instructions: "find <b>it</b>",
		Priority: "abc", MaxAttempts: "5", IdempotencyKey: "00ff",
		Errors: map[string]string{"app": "must be an Android package name", "priority": "must be a whole number"},
		Notice: "2 fields need a change.",
	}
	d := renderJobHTML(t, templates.NewJobForm(jobTestPage, v))
	for name, want := range map[string]string{"app": v.App, "store_url": v.StoreURL, "device": v.Device, "priority": "abc", "max_attempts": "5", "idempotency_key": "00ff"} {
		in := d.one(t, name)
		if got := jobAttr(in, "value"); got != want {
			t.Errorf("%s value %q, want %q", name, got, want)
		}
		if jobAttr(in, "name") != name {
			t.Errorf("%s has name %q", name, jobAttr(in, "name"))
		}
	}
	if got := jobText(d.one(t, "instructions")); got != "find <b>it</b>" {
		t.Errorf("instructions kept as %q", got)
	}
	if jobAttr(d.one(t, "idempotency_key"), "type") != "hidden" {
		t.Error("idempotency_key is not hidden")
	}
	if n := d.all(func(n *html.Node) bool { return jobAttr(n, "name") == "_csrf" && jobAttr(n, "value") == "csrf-token-1" }); len(n) != 2 {
		// the form's, and the sign-out form's
		t.Errorf("%d CSRF fields, want 2", len(n))
	}
	for _, name := range []string{"app", "priority"} {
		in := d.one(t, name)
		if jobAttr(in, "aria-invalid") != "true" {
			t.Errorf("%s not marked invalid", name)
		}
		msg := d.one(t, "field-error-"+name)
		if jobAttr(msg, "id") != name+"-error" || !strings.Contains(jobAttr(in, "aria-describedby"), name+"-error") {
			t.Errorf("%s: error %q not referenced by aria-describedby %q", name, jobAttr(msg, "id"), jobAttr(in, "aria-describedby"))
		}
		// Beside the field: in the same .field wrapper.
		if msg.Parent != in.Parent {
			t.Errorf("%s: the error is not beside the field", name)
		}
	}
	if got := jobText(d.one(t, "field-error-app")); got != "Must be an Android package name" {
		t.Errorf("app error %q", got)
	}
	for _, name := range []string{"store_url", "device", "instructions", "max_attempts"} {
		if jobHasAttr(d.one(t, name), "aria-invalid") || len(d.testID("field-error-"+name)) != 0 {
			t.Errorf("%s marked invalid", name)
		}
	}
	summary := jobText(d.one(t, "form-notice"))
	if !strings.Contains(summary, "2 fields need a change.") || !strings.Contains(summary, "App: must be") || !strings.Contains(summary, "Priority: must be") {
		t.Errorf("summary %q", summary)
	}
	jobNoInlineCode(t, d)
}

func TestNewJobFormFresh(t *testing.T) {
	t.Parallel()
	d := renderJobHTML(t, templates.NewJobForm(jobTestPage, templates.NewJobView{Priority: "0", MaxAttempts: "5", IdempotencyKey: "abc"}))
	form := d.one(t, "new-job-form")
	if jobAttr(form, "method") != "post" || jobAttr(form, "action") != "/jobs/new" {
		t.Errorf("form %v", form.Attr)
	}
	if len(d.testID("form-notice")) != 0 || len(d.all(func(n *html.Node) bool { return jobHasAttr(n, "aria-invalid") })) != 0 {
		t.Error("a fresh form shows errors")
	}
	if !jobHasAttr(d.one(t, "app"), "required") {
		t.Error("app is not required")
	}
	jobNoInlineCode(t, d)
}
