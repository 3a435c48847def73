package web_test

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/audit"
	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/role"
)

// auditEntryJSON is an audit row as GET /api/v1/audit answers it.
type auditEntryJSON struct {
	ID     int64          `json:"id"`
	At     string         `json:"at"`
	Actor  string         `json:"actor"`
	Role   string         `json:"role"`
	Addr   string         `json:"addr"`
	Action string         `json:"action"`
	Target string         `json:"target"`
	Detail map[string]any `json:"detail"`
}

type auditListJSON struct {
	Entries []auditEntryJSON `json:"entries"`
	Next    *int64           `json:"next"`
}

// writeAudit writes one audit row as a, the way a change does, and
// returns its id.
func (f *fixture) writeAudit(t *testing.T, a audit.Actor, e audit.Entry) int64 {
	t.Helper()
	if err := audit.WriteAs(f.ctx, db.New(f.pool), a, e); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := f.pool.QueryRow(f.ctx, "SELECT max(id) FROM audit_log").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// listAudit asks GET /api/v1/audit with q as the admin token.
func (f *fixture) listAudit(t *testing.T, q url.Values) auditListJSON {
	t.Helper()
	var l auditListJSON
	f.get(t, "/api/v1/audit?"+q.Encode()).want(t, http.StatusOK).decode(t, &l)
	return l
}

func auditIDs(es []auditEntryJSON) []int64 {
	ids := make([]int64, len(es))
	for i, e := range es {
		ids[i] = e.ID
	}
	return ids
}

// GET /api/v1/audit reads the trail newest first, each filter narrowing
// it (an action also by the part before its dot, never by a longer
// word), one keyset page at a time until next is null.
func TestAuditAPIFiltersAndPages(t *testing.T) {
	t.Parallel()
	f := setup(t)
	alice := audit.Actor{Name: "user:alice", Role: role.Operator, Addr: "192.0.2.7"}
	ci := audit.Actor{Name: "token:ci", Role: role.Admin, Addr: "198.51.100.1"}
	var retries []int64
	for i := range 5 {
		retries = append(retries, f.writeAudit(t, alice, audit.Entry{Action: "job.retry", Target: "job:" + strconv.Itoa(i),
			Detail: map[string]any{"attempt": i}}))
	}
	bulk := f.writeAudit(t, alice, audit.Entry{Action: "jobs.cancel", Detail: map[string]any{"count": 3}})
	jobber := f.writeAudit(t, ci, audit.Entry{Action: "jobber.run", Target: "job:1"})
	queueRow := f.writeAudit(t, ci, audit.Entry{Action: "queue.update", Target: "queue:default"})

	newestRetries := slices.Clone(retries)
	slices.Reverse(newestRetries)
	mine := f.listAudit(t, url.Values{"actor": {"user:alice"}})
	want := []int64{bulk, retries[4], retries[3], retries[2], retries[1], retries[0]}
	if got := auditIDs(mine.Entries); !slices.Equal(got, want) || mine.Next != nil {
		t.Fatalf("actor user:alice: %v next %v, want %v newest first and no next page", got, mine.Next, want)
	}
	first := mine.Entries[5]
	if first.Actor != "user:alice" || first.Role != "operator" || first.Addr != "192.0.2.7" || first.Action != "job.retry" ||
		first.Target != "job:0" || first.Detail["attempt"] != float64(0) {
		t.Errorf("the first retry reads %+v", first)
	}
	if at, err := time.Parse(time.RFC3339Nano, first.At); err != nil || time.Since(at) > time.Minute {
		t.Errorf("at %q: %v, want an RFC 3339 time of now", first.At, err)
	}

	for _, tc := range []struct {
		name string
		q    url.Values
		want []int64
	}{
		{"action prefix", url.Values{"action": {"job"}}, newestRetries},
		{"action exact", url.Values{"action": {"job.retry"}}, newestRetries},
		{"plural prefix", url.Values{"action": {"jobs"}}, []int64{bulk}},
		{"longer word", url.Values{"action": {"jobber.run"}}, []int64{jobber}},
		{"not a prefix of a word", url.Values{"action": {"jo"}}, nil},
		{"target", url.Values{"target": {"job:1"}}, []int64{jobber, retries[1]}},
		{"target and actor", url.Values{"target": {"job:1"}, "actor": {"user:alice"}}, []int64{retries[1]}},
		{"token actor", url.Values{"actor": {"token:ci"}}, []int64{queueRow, jobber}},
		{"nobody", url.Values{"actor": {"user:nobody"}}, nil},
	} {
		l := f.listAudit(t, tc.q)
		if got := auditIDs(l.Entries); !slices.Equal(got, tc.want) && (len(got) != 0 || len(tc.want) != 0) {
			t.Errorf("%s (%s): %v, want %v", tc.name, tc.q.Encode(), got, tc.want)
		}
	}

	// Pages of two: every row once, in order, and next null on the last.
	var paged []int64
	q := url.Values{"actor": {"user:alice"}, "limit": {"2"}}
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatalf("paging never ends: %v", paged)
		}
		l := f.listAudit(t, q)
		if len(l.Entries) > 2 {
			t.Fatalf("limit 2 answered %d entries", len(l.Entries))
		}
		paged = append(paged, auditIDs(l.Entries)...)
		if l.Next == nil {
			break
		}
		q.Set("before", strconv.FormatInt(*l.Next, 10))
	}
	if !slices.Equal(paged, want) {
		t.Errorf("paged %v, want %v", paged, want)
	}

	// since and until, by the rows' own times.
	if _, err := f.pool.Exec(f.ctx, "UPDATE audit_log SET at = now() - interval '10 days' WHERE id = ANY($1)",
		[]int64{retries[0], retries[1]}); err != nil {
		t.Fatal(err)
	}
	cut := time.Now().Add(-5 * 24 * time.Hour).UTC().Format(time.RFC3339)
	old := f.listAudit(t, url.Values{"action": {"job"}, "until": {cut}})
	recent := f.listAudit(t, url.Values{"action": {"job"}, "since": {cut}})
	if got := auditIDs(old.Entries); !slices.Equal(got, []int64{retries[1], retries[0]}) {
		t.Errorf("until %s: %v, want the two rows set back", cut, got)
	}
	if got := auditIDs(recent.Entries); !slices.Equal(got, []int64{retries[4], retries[3], retries[2]}) {
		t.Errorf("since %s: %v, want the three recent rows", cut, got)
	}
}

