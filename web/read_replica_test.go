package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/net/html"

	"github.com/leasehold/leasehold/db/dbtest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/replica"
)

// statementCount counts the statements run on a pool, apart from the
// replica's own checks.
type statementCount struct{ n atomic.Int64 }

func (s *statementCount) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !strings.Contains(d.SQL, "ReplicaReplayPosition") {
		s.n.Add(1)
	}
	return ctx
}

func (s *statementCount) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// setupReplica gives f a stand-in read replica: a second database, whose
// rows differ from the primary's so that an answer shows which one it
// came from. It is not a standby, so its lag is 0 and it is read from
// the first check on; the checks run once an hour, so that only the test
// changes what the server thinks of it.
func (f *fixture) setupReplica(t *testing.T, logger *slog.Logger) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	f.replicaQueries = &statementCount{}
	cfg.ConnConfig.Tracer = f.replicaQueries
	if f.replicaPool, err = pgxpool.NewWithConfig(f.ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.replicaPool.Close)
	f.replicaQueue = queue.NewClient(f.replicaPool, logger)
	checked := make(chan replica.Status, 1)
	f.reads = replica.New(replica.Config{
		Primary: f.queue, Replica: f.replicaQueue, Interval: time.Hour, Logger: logger,
		OnCheck: func(s replica.Status) {
			select {
			case checked <- s:
			default:
			}
		},
	})
	go func() { _ = f.reads.Run(f.ctx) }()
	if s := <-checked; !s.Reading {
		t.Fatalf("the stand-in replica is not read after its first check: %+v", s)
	}
}

// listedApps is the apps of the jobs GET /api/v1/jobs lists.
func (f *fixture) listedApps(t *testing.T) []string {
	t.Helper()
	var list struct {
		Jobs []struct {
			Payload struct {
				App string `json:"app"`
			} `json:"payload"`
		} `json:"jobs"`
	}
	f.get(t, "/api/v1/jobs").want(t, http.StatusOK).decode(t, &list)
	var apps []string
	for _, j := range list.Jobs {
		apps = append(apps, j.Payload.App)
	}
	return apps
}

