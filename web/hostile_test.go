package web_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/web"
)

// TestHostileInput sends what a broken or malicious client might, and
// expects a precise 4xx JSON error each time, never a 500, and no job.
func TestHostileInput(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const jobs = "/api/v1/jobs"
	nested := func(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }
	for _, tc := range []struct {
		name   string
		method string // default POST
		path   string // default /api/v1/jobs
		body   string
		header map[string]string
		status int    // default 400
		field  string // "" when no field is at fault
		errHas string // a part of the error message, when it matters
	}{
		// Broken JSON.
		{name: "Malformed", body: `{"kind":"noop",}`, errHas: "at byte 16"},
		{name: "Truncated", body: `{"kind":"noop"`, errHas: "unexpected end"},
		{name: "Empty", body: ``, errHas: "empty"},
		{name: "OnlySpace", body: " \n\t ", errHas: "empty"},
		{name: "TrailingGarbage", body: `{"kind":"noop"} x`, errHas: "after the JSON object"},
		{name: "TwoObjects", body: `{"kind":"noop"}{"kind":"noop"}`, errHas: "after the JSON object"},
		{name: "BodyIsArray", body: `[{"kind":"noop"}]`, errHas: "JSON object"},
		{name: "BodyIsString", body: `"noop"`, errHas: "JSON object"},
		{name: "BodyIsNull", body: `null`, errHas: "JSON object"},
		{name: "BodyIsNumber", body: `42`, errHas: "JSON object"},
		{name: "NestedTooDeep", body: `{"kind":"noop","payload":{"a":` + nested(20_000) + `}}`},
		{name: "ByteOrderMark", body: "\xef\xbb\xbf{\"kind\":\"noop\"}"},

		// Wrong types and unknown fields.
		{name: "PriorityString", body: `{"kind":"noop","priority":"high"}`, field: "priority", errHas: "integer"},
		{name: "PriorityFraction", body: `{"kind":"noop","priority":1.5}`, field: "priority"},
		{name: "PriorityOverflow", body: `{"kind":"noop","priority":99999999999}`, field: "priority"},
		{name: "MaxAttemptsString", body: `{"kind":"noop","max_attempts":"5"}`, field: "max_attempts"},
		{name: "KindNumber", body: `{"kind":5}`, field: "kind", errHas: "string"},
		{name: "KindObject", body: `{"kind":{"a":1}}`, field: "kind"},
		{name: "RunAtWords", body: `{"kind":"noop","run_at":"tomorrow"}`, field: "run_at"},
		{name: "RunAtNumber", body: `{"kind":"noop","run_at":1700000000}`, field: "run_at"},
		{name: "TimeoutBool", body: `{"kind":"noop","timeout_ms":true}`, field: "timeout_ms"},
		{name: "UnknownField", body: `{"kind":"noop","max_attempt":3}`, field: "max_attempt", errHas: "unknown"},
		{name: "UnknownFieldCase", body: `{"kind":"noop","Kind2":"x"}`, field: "Kind2"},

		// Payload that is not an object, or that PostgreSQL could not store.
		{name: "PayloadArray", body: `{"kind":"noop","payload":[1,2]}`, field: "payload"},
		{name: "PayloadString", body: `{"kind":"noop","payload":"{}"}`, field: "payload"},
		{name: "PayloadNull", body: `{"kind":"noop","payload":null}`, field: "payload"},
		{name: "PayloadNumber", body: `{"kind":"noop","payload":7}`, field: "payload"},
		{name: "PayloadNestedDeep", body: `{"kind":"noop","payload":{"a":` + nested(500) + `}}`, field: "payload", errHas: "deeper"},
		{name: "PayloadLoneSurrogate", body: `{"kind":"noop","payload":{"a":"\ud800"}}`, field: "payload", errHas: "surrogate"},
		{name: "PayloadLowSurrogateFirst", body: `{"kind":"noop","payload":{"a":"\udc00\ud800x"}}`, field: "payload"},
		{name: "PayloadSurrogateAtEnd", body: `{"kind":"noop","payload":{"a":"x\ud83d"}}`, field: "payload"},
		{name: "PayloadHugeExponent", body: `{"kind":"noop","payload":{"n":1e999999999999}}`, field: "payload"},
		{name: "PayloadTinyNumber", body: `{"kind":"noop","payload":{"n":1.5e-16383}}`, field: "payload"},
		{name: "PayloadAmplifier", body: `{"kind":"noop","payload":{"n":1e131071}}`, field: "payload"},
		{name: "PayloadTooLarge", body: `{"kind":"noop","payload":{"s":"` + strings.Repeat("x", 1<<20) + `"}}`, status: 413, field: "payload"},

		// NUL and invalid UTF-8.
		{name: "RawNULInString", body: "{\"kind\":\"no\x00op\"}", errHas: "at byte"},
		{name: "EscapedNULInKind", body: `{"kind":"no\u0000op"}`, field: "kind"},
		{name: "EscapedNULInPayload", body: `{"kind":"noop","payload":{"a":"x\u0000y"}}`, field: "payload"},
		{name: "EscapedNULInPayloadKey", body: `{"kind":"noop","payload":{"\u0000":1}}`, field: "payload"},
		{name: "EscapedNULInKey", body: `{"kind":"noop","idempotency_key":"k\u0000"}`, field: "idempotency_key"},
		{name: "InvalidUTF8InKind", body: "{\"kind\":\"\xff\xfe\"}", errHas: "UTF-8"},
		{name: "InvalidUTF8InPayload", body: "{\"kind\":\"noop\",\"payload\":{\"a\":\"\xc3\x28\"}}", errHas: "UTF-8"},

		// Rules of queue.NewJob (queue.ValidationError).
		{name: "MissingKind", body: `{}`, field: "kind"},
		{name: "BadKind", body: `{"kind":"Not A Kind"}`, field: "kind"},
		{name: "BadQueue", body: `{"kind":"noop","queue":"UPPER"}`, field: "queue"},
		{name: "ZeroMaxAttempts", body: `{"kind":"noop","max_attempts":0}`, field: "max_attempts"},
		{name: "NegativeBackoff", body: `{"kind":"noop","backoff_base_ms":-1}`, field: "backoff_base_ms"},
		{name: "ShortTimeout", body: `{"kind":"noop","timeout_ms":5}`, field: "timeout_ms"},
		{name: "InvestigationWithoutApp", body: `{"kind":"app_investigation","payload":{}}`, field: "payload.app"},
		{name: "InvestigationBadURL", body: `{"kind":"app_investigation","payload":{"app":"com.a.b","store_url":"javascript:alert(1)"}}`, field: "payload.store_url"},
		// payload.app and payload.device fit their index for every kind.
		{name: "AppTooLong", body: `{"kind":"x","payload":{"app":"` + incompressible(2800) + `"}}`, field: "payload.app", errHas: "255"},
		{name: "DeviceTooLong", body: `{"kind":"x","payload":{"device":"` + strings.Repeat("d", 65) + `"}}`, field: "payload.device", errHas: "64"},
		{name: "BatchAppTooLong", path: jobs + "/batch", body: `{"jobs":[{"kind":"x"},{"kind":"x","payload":{"app":"` + incompressible(2800) + `"}}]}`, field: "jobs[1].payload.app"},
		{name: "LongIdempotencyHeader", body: `{"kind":"noop"}`, header: map[string]string{"Idempotency-Key": strings.Repeat("k", 300)}, field: "idempotency_key"},

		// Media type and size.
		{name: "TextPlain", body: `{"kind":"noop"}`, header: map[string]string{"Content-Type": "text/plain"}, status: 415},
		{name: "Form", body: `kind=noop`, header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, status: 415},
		{name: "BadMediaType", body: `{"kind":"noop"}`, header: map[string]string{"Content-Type": "application/json; charset"}, status: 415},
		{name: "TwoMiB", body: `{"kind":"noop","payload":{"s":"` + strings.Repeat("x", 2<<20) + `"}}`, status: 413},
		{name: "BatchTwoMiBJobIsFine", path: jobs + "/batch", body: `{"jobs":[{"kind":"noop","payload":{"s":"` + strings.Repeat("x", 2<<20) + `"}}]}`, status: 413, field: "jobs[0].payload"},

		// Batch.
		{name: "BatchJobsNotArray", path: jobs + "/batch", body: `{"jobs":{"kind":"noop"}}`, field: "jobs"},
		{name: "BatchJobString", path: jobs + "/batch", body: `{"jobs":["noop"]}`, field: "jobs[0]"},
		{name: "BatchIdempotencyHeader", path: jobs + "/batch", body: `{"jobs":[{"kind":"noop"}]}`, header: map[string]string{"Idempotency-Key": "k"}, field: "idempotency_key"},
		{name: "BatchTruncated", path: jobs + "/batch", body: `{"jobs":[{"kind":"noop"}`, errHas: "unexpected end"},

		// Ids in paths and bodies.
		{name: "IDNotNumeric", method: "GET", path: jobs + "/abc", field: "id"},
		{name: "IDNegative", method: "GET", path: jobs + "/-1", field: "id"},
		{name: "IDZero", method: "GET", path: jobs + "/0", field: "id"},
		{name: "IDFraction", method: "GET", path: jobs + "/1.5", field: "id"},
		{name: "IDOverflow", method: "GET", path: jobs + "/99999999999999999999", field: "id", errHas: "range"},
		{name: "IDHex", method: "GET", path: jobs + "/0x10", field: "id"},
		{name: "IDEncodedNUL", method: "GET", path: jobs + "/1%00", field: "id"},
		{name: "RetryIDOverflow", path: jobs + "/99999999999999999999/retry", field: "id"},
		{name: "CancelIDNegative", path: jobs + "/-7/cancel", field: "id"},
		{name: "BulkIDOverflow", path: jobs + "/cancel", body: `{"ids":[99999999999999999999]}`, field: "ids"},
		{name: "BulkIDNegative", path: jobs + "/retry", body: `{"ids":[-1]}`, field: "ids[0]"},
		{name: "BulkNoSelector", path: jobs + "/cancel", body: `{}`},
		{name: "BulkTrailing", path: jobs + "/cancel", body: `{"ids":[1]}]`},

		// Query parameters.
		{name: "HugeLimit", method: "GET", path: jobs + "?limit=99999999999999999999", field: "limit"},
		{name: "LimitOverMax", method: "GET", path: jobs + "?limit=501", field: "limit", errHas: "500"},
		{name: "NegativeLimit", method: "GET", path: jobs + "?limit=-1", field: "limit"},
		{name: "BadState", method: "GET", path: jobs + "?state=RUNNING", field: "state"},
		{name: "NULInFilter", method: "GET", path: jobs + "?queue=a%00b", field: "queue"},
		{name: "InvalidUTF8InFilter", method: "GET", path: jobs + "?kind=%c3%28", field: "kind"},
		{name: "CursorOverflow", method: "GET", path: jobs + "?cursor=99999999999999999999", field: "cursor"},

		// Routing: echo's own errors are JSON too.
		{name: "UnknownRoute", method: "GET", path: "/api/v1/nope", status: 404},
		{name: "UnknownTopLevel", method: "GET", path: "/nope", status: 404},
		{name: "WrongMethod", method: "DELETE", path: jobs, status: 405},
		{name: "WrongMethodOnAction", method: "GET", path: jobs + "/1/retry", status: 405},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := call{method: tc.method, path: tc.path, header: tc.header}
			if c.method == "" {
				c.method = http.MethodPost
			}
			if c.path == "" {
				c.path = jobs
			}
			if c.method == http.MethodPost {
				c.body = tc.body
			}
			status := tc.status
			if status == 0 {
				status = http.StatusBadRequest
			}
			res := f.do(t, c).want(t, status)
			if ct := res.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type = %q", ct)
			}
			body := res.json(t)
			msg, _ := body["error"].(string)
			if msg == "" {
				t.Errorf("no error message: %s", res.body)
			}
			if body["field"] != nilIfEmpty(tc.field) {
				t.Errorf("field = %v, want %q (body %.300s)", body["field"], tc.field, res.body)
			}
			if tc.errHas != "" && !strings.Contains(msg, tc.errHas) {
				t.Errorf("error %q does not mention %q", msg, tc.errHas)
			}
			if status == http.StatusMethodNotAllowed && res.header.Get("Allow") == "" {
				t.Error("405 without an Allow header")
			}
			if n := f.totalJobs(t); n != 0 {
				t.Fatalf("%d jobs exist after a refused request", n)
			}
		})
	}
	if strings.Contains(f.logs.String(), "status=500") {
		t.Errorf("some input caused a 500:\n%s", f.logs.String())
	}
}

