package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/audit"
	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/db/dbtest"
)

// server prune reads LEASEHOLD_AUDIT_RETENTION like the server: --dry-run
// counts the audit rows a pass would delete and deletes none, the pass
// deletes them, off keeps every row, a bad value names itself.
func TestPruneCommandAuditRows(t *testing.T) {
	url := dbtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := db.Migrate(pool); err != nil {
		t.Fatal(err)
	}
	who := audit.Actor{Name: "user:alice", Role: "admin"}
	for _, target := range []string{"old", "old", "new"} {
		if err := audit.WriteAs(ctx, db.New(pool), who, audit.Entry{Action: "queue.update", Target: target}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, "UPDATE audit_log SET at = now() - interval '40 days' WHERE target = 'old'"); err != nil {
		t.Fatal(err)
	}
	count := func() (n int) {
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM audit_log WHERE target IN ('old', 'new')").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	t.Setenv("DATABASE_URL", url)
	t.Setenv("LEASEHOLD_ARTIFACTS", t.TempDir())

	t.Setenv("LEASEHOLD_AUDIT_RETENTION", "off")
	out := captureStdout(t, func() { err = run([]string{"prune"}) })
	if err != nil || !strings.Contains(out, "audit retention off") || !strings.Contains(out, "removed 0 audit rows") || count() != 3 {
		t.Fatalf("off: %v, printed:\n%s\nand left %d rows, want 3", err, out, count())
	}

	t.Setenv("LEASEHOLD_AUDIT_RETENTION", "30d")
	out = captureStdout(t, func() { err = run([]string{"prune", "--dry-run"}) })
	if err != nil || !strings.Contains(out, "audit retention 30d") || !strings.Contains(out, "would remove 2 audit rows") || count() != 3 {
		t.Fatalf("dry run: %v, printed:\n%s\nand left %d rows, want 3", err, out, count())
	}
	out = captureStdout(t, func() { err = run([]string{"prune"}) })
	if err != nil || !strings.Contains(out, "removed 2 audit rows") || count() != 1 {
		t.Fatalf("prune: %v, printed:\n%s\nand left %d rows, want the new one", err, out, count())
	}

	t.Setenv("LEASEHOLD_AUDIT_RETENTION", "1year")
	if err := run([]string{"prune"}); err == nil || !strings.Contains(err.Error(), "LEASEHOLD_AUDIT_RETENTION") {
		t.Fatalf("bad audit retention: %v, want an error naming the variable", err)
	}
}
