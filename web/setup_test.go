package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/auth"
	"github.com/leasehold/leasehold/db/dbtest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/live"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/replica"
	"github.com/leasehold/leasehold/web"
)

type fixture struct {
	ctx     context.Context
	pool    *pgxpool.Pool
	queue   *queue.Client
	tokens  *apitoken.Store
	auth    *auth.Service
	metrics *web.Metrics
	hub     *live.Hub
	srv     *httptest.Server
	logs    *testutil.LockedBuffer
	// admin and worker are secrets of tokens named "admin" and "worker".
	admin, worker string
	// With setupOpts.replica: the stand-in replica (a database of its
	// own), its client, the reads that choose it, and its statements.
	replicaPool    *pgxpool.Pool
	replicaQueue   *queue.Client
	reads          *replica.Reads
	replicaQueries *statementCount
}

type setupOpts struct {
	artifactsDir string // default: a fresh temporary directory
	readTimeout  time.Duration
	keepAlive    time.Duration // of event streams
	coalesce     time.Duration // of events (live.Config.Coalesce)
	maxStreams   int           // live.Config.MaxStreams
	// maxClaimsPerToken and maxStreamsPerSession are web.Config's.
	maxClaimsPerToken, maxStreamsPerSession int
	// requestTimeout is web.Config.RequestTimeout (default its default).
	requestTimeout time.Duration
	// server, when set, adjusts the HTTP server before it starts.
	server func(*http.Server)
	// replica gives the server a read replica: a database of its own
	// (not a standby, so never behind), whose content tells which
	// database a page read.
	replica bool
	// sharing, when set, makes this a second server on that fixture's
	// database, with its own token store, listener and presence batch (as
	// another server process would have), and the same tokens.
	sharing *fixture
}

func setup(t *testing.T, opts ...setupOpts) *fixture {
	t.Helper()
	var o setupOpts
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.artifactsDir == "" {
		o.artifactsDir = t.TempDir()
	}
	var pool *pgxpool.Pool
	if o.sharing != nil {
		pool = o.sharing.pool
	} else {
		pool = dbtest.NewPool(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	logs := &testutil.LockedBuffer{}
	logger := testLogger(logs)
	f := &fixture{
		ctx: ctx, pool: pool, queue: queue.NewClient(pool, logger),
		tokens: apitoken.NewStore(pool), auth: auth.New(pool, logger), logs: logs,
	}
	f.tokens.SetLogger(logger)
	f.metrics = web.NewMetrics(f.queue)
	jobs := queue.NewJobNotifier(pool, logger)
	f.hub = live.NewHub(live.Config{Coalesce: o.coalesce, MaxStreams: o.maxStreams})
	jobs.WatchChanges(f.hub.Notify) // as cmd/server does
	jobs.WatchTokens(f.tokens.Listening)
	go f.tokens.Run(ctx)
	go jobs.Run(ctx)
	presence := f.queue.NewPresenceBatch(0)
	go presence.Run(ctx)
	// cmd/server keeps a watch while streams are open (live.Hub.KeepWatched);
	// here the database announces changes from the start, so that a test's
	// first write after opening a stream is never before the watch.
	if err := f.queue.Watch(ctx, "web-test", time.Hour); err != nil {
		t.Fatal(err)
	}
	if o.replica {
		f.setupReplica(t, logger)
	}
	f.srv = httptest.NewUnstartedServer(web.New(web.Config{
		Reads: f.reads,
		Pool:  pool, Queue: f.queue, Tokens: f.tokens, Logger: logger,
		ArtifactsDir: o.artifactsDir, Metrics: f.metrics, Jobs: jobs, Auth: f.auth,
		ReadTimeout: o.readTimeout, Live: f.hub, EventsKeepAlive: o.keepAlive,
		RequestTimeout:    o.requestTimeout,
		MaxClaimsPerToken: o.maxClaimsPerToken, MaxStreamsPerSession: o.maxStreamsPerSession,
		Presence: presence,
	}))
	if o.server != nil {
		o.server(f.srv.Config)
	}
	f.srv.Config.RegisterOnShutdown(f.hub.Close)
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	t.Cleanup(f.hub.Close) // Close waits for open streams, which end only when told
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	if o.sharing != nil {
		f.admin, f.worker = o.sharing.admin, o.sharing.worker
		return f
	}
	var err error
	if f.admin, _, err = f.tokens.Create(ctx, "admin", apitoken.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	if f.worker, _, err = f.tokens.Create(ctx, "worker", apitoken.RoleWorker); err != nil {
		t.Fatal(err)
	}
	return f
}

func testLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// response is an answer read in full.
type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into a fresh map-or-slice value.
func (r *response) json(t *testing.T) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("response %d is not a JSON object: %v\n%s", r.status, err, r.body)
	}
	return v
}

func (r *response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding response %d: %v\n%s", r.status, err, r.body)
	}
}