// incompressible is n letters that PostgreSQL cannot compress, so that an
// index entry of them is as large as they are.
func incompressible(n int) string {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = 'a' + byte(x%26)
	}
	return string(b)
}

// TestPayloadLimits shows that what the hostile test refuses is refused
// at the edge, not before it.
func TestPayloadLimits(t *testing.T) {
	t.Parallel()
	f := setup(t)
	nested := strings.Repeat("[", 127) + strings.Repeat("]", 127)
	for _, payload := range []string{
		`{"a":` + nested + `}`,
		// The float64 extremes: beyond them is refused (1e1000 and
		// -1.5e-1000 were the edge while numbers were bounded by numeric's
		// range; stored in full they read back as 1,000 digits).
		`{"emoji":"\ud83d\ude00","n":1.7976931348623157e308,"m":-5e-324}`,
		`{"s":"` + strings.Repeat("x", 1<<20-10) + `"}`,
	} {
		res := f.post(t, "/api/v1/jobs", `{"kind":"noop","payload":`+payload+`}`)
		if res.status != http.StatusCreated {
			t.Errorf("payload %.60s…: status %d %.300s", payload, res.status, res.body)
		}
	}
}

// endless is a request body of n bytes made on the fly: a batch whose
// jobs never end, so that only a limit on reading can stop it.
type endless struct {
	n, read int64
	buf     []byte
	pos     int
}

