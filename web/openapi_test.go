package web_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/leasehold/leasehold/web"
)

// documentedPrefixes are the paths the OpenAPI document must describe in
// full; the dashboard's pages and static files are not part of the API.
var documentedPrefixes = []string{"/api/v1/", "/health/", "/metrics", "/artifacts/"}

// openapiDoc is the served document, read once from a server without a
// database: serving it needs none.
var openapiDoc = sync.OnceValues(func() ([]byte, error) {
	rec := httptest.NewRecorder()
	web.New(web.Config{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/openapi.json", nil))
	if rec.Code != http.StatusOK {
		return nil, &httpStatusError{rec.Code, rec.Body.String()}
	}
	return rec.Body.Bytes(), nil
})

type httpStatusError struct {
	status int
	body   string
}

func (e *httpStatusError) Error() string { return "GET /api/v1/openapi.json: " + e.body }

// operation is one method of one documented path, "GET /api/v1/jobs/{id}".
type operation struct{ method, path string }

func (o operation) String() string { return o.method + " " + o.path }

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// documentedOperations lists the operations of the document.
var documentedOperations = sync.OnceValues(func() ([]operation, error) {
	doc, err := openapiDoc()
	if err != nil {
		return nil, err
	}
	var d struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, err
	}
	var ops []operation
	for path, item := range d.Paths {
		for m := range item {
			if slices.Contains(httpMethods, m) {
				ops = append(ops, operation{strings.ToUpper(m), path})
			}
		}
	}
	return ops, nil
})

var echoParam = regexp.MustCompile(`:([A-Za-z0-9_]+)`)

// TestOpenAPIDocumentsEveryRoute fails when a route is registered and not
// documented, or documented and not registered.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	ops, err := documentedOperations()
	if err != nil {
		t.Fatal(err)
	}
	documented := map[operation]bool{}
	for _, op := range ops {
		documented[op] = true
	}
	registered := map[operation]bool{}
	for _, r := range web.New(web.Config{}).Routes() {
		if !slices.ContainsFunc(documentedPrefixes, func(p string) bool { return strings.HasPrefix(r.Path, p) }) {
			continue
		}
		registered[operation{r.Method, echoParam.ReplaceAllString(r.Path, "{$1}")}] = true
	}
	if len(registered) < 20 {
		t.Fatalf("only %d API routes registered: is the prefix filter wrong?", len(registered))
	}
	for op := range registered {
		if !documented[op] {
			t.Errorf("route %s is registered but not in web/openapi.json", op)
		}
	}
	for op := range documented {
		if !registered[op] {
			t.Errorf("web/openapi.json documents %s, which is not registered", op)
		}
	}
}

// TestOpenAPIDocumentIsValid checks the document against the OpenAPI 3.1
// schema; CI also lints it with Redocly's recommended rules (make check).
func TestOpenAPIDocumentIsValid(t *testing.T) {
	t.Parallel()
	v := openapiValidator(t)
	if ok, errs := v.ValidateDocument(); !ok {
		for _, e := range errs {
			t.Errorf("%s: %s", e.Message, e.Reason)
		}
	}
	rec := httptest.NewRecorder()
	web.New(web.Config{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/openapi.json", nil))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q (%v), want 3.1.0", doc.OpenAPI, err)
	}
}

var (
	validatorOnce sync.Once
	validatorMu   sync.Mutex // the validator's caches are not documented as safe for concurrent use
	sharedValid   validator.Validator
	validatorErr  error
)

func openapiValidator(t *testing.T) validator.Validator {
	t.Helper()
	validatorOnce.Do(func() {
		doc, err := openapiDoc()
		if err != nil {
			validatorErr = err
			return
		}
		d, err := libopenapi.NewDocument(doc)
		if err != nil {
			validatorErr = err
			return
		}
		v, errs := validator.NewValidator(d)
		if len(errs) > 0 {
			validatorErr = errs[0]
			return
		}
		sharedValid = v
	})
	if validatorErr != nil {
		t.Fatalf("loading web/openapi.json: %v", validatorErr)
	}
	return sharedValid
}

