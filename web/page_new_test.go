package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/html"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates/htmltest"
)

var newJobKeyField = regexp.MustCompile(`name="idempotency_key" value="([0-9a-f]{32})"`)

// newJobForm opens the submit form and returns it filled in with a good
// investigation, its idempotency key included.
func (b *browser) newJobForm(t *testing.T) url.Values {
	t.Helper()
	r := b.get(t, "/jobs/new").want(t, http.StatusOK)
	m := newJobKeyField.FindSubmatch(r.body)
	if m == nil {
		t.Fatalf("no idempotency key in the form: %.2000s", r.body)
	}
	return url.Values{
		"app": {"com.example.notes"}, "store_url": {""}, "device": {""},
		"instructions": {"Open settings\r\nand find the export button"},
		"priority":     {"0"}, "max_attempts": {"5"}, "idempotency_key": {string(m[1])},
	}
}

// submitted follows a 303 from the form to the job's page and returns
// the job's id.
func submittedJob(t *testing.T, r *response) int64 {
	t.Helper()
	r.want(t, http.StatusSeeOther)
	loc := r.header.Get("Location")
	id, err := strconv.ParseInt(strings.TrimPrefix(loc, "/jobs/"), 10, 64)
	if !strings.HasPrefix(loc, "/jobs/") || err != nil {
		t.Fatalf("redirected to %q, want /jobs/ID", loc)
	}
	return id
}

func TestNewJobFormSubmits(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	form := b.newJobForm(t)
	form.Set("priority", "-3")
	form.Set("max_attempts", "2")
	form.Set("instructions", "Look for <script>alert(1)</script> in the about screen")
	id := submittedJob(t, b.post(t, "/jobs/new", form))

	job, err := f.queue.Get(f.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if job.Kind != "app_investigation" || job.Queue != "default" || job.Priority != -3 || job.MaxAttempts != 2 || job.State != queue.StatePending {
		t.Errorf("job %+v", job)
	}
	if job.IdempotencyKey == nil || *job.IdempotencyKey != form.Get("idempotency_key") {
		t.Errorf("idempotency key %v", job.IdempotencyKey)
	}
	var payload map[string]any
	if err := json.Unmarshal(job.Payload, &payload); err != nil {
		t.Fatal(err)
	}
	// Empty optional fields are left out, not stored as "".
	if len(payload) != 2 || payload["app"] != "com.example.notes" || payload["instructions"] != form.Get("instructions") {
		t.Errorf("payload %s", job.Payload)
	}

	r := b.get(t, jobPagePath(id)).want(t, http.StatusOK)
	d := parseHTML(t, r)
	if htmltest.Text(d.One(t, "job-app")) != "com.example.notes" || htmltest.Attr(d.One(t, "job-state"), "data-state") != "pending" {
		t.Error("the job page does not show the new job")
	}
	if strings.Contains(string(r.body), "<script>alert") || !strings.Contains(string(r.body), "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("instructions are not escaped")
	}
}

func TestNewJobFormDoubleSubmitMakesOneJob(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	form := b.newJobForm(t)
	first := submittedJob(t, b.post(t, "/jobs/new", form))
	again := submittedJob(t, b.post(t, "/jobs/new", form))
	if again != first {
		t.Fatalf("resubmission went to job %d, the first to %d", again, first)
	}
	// A double click: both posts in flight at once.
	form = b.newJobForm(t)
	form.Set("_csrf", b.csrf)
	answers := make([]*http.Response, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(f.ctx, http.MethodPost, f.srv.URL+"/jobs/new", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", f.srv.URL)
			answers[i], errs[i] = b.client.Do(req)
		})
	}
	wg.Wait()
	ids := make([]int64, 2)
	for i, res := range answers {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		res.Body.Close()
		ids[i] = submittedJob(t, &response{status: res.StatusCode, header: res.Header})
	}
	if ids[0] != ids[1] || ids[0] == first {
		t.Fatalf("double click made jobs %v (first form: %d)", ids, first)
	}
	if n := f.totalJobs(t); n != 2 {
		t.Fatalf("%d jobs, want 2", n)
	}
	// A fresh form is a new job, with the same values.
	if id := submittedJob(t, b.post(t, "/jobs/new", b.newJobForm(t))); id == first || id == ids[0] {
		t.Fatal("a fresh form did not make a new job")
	}
}

