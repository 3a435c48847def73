// Command schemadump writes the schema the embedded migrations build, as
// one readable file (db/schema.sql): it migrates a fresh database to the
// newest version, dumps its schema with pg_dump, takes out what varies from
// run to run, and drops the database. `make generate` writes the file and
// `make check` fails when the committed one differs.
//
// It uses the PostgreSQL of TEST_DATABASE_URL when set (as CI does) and
// otherwise the tests' private cluster under .leasehold/testpg, which it
// leaves running for the tests, as db/dbtest does.
//
//	go run ./db/schemadump -o db/schema.sql
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/db/pgcluster"
)

func main() {
	out := flag.String("o", "db/schema.sql", "the file to write; - for standard output")
	compare := flag.String("compare", "", "compare the schema with this file instead of writing it (make check)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if *compare != "" {
		err = check(ctx, *compare)
	} else {
		err = run(ctx, *out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "schemadump:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out string) error {
	schema, _, err := dump(ctx)
	if err != nil {
		return err
	}
	if out == "-" {
		_, err := os.Stdout.Write(schema)
		return err
	}
	return os.WriteFile(out, schema, 0o644)
}

// majorLine finds the PostgreSQL major a schema file was dumped with.
var majorLine = regexp.MustCompile(`as pg_dump of PostgreSQL (\d+)`)

// check compares the migrated schema with the committed file. Another
// PostgreSQL major prints the same schema differently, so a file dumped by
// another major is not compared (a newcomer's machine may have any; CI has
// the major the file records) and check says so.
func check(ctx context.Context, file string) error {
	committed, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	schema, major, err := dump(ctx)
	if err != nil {
		return err
	}
	if m := majorLine.FindSubmatch(committed); m != nil && string(m[1]) != strconv.Itoa(major) {
		fmt.Printf("schemadump: %s was dumped by PostgreSQL %s and this server is %d: not compared\n", file, m[1], major)
		return nil
	}
	if bytes.Equal(committed, schema) {
		return nil
	}
	tmp, err := os.CreateTemp("", "schema-*.sql")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(schema); err != nil {
		return err
	}
	tmp.Close()
	diff := exec.CommandContext(ctx, "diff", "-u", "--label", file, "--label", "the migrated schema", file, tmp.Name())
	diff.Stdout, diff.Stderr = os.Stdout, os.Stderr
	_ = diff.Run() // exits 1 on a difference, which is known already
	return fmt.Errorf("%s does not match the migrations (run make generate and commit it)", file)
}

// dump migrates a fresh database and returns its schema, normalized, and
// the server's major version.
func dump(ctx context.Context) ([]byte, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	adminURL, err := serverURL(ctx)
	if err != nil {
		return nil, 0, err
	}
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, 0, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	defer conn.Close(context.Background())

	var versionNum int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&versionNum); err != nil {
		return nil, 0, fmt.Errorf("reading the server's version: %w", err)
	}
	major := versionNum / 10000
	pgDump, err := findPgDump(ctx, major)
	if err != nil {
		return nil, 0, err
	}

	name := "lh_schema_" + randomHex(6)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, 0, fmt.Errorf("creating database %s: %w", name, err)
	}
	defer func() {
		// Dropped even when the dump failed or was interrupted.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "schemadump: dropping database %s: %v\n", name, err)
		}
	}()
	dbURL := withDatabase(adminURL, name)

	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return nil, 0, fmt.Errorf("opening database %s: %w", name, err)
	}
	err = db.Migrate(pool)
	pool.Close()
	if err != nil {
		return nil, 0, err
	}

	var dump, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, pgDump, "--schema-only", "--no-owner", "--no-privileges",
		"--exclude-table=public.schema_migrations", "--dbname="+dbURL)
	cmd.Stdout, cmd.Stderr = &dump, &stderr
	if err := cmd.Run(); err != nil {
		return nil, 0, fmt.Errorf("running %s: %w: %s", pgDump, err, strings.TrimSpace(stderr.String()))
	}

	var b bytes.Buffer
	fmt.Fprintf(&b, "-- The schema that migrations/ build (version %d), as pg_dump of PostgreSQL %d\n", db.SchemaVersion, major)
	b.WriteString("-- prints it, without golang-migrate's schema_migrations. Generated by\n")
	b.WriteString("-- `make generate` (db/schemadump); never edit it: write a migration.\n")
	b.WriteString("-- What each function and trigger is for: docs/schema.md.\n\n")
	if err := normalize(&b, &dump); err != nil {
		return nil, 0, err
	}

	return b.Bytes(), major, nil
}