func (e *endless) Read(p []byte) (int, error) {
	if e.read >= e.n {
		return 0, io.EOF
	}
	if e.buf == nil {
		e.buf = []byte(`{"jobs":[`)
	}
	// Fill all of p: one chunk per Read, so a loaded machine spends its
	// time on the server's reading, not on 4 KB chunks' syscalls.
	var k int
	for k < len(p) && e.read+int64(k) < e.n {
		if e.pos == len(e.buf) {
			e.buf, e.pos = []byte(`{"kind":"noop","payload":{"pad":"`+strings.Repeat("x", 4000)+`"}},`), 0
		}
		c := copy(p[k:], e.buf[e.pos:])
		c = int(min(int64(c), e.n-e.read-int64(k)))
		e.pos += c
		k += c
	}
	atomic.AddInt64(&e.read, int64(k))
	return k, nil
}

// postWhileReading posts body (chunked) on a connection of its own and
// reads the answer while the body is still being written, as a browser
// or curl does. Go's client reads only once its write ends, and a server
// that answers 413 at its limit and closes can reset that write first: on
// a loaded CI the client then saw "connection reset by peer", not the
// answer. It returns once the writing ended too.
func (f *fixture) postWhileReading(t *testing.T, path string, body io.Reader) *response {
	t.Helper()
	conn, err := net.Dial("tcp", f.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
			path, f.srv.Listener.Addr(), f.admin); err != nil {
			return
		}
		cw := httputil.NewChunkedWriter(conn)
		if _, err := io.Copy(cw, body); err != nil {
			return // the server closed: what the test wants to see
		}
		_ = cw.Close()
		_, _ = io.WriteString(conn, "\r\n")
	}()
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		conn.Close()
		<-wrote
		t.Fatalf("POST %s: reading the answer: %v", path, err)
	}
	r := readResponse(t, res)
	conn.Close()
	<-wrote
	return r
}