func TestNewJobFormKeyReusedWithOtherValues(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	form := b.newJobForm(t)
	first := submittedJob(t, b.post(t, "/jobs/new", form))
	form.Set("app", "com.example.other")
	r := b.post(t, "/jobs/new", form).want(t, http.StatusConflict)
	d := parseHTML(t, r)
	if !strings.Contains(htmltest.Text(d.One(t, "form-notice")), "nothing new was created") {
		t.Errorf("notice %q", htmltest.Text(d.One(t, "form-notice")))
	}
	if htmltest.Attr(d.One(t, "existing-job"), "href") != jobPagePath(first) {
		t.Error("no link to the job the key belongs to")
	}
	if htmltest.Attr(d.One(t, "app"), "value") != "com.example.other" {
		t.Error("input lost")
	}
	key := htmltest.Attr(d.One(t, "idempotency_key"), "value")
	if key == form.Get("idempotency_key") {
		t.Fatal("the form kept the used key")
	}
	if f.totalJobs(t) != 1 {
		t.Fatal("a conflicting submit created a job")
	}
	form.Set("idempotency_key", key)
	if id := submittedJob(t, b.post(t, "/jobs/new", form)); id == first {
		t.Fatal("submitting again did not create the new job")
	}
}

func TestNewJobFormShowsErrorsBesideFields(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	long := strings.Repeat("a", 10<<10)
	for _, tc := range []struct {
		name   string
		set    map[string]string
		fields []string // with errors
		want   string   // in the first field's message
	}{
		{"NotAPackage", map[string]string{"app": "not a package"}, []string{"app"}, "Android package name"},
		{"MissingApp", map[string]string{"app": ""}, []string{"app"}, "required"},
		{"LongApp", map[string]string{"app": long}, []string{"app"}, "Android package name"},
		{"PriorityNotANumber", map[string]string{"priority": "abc"}, []string{"priority"}, "whole number"},
		{"PriorityHuge", map[string]string{"priority": "99999999999"}, []string{"priority"}, "between"},
		{"MaxAttemptsZero", map[string]string{"max_attempts": "0"}, []string{"max_attempts"}, "between 1 and 1000"},
		{"MaxAttemptsTooMany", map[string]string{"max_attempts": "1001"}, []string{"max_attempts"}, "between 1 and 1000"},
		{"MaxAttemptsFraction", map[string]string{"max_attempts": "2.5"}, []string{"max_attempts"}, "whole number"},
		{"ScriptURL", map[string]string{"store_url": "javascript:alert(1)"}, []string{"store_url"}, "http(s) URL"},
		{"BadDevice", map[string]string{"device": "my phone!"}, []string{"device"}, "label"},
		{"LongInstructions", map[string]string{"instructions": strings.Repeat("x", 70<<10)}, []string{"instructions"}, "at most"},
		{"EveryFieldAtOnce", map[string]string{"app": "x", "store_url": "ftp://x", "device": "a b", "priority": "p", "max_attempts": "-1"},
			[]string{"app", "store_url", "device", "priority", "max_attempts"}, "Android package name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			form := b.newJobForm(t)
			for k, v := range tc.set {
				form.Set(k, v)
			}
			r := b.post(t, "/jobs/new", form).want(t, http.StatusUnprocessableEntity)
			d := parseHTML(t, r)
			for i, name := range tc.fields {
				in := d.One(t, name)
				if htmltest.Attr(in, "aria-invalid") != "true" {
					t.Errorf("%s not marked invalid", name)
				}
				msg := d.One(t, "field-error-"+name)
				if htmltest.Attr(msg, "id") != name+"-error" || !strings.Contains(htmltest.Attr(in, "aria-describedby"), name+"-error") {
					t.Errorf("%s: message not tied to the field", name)
				}
				if i == 0 && !strings.Contains(htmltest.Text(msg), tc.want) {
					t.Errorf("%s: message %q, want %q in it", name, htmltest.Text(msg), tc.want)
				}
			}
			if n := strings.Count(string(r.body), `aria-invalid="true"`); n != len(tc.fields) {
				t.Errorf("%d fields marked invalid, want %d", n, len(tc.fields))
			}
			d.One(t, "form-notice")
			// What was typed is still there.
			for _, name := range []string{"app", "store_url", "device", "priority", "max_attempts", "idempotency_key"} {
				if got := htmltest.Attr(d.One(t, name), "value"); got != form.Get(name) {
					t.Errorf("%s came back as %.40q, was %.40q", name, got, form.Get(name))
				}
			}
			if got := htmltest.Text(d.One(t, "instructions")); got != strings.Join(strings.Fields(form.Get("instructions")), " ") {
				t.Errorf("instructions came back as %.40q", got)
			}
		})
	}
	if n := f.totalJobs(t); n != 0 {
		t.Fatalf("invalid forms created %d jobs", n)
	}
}