// serverURL is TEST_DATABASE_URL, or the private test cluster's admin
// database.
func serverURL(ctx context.Context) (string, error) {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cluster, err := pgcluster.Start(ctx, pgcluster.Config{Dir: filepath.Join(root, ".leasehold", "testpg"), Logger: logger})
	if err != nil {
		return "", fmt.Errorf("starting the private cluster (or set TEST_DATABASE_URL): %w", err)
	}
	return cluster.URL("leasehold"), nil
}

var pgDumpVersion = regexp.MustCompile(`\(PostgreSQL\) (\d+)`)

// findPgDump returns a pg_dump of the server's major version: an older one
// cannot dump a newer server, and a newer one prints the same schema
// differently, so that the file would change with the machine.
func findPgDump(ctx context.Context, major int) (string, error) {
	candidates := []string{filepath.Join("/usr/lib/postgresql", strconv.Itoa(major), "bin", "pg_dump")}
	if p, err := exec.LookPath("pg_dump"); err == nil {
		candidates = append(candidates, p)
	}
	var found []string
	for _, path := range candidates {
		v, err := exec.CommandContext(ctx, path, "--version").Output()
		if err != nil {
			continue
		}
		m := pgDumpVersion.FindSubmatch(v)
		if m != nil && string(m[1]) == strconv.Itoa(major) {
			return path, nil
		}
		found = append(found, fmt.Sprintf("%s is %s", path, strings.TrimSpace(string(v))))
	}
	if len(found) == 0 {
		return "", fmt.Errorf("no pg_dump found (on PATH or in /usr/lib/postgresql/%d/bin): install the PostgreSQL %d client", major, major)
	}
	return "", fmt.Errorf("the server is PostgreSQL %d but %s: install pg_dump %d (e.g. postgresql-client-%d)",
		major, strings.Join(found, "; "), major, major)
}

// normalize copies pg_dump's output without what varies by run, version or
// session: the version lines, the SET and set_config lines, psql's
// \restrict lines (a random key each run), the dump's opening and closing
// banners, and the runs of blank lines these leave.
func normalize(w *bytes.Buffer, dump io.Reader) error {
	sc := bufio.NewScanner(dump)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var lines []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "-- Dumped from database version"),
			strings.HasPrefix(line, "-- Dumped by pg_dump version"),
			line == "-- PostgreSQL database dump",
			line == "-- PostgreSQL database dump complete",
			strings.HasPrefix(line, "SET "),
			strings.HasPrefix(line, "SELECT pg_catalog.set_config("),
			strings.HasPrefix(line, `\restrict `),
			strings.HasPrefix(line, `\unrestrict `):
			continue
		}
		lines = append(lines, strings.TrimRight(line, " \t"))
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading pg_dump's output: %w", err)
	}
	// pg_dump frames each object's name in "--" lines; once the banners
	// are gone, the empty frames left over are dropped too.
	var kept []string
	for i, line := range lines {
		if line == "--" && (i+1 == len(lines) || lines[i+1] == "" || lines[i+1] == "--") &&
			(len(kept) == 0 || kept[len(kept)-1] == "" || kept[len(kept)-1] == "--") {
			continue
		}
		if line == "" && (len(kept) == 0 || kept[len(kept)-1] == "") {
			continue
		}
		kept = append(kept, line)
	}
	for len(kept) > 0 && (kept[len(kept)-1] == "" || kept[len(kept)-1] == "--") {
		kept = kept[:len(kept)-1]
	}
	if len(kept) == 0 {
		return errors.New("pg_dump printed no schema")
	}
	for _, line := range kept {
		w.WriteString(line)
		w.WriteByte('\n')
	}
	return nil
}

// withDatabase returns url pointed at database name, keeping every other
// setting, in the URL or the key=value form (libpq and pgx take the last
// dbname keyword).
func withDatabase(connString, name string) string {
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		u, err := url.Parse(connString)
		if err == nil {
			u.Path = "/" + name
			q := u.Query()
			q.Del("dbname")
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return connString + " dbname=" + name
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
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
