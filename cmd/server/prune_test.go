package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/db/dbtest"
	"github.com/leasehold/leasehold/queue"
)

// server prune reads DATABASE_URL and LEASEHOLD_RETENTION like the
// server; --dry-run deletes nothing, and the pass that follows does.
func TestPruneCommand(t *testing.T) {
	url := dbtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c := queue.NewClient(pool, nil)
	for range 3 {
		j, _, err := c.Insert(ctx, queue.NewJob{Kind: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CancelOne(ctx, j.ID, "test"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, "UPDATE jobs SET created_at = now() - interval '1 hour', finished_at = now() - interval '1 hour'"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DATABASE_URL", url)
	t.Setenv("LEASEHOLD_RETENTION", "cancelled=30m")
	t.Setenv("LEASEHOLD_ARTIFACTS", t.TempDir())
	count := func() (n int) {
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM jobs").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	out := captureStdout(t, func() { err = run([]string{"prune", "--dry-run"}) })
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "would remove 3 cancelled jobs") || !strings.Contains(out, "cancelled=30m") || count() != 3 {
		t.Fatalf("dry run printed:\n%s\nand left %d jobs, want 3", out, count())
	}
	out = captureStdout(t, func() { err = run([]string{"prune"}) })
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "removed 3 cancelled jobs") || !strings.Contains(out, "removed 0 artifact files, 0 bytes") || count() != 0 {
		t.Fatalf("prune printed:\n%s\nand left %d jobs, want 0", out, count())
	}

	if err := run([]string{"prune", "--file-grace", "-1s"}); err == nil || !strings.Contains(err.Error(), "--file-grace") {
		t.Fatalf("negative --file-grace: %v, want an error naming the flag", err)
	}
	if err := run([]string{"prune", "--file-grace", "0s"}); err != nil {
		t.Fatalf("--file-grace 0s: %v", err)
	}

	t.Setenv("LEASEHOLD_RETENTION", "cancelled=7weeks")
	if err := run([]string{"prune"}); err == nil || !strings.Contains(err.Error(), "7weeks") {
		t.Fatalf("bad retention: %v, want an error naming the value", err)
	}
}