// documentedOperation finds the operation that answers method and path,
// or false when the document does not describe them (a page, or an
// unknown path a test sends on purpose).
func documentedOperation(t *testing.T, method, path string) (operation, bool) {
	t.Helper()
	ops, err := documentedOperations()
	if err != nil {
		t.Fatal(err)
	}
	segs := strings.Split(path, "/")
	for _, op := range ops {
		if op.method != method {
			continue
		}
		tmpl := strings.Split(op.path, "/")
		if len(tmpl) != len(segs) {
			continue
		}
		match := true
		for i, s := range tmpl {
			if s != segs[i] && !(strings.HasPrefix(s, "{") && segs[i] != "") {
				match = false
				break
			}
		}
		if match {
			return op, true
		}
	}
	return operation{}, false
}

// checkResponse fails t when a response to a documented operation does
// not match web/openapi.json: an undocumented status, content type or
// header, or a body that does not fit its schema. Responses to requests
// the document does not describe are not checked here
// (TestOpenAPIDocumentsEveryRoute keeps routes and document in step).
// fixture.do calls it on every response; tests that make requests of
// their own call it too.
func checkResponse(t *testing.T, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	if _, ok := documentedOperation(t, req.Method, req.URL.Path); !ok {
		return
	}
	var decoded any
	var typeErr *json.UnmarshalTypeError
	if err := json.Unmarshal(body, &decoded); errors.As(err, &typeErr) {
		// The validator decodes numbers as float64; a payload may hold a
		// valid JSON number beyond its range (hostile_test.go sends one).
		t.Logf("not checking %s %s against web/openapi.json: %v", req.Method, req.URL.Path, err)
		return
	}
	v := openapiValidator(t)
	res := &http.Response{
		StatusCode: status, Header: header, Body: io.NopCloser(bytes.NewReader(body)),
		Request: req, ContentLength: int64(len(body)),
	}
	validatorMu.Lock()
	ok, errs := v.ValidateHttpResponse(req, res)
	validatorMu.Unlock()
	if ok {
		return
	}
	for _, e := range errs {
		var details []string
		for _, f := range e.SchemaValidationErrors {
			details = append(details, f.Error())
		}
		t.Errorf("%s %s answered %d, which web/openapi.json does not allow: %s (%s) %s\nbody: %.1000s",
			req.Method, req.URL.Path, status, e.Message, e.Reason, strings.Join(details, "; "), body)
	}
}

// TestOpenAPIRejectsWrongResponses shows that checkResponse can fail: a
// missing field, an unknown field, an undocumented status.
func TestOpenAPIRejectsWrongResponses(t *testing.T) {
	t.Parallel()
	v := openapiValidator(t)
	req := httptest.NewRequest(http.MethodGet, "/api/v1/stats", nil)
	jsonHeader := http.Header{"Content-Type": {"application/json"}}
	stats := `{"jobs":{"pending":0,"running":0,"succeeded":0,"dead":0,"cancelled":0},"workers":[],"storage":{"artifact_files":0,"artifact_bytes":0}}`
	for name, tc := range map[string]struct {
		status int
		body   string
		ok     bool
	}{
		"Good":              {200, stats, true},
		"MissingState":      {200, `{"jobs":{"pending":0},"workers":[]}`, false},
		"UnknownField":      {200, strings.Replace(stats, `"workers"`, `"surprise":1,"workers"`, 1), false},
		"UndocumentedCode":  {418, `{"error":"teapot"}`, false},
		"ErrorShape":        {401, `{"error":"no token","code":"unauthorized"}`, true},
		"ErrorWithoutCode":  {401, `{"error":"no token"}`, false},
		"ErrorUnknownCode":  {401, `{"error":"no token","code":"oops"}`, false},
		"ErrorUnknownField": {401, `{"error":"no token","code":"unauthorized","surprise":7}`, false},
	} {
		res := &http.Response{StatusCode: tc.status, Header: jsonHeader, Body: io.NopCloser(strings.NewReader(tc.body)), Request: req}
		validatorMu.Lock()
		ok, errs := v.ValidateHttpResponse(req, res)
		validatorMu.Unlock()
		if ok != tc.ok {
			t.Errorf("%s: valid = %v, want %v (%v)", name, ok, tc.ok, errs)
		}
	}
}

