package dbtest

import (
	"context"
	"errors"
	"testing"

	"github.com/leasehold/leasehold/db/pgcluster"
)

// StartCluster starts a private cluster of the test's own (one it may
// stop, restart or freeze, which the shared server must never be), and
// stops it when the test ends. Without PostgreSQL's binaries the test is
// skipped, with pgcluster's message saying how to install them.
func StartCluster(t testing.TB, ctx context.Context, cfg pgcluster.Config) *pgcluster.Cluster {
	t.Helper()
	c, err := pgcluster.Start(ctx, cfg)
	if errors.Is(err, pgcluster.ErrNoPostgres) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}