// A change made through the API can be read back at once: the trail is
// read from the primary.
func TestAuditAPIReadsItsOwnChange(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.patchQueue(t, "audited", `{"paused":true}`)
	l := f.listAudit(t, url.Values{"actor": {"token:admin"}, "action": {"queue"}})
	if len(l.Entries) != 1 || l.Entries[0].Target != "queue:audited" || l.Entries[0].Role != "admin" {
		t.Fatalf("after pausing a queue the trail reads %+v", l.Entries)
	}
}

// Every malformed parameter is a 400 naming it, with the API's error
// body, never a 500 or a query; roles other than admin get 403.
func TestAuditAPIRefusesBadInput(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, tc := range []struct {
		query, field string
	}{
		{"limit=0", "limit"},
		{"limit=501", "limit"},
		{"limit=ten", "limit"},
		{"limit=-1", "limit"},
		{"limit=99999999999999999999", "limit"},
		{"before=abc", "before"},
		{"before=0", "before"},
		{"before=-5", "before"},
		{"before=1.5", "before"},
		{"before=99999999999999999999", "before"},
		{"since=yesterday", "since"},
		{"since=2026-12-06", "since"},
		{"until=2026-13-01T00:00:00Z", "until"},
		{"until=" + url.QueryEscape("2026-12-06T00:00:00"), "until"},
		{"since=2026-12-06T00:00:00Z&until=2026-12-05T00:00:00Z", "until"},
		{"since=" + strings.Repeat("9", 5000), "since"},
		{"actor=" + strings.Repeat("a", 256), "actor"},
		{"actor=a%00b", "actor"},
		{"action=job%0Aretry", "action"},
		{"target=%ff%fe", "target"},
		{"target=" + url.QueryEscape("job:\x7f"), "target"},
	} {
		r := f.get(t, "/api/v1/audit?"+tc.query)
		if r.status != http.StatusBadRequest {
			t.Errorf("?%.80s: %d %.200s, want 400", tc.query, r.status, r.body)
			continue
		}
		body := r.json(t)
		if body["field"] != tc.field || body["code"] != "invalid" || body["error"] == "" {
			t.Errorf("?%.80s: %v, want field %q and code invalid", tc.query, body, tc.field)
		}
	}
	// The largest page and the longest filter are fine.
	f.get(t, "/api/v1/audit?limit=500&actor="+strings.Repeat("a", 255)).want(t, http.StatusOK)

	for _, r := range []role.Role{role.Viewer, role.Operator, role.Worker} {
		secret, _, err := f.tokens.Create(f.ctx, "audit-"+string(r), apitoken.Role(r))
		if err != nil {
			t.Fatal(err)
		}
		res := f.do(t, call{method: http.MethodGet, path: "/api/v1/audit", token: secret}).want(t, http.StatusForbidden)
		if got := res.json(t)["code"]; got != "forbidden" {
			t.Errorf("a %s token: code %v, want forbidden", r, got)
		}
	}
	f.do(t, call{method: http.MethodGet, path: "/api/v1/audit", token: "-"}).want(t, http.StatusUnauthorized)
}