// TestOpenAPIWorkerLifecycle walks the worker API's main answers that the
// other tests do not reach, so that each is checked against its schema by
// fixture.do: presence, fail, release, an acknowledged cancel, stats with
// a worker, the HEAD probes and the document itself.
func TestOpenAPIWorkerLifecycle(t *testing.T) {
	t.Parallel()
	f := setup(t)
	asWorker := func(path, body string) *response {
		t.Helper()
		return f.do(t, call{method: http.MethodPost, path: path, body: body, token: f.worker})
	}
	f.do(t, call{method: http.MethodGet, path: "/api/v1/openapi.json", token: "-"}).want(t, http.StatusOK)
	f.do(t, call{method: http.MethodHead, path: "/health/live", token: "-"}).want(t, http.StatusOK)
	f.do(t, call{method: http.MethodHead, path: "/health/ready", token: "-"}).want(t, http.StatusOK)

	asWorker("/api/v1/worker/presence", `{"queues":["lifecycle"],"devices":["pixel7"]}`).want(t, http.StatusNoContent)
	var stats struct {
		Workers []struct{ ID string }
	}
	f.get(t, "/api/v1/stats").want(t, http.StatusOK).decode(t, &stats)
	if len(stats.Workers) != 1 || stats.Workers[0].ID != "worker" {
		t.Errorf("stats workers = %+v, want the worker", stats.Workers)
	}

	job := f.submit(t, `{"kind":"lifecycle","queue":"lifecycle"}`)
	claim := func() int64 {
		t.Helper()
		var body struct{ Jobs []jobJSON }
		asWorker("/api/v1/worker/claim", `{"queues":["lifecycle"],"lease_ms":60000}`).want(t, http.StatusOK).decode(t, &body)
		if len(body.Jobs) != 1 || body.Jobs[0].ID != job.ID {
			t.Fatalf("claim = %+v, want job %d", body.Jobs, job.ID)
		}
		return body.Jobs[0].LeaseToken
	}
	lease := func(tok int64) string { return fmt.Sprintf(`{"lease_token":%d}`, tok) }
	jobPath := fmt.Sprintf("/api/v1/worker/jobs/%d/", job.ID)

	var failed jobJSON
	asWorker(jobPath+"fail", fmt.Sprintf(`{"lease_token":%d,"error":"flaky","retryable":true}`, claim())).want(t, http.StatusOK).decode(t, &failed)
	if failed.State != "pending" {
		t.Errorf("after a retryable failure the job is %s, want pending", failed.State)
	}
	f.post(t, fmt.Sprintf("/api/v1/jobs/%d/retry", job.ID), nil).want(t, http.StatusConflict)
	// Due now rather than after its backoff; no sleep.
	if _, err := f.pool.Exec(f.ctx, `UPDATE jobs SET run_at = now() WHERE id = $1`, job.ID); err != nil {
		t.Fatal(err)
	}
	asWorker(jobPath+"release", lease(claim())).want(t, http.StatusOK)

	tok := claim()
	f.post(t, fmt.Sprintf("/api/v1/jobs/%d/cancel", job.ID), nil).want(t, http.StatusOK)
	var hb struct {
		CancelRequested bool `json:"cancel_requested"`
	}
	asWorker(jobPath+"heartbeat", lease(tok)).want(t, http.StatusOK).decode(t, &hb)
	if !hb.CancelRequested {
		t.Error("heartbeat after a cancel: cancel_requested is false")
	}
	var cancelled jobJSON
	asWorker(jobPath+"cancelled", lease(tok)).want(t, http.StatusOK).decode(t, &cancelled)
	if cancelled.State != "cancelled" {
		t.Errorf("after the acknowledged cancel the job is %s, want cancelled", cancelled.State)
	}
	f.get(t, fmt.Sprintf("/api/v1/jobs/%d", job.ID)).want(t, http.StatusOK)
}
