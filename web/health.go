package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/db"
)

// readyTimeout bounds a readiness check: a probe that hangs is worse than
// one that says "not ready".
const readyTimeout = 3 * time.Second

// healthLive answers 200 while the process serves HTTP at all.
func (s *server) healthLive(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "live"})
}

// readyBody is GET /health/ready. Migrations is shown only when it is not
// what this build expects, so a ready answer is SPEC's three fields.
type readyBody struct {
	Status          string `json:"status"`
	Database        string `json:"database"`
	Migrations      string `json:"migrations,omitempty"`
	ArtifactStorage string `json:"artifact_storage"`
}

// healthReady answers 200 only when the target database answers and
// accepts writes, its schema is at this build's version, and artifact
// storage is writable; otherwise 503, naming each part that failed.
func (s *server) healthReady(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), readyTimeout)
	defer cancel()
	body := readyBody{Status: "ready", Database: "ok", ArtifactStorage: "ok"}
	if problem := databaseProblem(ctx, db.New(s.pool)); problem != "" {
		body.Database = problem
		body.Migrations = "not checked: database unavailable"
	} else if problem := s.schemaProblem(ctx); problem != "" {
		body.Migrations = problem
	}
	writable := func() error { return checkWritable(s.artifactsDir) }
	if s.artifacts != nil {
		// Where uploads are actually written.
		writable = func() error { return s.artifacts.CheckWritable(ctx) }
	}
	if err := writable(); err != nil {
		body.ArtifactStorage = "not writable: " + err.Error()
	}
	status := http.StatusOK
	if body.Database != "ok" || body.Migrations != "" || body.ArtifactStorage != "ok" {
		body.Status = "not ready"
		status = http.StatusServiceUnavailable
	}
	return c.JSON(status, body)
}

// databaseProblem says why the database cannot take this server's writes,
// or "" when it can: it does not answer, it is a standby ("in recovery"),
// or its transactions are read-only ("read-only": default_transaction_
// read_only, as set for a maintenance window or by a failover tool). A
// query that only reads (SELECT 1) would pass on either.
func databaseProblem(ctx context.Context, q *db.Queries) string {
	w, err := q.WritableCheck(ctx)
	switch {
	case err != nil:
		return "unavailable: " + err.Error()
	case w.InRecovery:
		return "in recovery"
	case w.ReadOnly:
		return "read-only"
	}
	return ""
}

// schemaProblem says how the database's schema differs from
// db.SchemaVersion, or "" when it matches. golang-migrate has no context
// and waits for a running migration's lock, so the check runs aside and
// is given up when ctx ends.
func (s *server) schemaProblem(ctx context.Context) string {
	select {
	case s.versionCheck <- struct{}{}:
	case <-ctx.Done():
		return "not checked: another check is still running"
	}
	type result struct {
		version uint
		dirty   bool
		err     error
	}
	done := make(chan result, 1)
	go func() {
		defer func() { <-s.versionCheck }()
		var r result
		mg, err := db.NewMigrator(s.pool)
		if err != nil {
			done <- result{err: err}
			return
		}
		r.version, r.dirty, r.err = mg.Version()
		r.err = errors.Join(r.err, mg.Close())
		done <- r
	}()
	select {
	case r := <-done:
		switch {
		case r.err != nil:
			return "not checked: " + r.err.Error()
		case r.dirty:
			return fmt.Sprintf("at %d but dirty (a migration failed half way), want %d", r.version, db.SchemaVersion)
		case r.version != db.SchemaVersion:
			return fmt.Sprintf("at %d, want %d", r.version, db.SchemaVersion)
		}
		return ""
	case <-ctx.Done():
		return "not checked: timed out (is a migration running?)"
	}
}

// checkWritable creates and removes a file in dir, which is what storing
// an artifact needs.
func checkWritable(dir string) error {
	if dir == "" {
		return errors.New("no artifacts directory configured")
	}
	f, err := os.CreateTemp(dir, ".ready-*")
	if err != nil {
		return err
	}
	return errors.Join(f.Close(), os.Remove(f.Name()))
}
