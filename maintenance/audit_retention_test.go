package maintenance_test

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/audit"
	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/maintenance"
	"github.com/leasehold/leasehold/role"
)

func TestAuditRetentionFlag(t *testing.T) {
	t.Parallel()
	const day = 24 * time.Hour
	for in, want := range map[string]time.Duration{"365d": 365 * day, "36h": 36 * time.Hour, " 2s ": 2 * time.Second, "off": 0} {
		var r maintenance.AuditRetention
		if err := r.Set(in); err != nil || time.Duration(r) != want {
			t.Errorf("Set(%q) = %v, %v; want %v", in, time.Duration(r), err, want)
		}
	}
	for _, bad := range []string{"", "365", "1y", "-1d", "500ms", "0s", "x=1d"} {
		var r maintenance.AuditRetention
		if err := r.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted: %v", bad, time.Duration(r))
		}
	}
	if s := maintenance.AuditRetention(audit.DefaultRetention).String(); s != "365d" {
		t.Errorf("the default reads %q, want 365d", s)
	}
	if s := maintenance.AuditRetention(0).String(); s != "off" {
		t.Errorf("0 reads %q, want off", s)
	}
}

// A pass deletes the audit rows older than the audit retention, a batch
// a statement, and keeps the newer ones; a dry run counts them and
// deletes nothing; without an audit retention every row stays.
func TestPruneAuditTrail(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	q := db.New(f.pool)
	who := audit.Actor{Name: "user:alice", Role: role.Admin, Addr: "192.0.2.1"}
	for i := range 12 {
		action := "job.retry"
		if i%2 == 1 {
			action = "queue.update"
		}
		if err := audit.WriteAs(f.ctx, q, who, audit.Entry{Action: action, Target: "old"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.pool.Exec(f.ctx, "UPDATE audit_log SET at = now() - interval '400 days'"); err != nil {
		t.Fatal(err)
	}
	// Within the year, one just so (a day short of it).
	for _, ago := range []string{"364 days", "1 hour", "0"} {
		if err := audit.WriteAs(f.ctx, q, who, audit.Entry{Action: "job.cancel", Target: "new"}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.pool.Exec(f.ctx, "UPDATE audit_log SET at = now() - $1::interval WHERE id = (SELECT max(id) FROM audit_log)", ago); err != nil {
			t.Fatal(err)
		}
	}
	count := func(target string) (n int64) {
		t.Helper()
		if err := f.pool.QueryRow(f.ctx, "SELECT count(*) FROM audit_log WHERE target = $1", target).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	res, err := maintenance.NewPruner(f.pool, maintenance.PrunerConfig{}).Prune(f.ctx, maintenance.PruneOptions{})
	if err != nil || res.Audit != 0 || count("old") != 12 {
		t.Fatalf("without an audit retention: %+v, %v, %d old rows left; want all 12 kept", res, err, count("old"))
	}

	p := maintenance.NewPruner(f.pool, maintenance.PrunerConfig{AuditRetention: audit.DefaultRetention, Batch: 5, Pause: time.Millisecond})
	res, err = p.Prune(f.ctx, maintenance.PruneOptions{DryRun: true})
	if err != nil || res.Audit != 12 || count("old") != 12 {
		t.Fatalf("dry run: %+v, %v, %d old rows left; want 12 counted and kept", res, err, count("old"))
	}
	res, err = p.Prune(f.ctx, maintenance.PruneOptions{})
	if err != nil || res.Audit != 12 {
		t.Fatalf("pass: %+v, %v; want 12 audit rows removed in batches of 5", res, err)
	}
	if old, recent := count("old"), count("new"); old != 0 || recent != 3 {
		t.Errorf("after the pass: %d old and %d new rows, want 0 and 3", old, recent)
	}
	res, err = p.Prune(f.ctx, maintenance.PruneOptions{})
	if err != nil || res.Audit != 0 || count("new") != 3 {
		t.Errorf("the next pass: %+v, %v, %d new rows; want nothing removed", res, err, count("new"))
	}
}