func TestNewJobFormRefusesWhatIsNotAForm(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	for name, key := range map[string]string{"Missing": "", "NotHex": "zz-top", "TooLong": strings.Repeat("a", 65)} {
		t.Run("Key"+name, func(t *testing.T) {
			form := b.newJobForm(t)
			form.Set("idempotency_key", key)
			parseHTML(t, b.post(t, "/jobs/new", form).want(t, http.StatusBadRequest)).One(t, "problem")
		})
	}
	t.Run("NULInInstructions", func(t *testing.T) {
		form := b.newJobForm(t)
		form.Set("instructions", "a\x00b")
		d := parseHTML(t, b.post(t, "/jobs/new", form).want(t, http.StatusUnprocessableEntity))
		if !strings.Contains(htmltest.Text(d.One(t, "form-notice")), "NUL") {
			t.Errorf("notice %q", htmltest.Text(d.One(t, "form-notice")))
		}
	})
	t.Run("NoCSRF", func(t *testing.T) {
		form := b.newJobForm(t)
		req, _ := http.NewRequestWithContext(f.ctx, http.MethodPost, f.srv.URL+"/jobs/new", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", f.srv.URL)
		b.do(t, req).want(t, http.StatusForbidden)
	})
	t.Run("OtherSite", func(t *testing.T) {
		form := b.newJobForm(t)
		form.Set("_csrf", b.csrf)
		req, _ := http.NewRequestWithContext(f.ctx, http.MethodPost, f.srv.URL+"/jobs/new", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "https://evil.example")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		b.do(t, req).want(t, http.StatusForbidden)
	})
	if n := f.totalJobs(t); n != 0 {
		t.Fatalf("refused forms created %d jobs", n)
	}
}

// The form's Queue field preselects the default queue, suggests the known
// ones, and refuses what the API refuses, with the API's message.
func TestNewJobFormQueue(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	f.listsInsert(t, "report", "phones", "")

	d := parseHTML(t, b.get(t, "/jobs/new").want(t, http.StatusOK))
	in := d.One(t, "queue")
	if htmltest.Attr(in, "value") != "default" || htmltest.Attr(in, "name") != "queue" || htmltest.Attr(in, "list") != "queue-list" {
		t.Errorf("queue field %v", in.Attr)
	}
	var suggested []string
	for _, o := range htmltest.Find(d.One(t, "queue-list"), func(n *html.Node) bool { return n.Data == "option" }) {
		suggested = append(suggested, htmltest.Attr(o, "value"))
	}
	if !slices.Contains(suggested, "phones") {
		t.Errorf("suggested queues %v lack phones", suggested)
	}

	for queueName, want := range map[string]string{"phones": "phones", "": "default", "  night.batch-2  ": "night.batch-2"} {
		form := b.newJobForm(t)
		form.Set("queue", queueName)
		job, err := f.queue.Get(f.ctx, submittedJob(t, b.post(t, "/jobs/new", form)))
		if err != nil || job.Queue != want {
			t.Errorf("queue %q: job in %q (%v), want %q", queueName, job.Queue, err, want)
		}
	}
	// A form that never had the field (an old page) submits to default.
	form := b.newJobForm(t)
	form.Del("queue")
	if job, err := f.queue.Get(f.ctx, submittedJob(t, b.post(t, "/jobs/new", form))); err != nil || job.Queue != "default" {
		t.Errorf("no queue field: %q, %v", job.Queue, err)
	}

	before := f.totalJobs(t)
	for _, bad := range []string{"Phones", "a b", "<script>alert(1)</script>", "../etc", "q\x00", "默认", strings.Repeat("q", 65), strings.Repeat("x", 8<<10)} {
		t.Run("", func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"kind": "app_investigation", "queue": strings.TrimSpace(bad), "payload": map[string]any{"app": "com.example.notes"}})
			api := f.post(t, "/api/v1/jobs", string(body)).want(t, http.StatusBadRequest).json(t)
			if api["field"] != "queue" || api["code"] == nil {
				t.Fatalf("API answer %v", api)
			}
			form := b.newJobForm(t)
			form.Set("queue", bad)
			r := b.post(t, "/jobs/new", form).want(t, http.StatusUnprocessableEntity)
			d := parseHTML(t, r)
			msg := htmltest.Text(d.One(t, "field-error-queue"))
			if !strings.Contains(strings.ToLower(api["error"].(string)), strings.ToLower(msg)) {
				t.Errorf("form says %q, API %q", msg, api["error"])
			}
			if htmltest.Attr(d.One(t, "queue"), "aria-invalid") != "true" || htmltest.Attr(d.One(t, "queue"), "value") != strings.ReplaceAll(strings.TrimSpace(bad), "\x00", "\uFFFD") {
				// (an HTML parser reads NUL as U+FFFD)
				t.Errorf("queue field after the error: %v", d.One(t, "queue").Attr)
			}
			if strings.Contains(string(r.body), "<script>alert") {
				t.Error("the refused queue is not escaped")
			}
		})
	}
	if n := f.totalJobs(t); n != before {
		t.Errorf("refused queues created %d jobs", n-before)
	}
}