func TestReadReplica(t *testing.T) {
	t.Parallel()
	f := setup(t, setupOpts{replica: true})
	onPrimary := f.submit(t, `{"kind":"probe","queue":"default","payload":{"app":"com.primary.only"}}`)
	onReplica, _, err := f.replicaQueue.Insert(f.ctx, queue.NewJob{Kind: "probe", Queue: "default", Payload: json.RawMessage(`{"app":"com.replica.only"}`)})
	if err != nil {
		t.Fatal(err)
	}
	// The two databases number their jobs alike: tell them apart by a
	// job the replica alone has.
	for range 3 {
		if _, _, err := f.replicaQueue.Insert(f.ctx, queue.NewJob{Kind: "probe", Queue: "default", Payload: json.RawMessage(`{"app":"com.replica.more"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	replicaOnlyID := onReplica.ID + 3
	b := f.signIn(t, "alice")

	t.Run("AdminListsReadTheReplica", func(t *testing.T) {
		if apps := f.listedApps(t); strings.Contains(fmt.Sprint(apps), "com.primary.only") || !strings.Contains(fmt.Sprint(apps), "com.replica.only") {
			t.Errorf("GET /api/v1/jobs listed %v, want the replica's jobs", apps)
		}
		if n := f.stats(t)["pending"]; n != 4 {
			t.Errorf("GET /api/v1/stats: %d pending, want the replica's 4", n)
		}
		// One job is read back after a write by scripts: the primary's.
		f.get(t, fmt.Sprintf("/api/v1/jobs/%d", onPrimary.ID)).want(t, http.StatusOK)
		f.get(t, fmt.Sprintf("/api/v1/jobs/%d", replicaOnlyID)).want(t, http.StatusNotFound)
	})

	t.Run("PagesReadTheReplica", func(t *testing.T) {
		body := string(b.get(t, "/jobs").want(t, http.StatusOK).body)
		if strings.Contains(body, "com.primary.only") || !strings.Contains(body, "com.replica.only") {
			t.Errorf("/jobs does not show the replica's jobs alone:\n%.3000s", body)
		}
		doc := parseHTML(t, b.get(t, "/").want(t, http.StatusOK))
		if got := textOf(doc.One(t, "read-from")); !strings.Contains(got, "Reading from replica, lag 0s") {
			t.Errorf("overview says %q, want the replica and its lag", got)
		}
		// A job the replica has not replayed yet is the primary's to show.
		b.get(t, fmt.Sprintf("/jobs/%d", replicaOnlyID)).want(t, http.StatusOK)
	})

	t.Run("WorkerCallsReadThePrimaryAlone", func(t *testing.T) {
		before := f.replicaQueries.n.Load()
		jobs := f.claimAs(t, f.worker, `{"queues":["default"],"limit":1,"lease_ms":60000}`)
		if len(jobs) != 1 || jobs[0].ID != onPrimary.ID {
			t.Fatalf("claimed %+v, want the primary's job %d", jobs, onPrimary.ID)
		}
		lease := fmt.Sprintf(`"lease_token":%d`, jobs[0].LeaseToken)
		f.workerPost(t, fmt.Sprintf("/api/v1/worker/jobs/%d/heartbeat", onPrimary.ID), "{"+lease+"}").want(t, http.StatusOK)
		f.workerPost(t, fmt.Sprintf("/api/v1/worker/jobs/%d/progress", onPrimary.ID), "{"+lease+`,"progress":0.5,"message":"half"}`).want(t, http.StatusNoContent)
		f.workerPost(t, fmt.Sprintf("/api/v1/worker/jobs/%d/complete", onPrimary.ID), "{"+lease+`,"result":{}}`).want(t, http.StatusOK)
		f.workerPost(t, "/api/v1/worker/presence", `{"queues":["default"]}`)
		if n := f.replicaQueries.n.Load() - before; n != 0 {
			t.Errorf("worker calls ran %d statements on the replica, want none", n)
		}
	})

	t.Run("WritesPinTheBrowserToThePrimary", func(t *testing.T) {
		writer := f.signIn(t, "bob")
		id := submittedJob(t, writer.post(t, "/jobs/new", writer.newJobForm(t)))
		body := string(writer.get(t, fmt.Sprintf("/jobs/%d", id)).want(t, http.StatusOK).body)
		if !strings.Contains(body, "com.example.notes") {
			t.Errorf("the job page after the submit does not show the new job:\n%.2000s", body)
		}
		body = string(writer.get(t, "/jobs").want(t, http.StatusOK).body)
		if !strings.Contains(body, "com.primary.only") || strings.Contains(body, "com.replica.only") {
			t.Errorf("/jobs right after a submit is not the primary's:\n%.3000s", body)
		}
		doc := parseHTML(t, writer.get(t, "/"))
		if got := textOf(doc.One(t, "read-from")); !strings.Contains(got, "primary: this browser just made a change") {
			t.Errorf("overview after a write says %q", got)
		}
		// Another browser, which wrote nothing, still reads the replica.
		body = string(b.get(t, "/jobs").want(t, http.StatusOK).body)
		if !strings.Contains(body, "com.replica.only") {
			t.Errorf("a browser that wrote nothing does not read the replica:\n%.3000s", body)
		}
		// A retry pins as well.
		dead := f.deadJob(t, "probe-dead")
		r := writer.post(t, fmt.Sprintf("/jobs/%d/retry", dead.ID), url.Values{})
		if r.status != http.StatusSeeOther || !strings.Contains(r.header.Get("Set-Cookie"), "lh_primary=") {
			t.Errorf("retry answered %d, Set-Cookie %q: want a redirect that pins the primary", r.status, r.header.Get("Set-Cookie"))
		}
	})

	t.Run("ReplicaAwayFallsBackWithoutAnError", func(t *testing.T) {
		// The replica goes away under the server, which still thinks it
		// healthy: no new connection is allowed and its connections are
		// ended. ALLOW_CONNECTIONS, not CONNECTION LIMIT 0, which does not
		// bind a superuser (the tests' user): with it, a pool that had
		// already noticed its connections' end connected again and read
		// the replica (seen once in CI). pg_terminate_backend only signals:
		// the test waits until the backends are gone.
		name := f.replicaPool.Config().ConnConfig.Database
		admin, err := pgx.Connect(f.ctx, dbtest.AdminURL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = admin.Exec(context.Background(), "ALTER DATABASE "+name+" ALLOW_CONNECTIONS true")
			admin.Close(context.Background())
		})
		for _, s := range []string{
			"ALTER DATABASE " + name + " ALLOW_CONNECTIONS false",
			"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '" + name + "'",
		} {
			if _, err := admin.Exec(f.ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		testutil.Eventually(t, 10*time.Second, "the replica's backends gone", func() bool {
			var n int
			err := admin.QueryRow(f.ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", name).Scan(&n)
			return err == nil && n == 0
		})
		body := string(b.get(t, "/jobs").want(t, http.StatusOK).body)
		if !strings.Contains(body, "com.primary.only") {
			t.Errorf("/jobs with the replica away is not the primary's:\n%.3000s", body)
		}
		if s := f.reads.Status(); s.Reading || !strings.Contains(s.Why, "replica unreachable") {
			t.Errorf("after a failed read the status is %+v, want the primary read", s)
		}
		doc := parseHTML(t, b.get(t, "/").want(t, http.StatusOK))
		if got := textOf(doc.One(t, "read-from")); !strings.Contains(got, "primary: replica unreachable") {
			t.Errorf("overview says %q", got)
		}
		f.get(t, "/api/v1/stats").want(t, http.StatusOK)
		f.get(t, "/health/ready").want(t, http.StatusOK)
	})
}

// textOf is the text below n, spaces collapsed.
func textOf(n *html.Node) string {
	var b strings.Builder
	for c := range n.Descendants() {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}