func (r *response) want(t *testing.T, status int) *response {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body: %.2000s", r.status, status, r.body)
	}
	return r
}

// call is one request. token "" sends the admin token; "-" sends none.
type call struct {
	method, path string
	body         any // string, []byte, io.Reader or nil
	token        string
	header       map[string]string
}

func (f *fixture) do(t *testing.T, c call) *response {
	t.Helper()
	var body io.Reader
	switch b := c.body.(type) {
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	case io.Reader:
		body = b
	}
	req, err := http.NewRequestWithContext(f.ctx, c.method, f.srv.URL+c.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if c.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	switch c.token {
	case "":
		req.Header.Set("Authorization", "Bearer "+f.admin)
	case "-":
	default:
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range c.header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	res, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("reading response of %s %s: %v", c.method, c.path, err)
	}
	checkResponse(t, req, res.StatusCode, res.Header, b) // every answer must match web/openapi.json
	return &response{status: res.StatusCode, header: res.Header, body: b}
}

func (f *fixture) get(t *testing.T, path string) *response {
	t.Helper()
	return f.do(t, call{method: http.MethodGet, path: path})
}

func (f *fixture) post(t *testing.T, path string, body any) *response {
	t.Helper()
	return f.do(t, call{method: http.MethodPost, path: path, body: body})
}

// jobJSON is a job as the API returns it, for typed assertions.
type jobJSON struct {
	ID              int64           `json:"id"`
	Kind            string          `json:"kind"`
	Queue           string          `json:"queue"`
	Priority        int32           `json:"priority"`
	Payload         json.RawMessage `json:"payload"`
	State           string          `json:"state"`
	Attempt         int32           `json:"attempt"`
	MaxAttempts     int32           `json:"max_attempts"`
	LeaseToken      int64           `json:"lease_token"`
	CancelRequested bool            `json:"cancel_requested"`
	IdempotencyKey  *string         `json:"idempotency_key"`
	LastError       *string         `json:"last_error"`
	CreatedAt       string          `json:"created_at"`
	FailureGroup    *int64          `json:"failure_group"`
}

// submit creates a job through the API and returns it.
func (f *fixture) submit(t *testing.T, body string) jobJSON {
	t.Helper()
	var j jobJSON
	f.post(t, "/api/v1/jobs", body).want(t, http.StatusCreated).decode(t, &j)
	return j
}

// stats returns the job counts of GET /api/v1/stats.
func (f *fixture) stats(t *testing.T) map[string]int64 {
	t.Helper()
	var s struct {
		Jobs map[string]int64 `json:"jobs"`
	}
	f.get(t, "/api/v1/stats").want(t, http.StatusOK).decode(t, &s)
	return s.Jobs
}

func (f *fixture) totalJobs(t *testing.T) int64 {
	t.Helper()
	var n int64
	for _, c := range f.stats(t) {
		n += c
	}
	return n
}

// deadJob makes a job that failed for good, through the queue API as a
// worker would.
func (f *fixture) deadJob(t *testing.T, kind string) jobJSON {
	t.Helper()
	j := f.submit(t, `{"kind":"`+kind+`","queue":"dlq","max_attempts":1}`)
	jobs, err := f.queue.Claim(f.ctx, queue.ClaimParams{WorkerID: "w1", Queues: []string{"dlq"}, Limit: 1, Lease: time.Minute})
	if err != nil || len(jobs) != 1 || jobs[0].ID != j.ID {
		t.Fatalf("claiming job %d: %v, %+v", j.ID, err, jobs)
	}
	if _, err := f.queue.Fail(f.ctx, queue.Lease{JobID: j.ID, Token: jobs[0].LeaseToken, WorkerID: "w1"}, "boom", false); err != nil {
		t.Fatal(err)
	}
	return j
}
