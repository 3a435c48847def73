// Command runclients runs the README's calls through each generated client
// against a real Leasehold server, so that a client that compiles but
// sends or reads the wrong thing fails `make check-clients`.
//
// It builds ./cmd/server of the main module (into bin/) and starts it in a
// temporary directory, on a database of its own: a fresh database on
// $TEST_DATABASE_URL's server when that is set (dropped afterwards),
// otherwise the server's private cluster in that directory's
// .leasehold/pg. It then runs ogenuse.Run, oapiuse.Run and the compiled
// TypeScript consumer (node), each on queues and schedules of its own, and
// stops the server and removes what it made however they end.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/tools/apiclients/oapiuse"
	"github.com/leasehold/leasehold/tools/apiclients/ogenuse"
)

func main() {
	root := flag.String("root", "../..", "the main module's directory (where ./cmd/server is)")
	tsMain := flag.String("ts", "ts/gen/js/run.js", "the compiled TypeScript consumer, run with node")
	bin := flag.String("bin", "bin/server", "where to build the server; kept between runs, so that go build relinks only when its sources changed")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *root, *bin, *tsMain); err != nil {
		fmt.Fprintln(os.Stderr, "runclients:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, root, bin, tsMain string) (err error) {
	if bin, err = filepath.Abs(bin); err != nil {
		return err
	}
	if tsMain, err = filepath.Abs(tsMain); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "leasehold-clients-")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(tmp)) }()
	// As root the private cluster runs as the postgres user, which must be
	// able to reach its data directory inside tmp (else the data would go
	// to that user's home and outlive the run).
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}

	// The binary stays where it is between runs: go build then relinks
	// only when the server's sources changed (0.4 s warm against 2.4 s
	// into a fresh directory).
	start := time.Now()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/server")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the server: %w", err)
	}

	dbURL := ""
	if base := os.Getenv("TEST_DATABASE_URL"); base != "" {
		var drop func() error
		dbURL, drop, err = createDatabase(ctx, base)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, drop()) }()
	}
	srv, err := startServer(ctx, bin, tmp, dbURL)
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := srv.stop(); stopErr != nil || err != nil {
			err = errors.Join(err, stopErr)
			srv.dumpLog(os.Stderr)
		}
	}()
	workerToken, err := srv.workerToken(ctx, "clients-run")
	if err != nil {
		return err
	}
	fmt.Printf("runclients: server up on %s in %v\n", srv.url, time.Since(start).Round(time.Millisecond))

	hc := &http.Client{Timeout: 30 * time.Second}
	consumers := []struct {
		name string
		run  func(context.Context) error
	}{
		{"ogen", func(ctx context.Context) error { return ogenuse.Run(ctx, srv.url, srv.adminToken, workerToken, hc) }},
		{"oapi-codegen", func(ctx context.Context) error { return oapiuse.Run(ctx, srv.url, srv.adminToken, workerToken, hc) }},
		{"openapi-typescript", func(ctx context.Context) error { return runNode(ctx, tsMain, srv.url, srv.adminToken, workerToken) }},
	}
	var failed []error
	for _, c := range consumers {
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := c.run(ctx)
		cancel()
		if err != nil {
			failed = append(failed, fmt.Errorf("%s client: %w", c.name, err))
			fmt.Printf("runclients: %s client FAILED against the server (%v)\n", c.name, time.Since(t0).Round(time.Millisecond))
			continue
		}
		fmt.Printf("runclients: %s client: the README's calls work against the server (%v)\n", c.name, time.Since(t0).Round(time.Millisecond))
	}
	return errors.Join(failed...)
}

// runNode runs the compiled TypeScript consumer, which exits non-zero on
// any unexpected answer.
func runNode(ctx context.Context, script, url, adminToken, workerToken string) error {
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Env = append(os.Environ(),
		"LEASEHOLD_URL="+url,
		"LEASEHOLD_ADMIN_TOKEN="+adminToken,
		"LEASEHOLD_WORKER_TOKEN="+workerToken,
	)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	return cmd.Run()
}
