package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/templates/htmltest"
)

// TestJobPageBoundsDeepResults: a row written before results were checked
// may hold a result (and effect results, event details) nested 9,000
// deep; the job page still answers at once with a small page. Indenting
// it in full made 162 MB of HTML in 2.7 s.
func TestJobPageBoundsDeepResults(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	j := f.submit(t, `{"kind":"x"}`)
	deep := `{"r":` + strings.Repeat(`{"a":`, 9000) + `1` + strings.Repeat(`}`, 9000) + `}`
	// Straight into the database: queue.CheckResult refuses such results now.
	for _, sql := range []string{
		`UPDATE jobs SET state = 'succeeded', finished_at = now(), result = $2::jsonb WHERE id = $1`,
		`INSERT INTO effects (job_id, key, attempt, lease_token, state, result) VALUES ($1, 'deep', 1, 1, 'done', $2::jsonb)`,
		`INSERT INTO events (job_id, type, detail) VALUES ($1, 'progress', $2::jsonb)`,
	} {
		if _, err := f.pool.Exec(f.ctx, sql, j.ID, deep); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	start := time.Now()
	res := b.get(t, jobPagePath(j.ID)).want(t, http.StatusOK)
	took := time.Since(start)
	t.Logf("job page: %d bytes in %v", len(res.body), took)
	if len(res.body) > 1<<20 || took > 2*time.Second {
		t.Fatalf("job page: %d bytes in %v", len(res.body), took)
	}
	d := parseHTML(t, res)
	if note := htmltest.Text(d.One(t, "job-result-truncated")); !strings.Contains(note, "Truncated") {
		t.Errorf("result note %q", note)
	}
}
