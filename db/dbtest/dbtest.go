// Package dbtest gives tests a real, migrated PostgreSQL database of their
// own. It uses TEST_DATABASE_URL when set (CI points it at the machine's
// PostgreSQL) and otherwise a private cluster under .leasehold/testpg,
// which it leaves running for the next run.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/db/pgcluster"
	"github.com/leasehold/leasehold/migrations"
)

var (
	setupOnce sync.Once
	adminURL  string
	template  string
	setupErr  error
)

// NewDatabase creates a fresh, migrated database for t, dropped when t
// ends, and returns its connection string.
func NewDatabase(t testing.TB) string {
	t.Helper()
	setupOnce.Do(func() { setupErr = setup() })
	if setupErr != nil {
		t.Fatalf("preparing test database: %v", setupErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := "lh_test_" + randomHex(6)
	if err := adminExec(ctx, adminURL, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, template)); err != nil {
		t.Fatalf("creating test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := adminExec(ctx, adminURL, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)); err != nil {
			t.Logf("dropping test database %s: %v", name, err)
		}
	})
	return withDatabase(adminURL, name)
}

// NewPool returns a pool on a fresh database for t, closed when t ends.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	url := NewDatabase(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatalf("opening pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func setup() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adminURL = os.Getenv("TEST_DATABASE_URL")
	if adminURL == "" {
		root, err := repoRoot()
		if err != nil {
			return err
		}
		cluster, err := pgcluster.Start(ctx, pgcluster.Config{Dir: filepath.Join(root, ".leasehold", "testpg")})
		if err != nil {
			return err
		}
		adminURL = cluster.URL("leasehold")
	}
	sum, err := migrationsHash()
	if err != nil {
		return err
	}
	template = "lh_tmpl_" + sum
	// Test binaries of several packages run at once: one builds the
	// template while the others wait on the advisory lock.
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", adminURL, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(7428001)"); err != nil {
		return fmt.Errorf("locking template: %w", err)
	}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", template).Scan(&exists); err != nil {
		return fmt.Errorf("looking for template: %w", err)
	}
	if exists {
		return nil
	}
	building := template + "_building"
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("dropping stale template: %w", err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+building); err != nil {
		return fmt.Errorf("creating template: %w", err)
	}
	pool, err := pgxpool.New(ctx, withDatabase(adminURL, building))
	if err != nil {
		return fmt.Errorf("opening template: %w", err)
	}
	err = db.Migrate(pool)
	pool.Close()
	if err != nil {
		return err
	}
	// Renamed only once complete, so an interrupted build is never used.
	if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s", building, template)); err != nil {
		return fmt.Errorf("publishing template: %w", err)
	}
	return nil
}

// AdminURL returns the connection string of the database that tests
// create their databases from.
func AdminURL(t testing.TB) string {
	t.Helper()
	setupOnce.Do(func() { setupErr = setup() })
	if setupErr != nil {
		t.Fatalf("preparing test database: %v", setupErr)
	}
	return adminURL
}

func adminExec(ctx context.Context, url, sql string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase returns url pointed at another database; pgx accepts a
// later dbname keyword over an earlier one, in both URL and key=value form.
func withDatabase(url, name string) string {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		panic(fmt.Sprintf("parsing %q: %v", url, err))
	}
	cfg.Database = name
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable%s",
		cfg.Host, cfg.Port, cfg.User, name, passwordPart(cfg.Password))
}

func passwordPart(pw string) string {
	if pw == "" {
		return ""
	}
	return " password=" + pw
}

func migrationsHash() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%s\x00", path, b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hashing migrations: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