func TestBatchBodyTooLarge(t *testing.T) {
	t.Parallel()
	// The body's read deadline is not what this test is about: on a CI
	// machine busy with every other package, 64 MiB took 23 s to arrive.
	f := setup(t, setupOpts{readTimeout: 3 * time.Minute})
	const size = 100 << 20
	body := &endless{n: size}
	res := f.postWhileReading(t, "/api/v1/jobs/batch", body).want(t, http.StatusRequestEntityTooLarge)
	if e := res.json(t); e["error"] == "" {
		t.Errorf("body = %s", res.body)
	}
	// The server stops reading at its 64 MiB limit; what is sent beyond
	// that is what the sockets' buffers take before the server closes.
	if read := atomic.LoadInt64(&body.read); read > 80<<20 {
		t.Errorf("%d bytes were sent: the server read far past its 64 MiB limit", read)
	}
	if n := f.totalJobs(t); n != 0 {
		t.Errorf("%d jobs inserted", n)
	}
}

func TestPanicIsJSON500(t *testing.T) {
	t.Parallel()
	f := setup(t)
	// New returns the echo instance, so a test can add a route that panics.
	e := web.New(web.Config{Pool: f.pool, Queue: f.queue, Tokens: f.tokens, Logger: testLogger(f.logs)})
	e.GET("/boom", func(echo.Context) error { panic("boom") })
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/boom", nil))
	if rec.Code != http.StatusInternalServerError || rec.Body.String() != "{\"error\":\"internal error\",\"code\":\"internal\"}\n" {
		t.Errorf("panic answered %d %q", rec.Code, rec.Body.String())
	}
	logs := f.logs.String()
	if !strings.Contains(logs, "panic serving request") || !strings.Contains(logs, "status=500") {
		t.Errorf("panic not logged:\n%s", logs)
	}
}
