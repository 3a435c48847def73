package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/db/dbtest"
	"github.com/leasehold/leasehold/db/pgcluster"
)

// environWithout is this process's environment without the variables
// named, so that a test's programs cannot inherit a DATABASE_URL.
func environWithout(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		keep := true
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				keep = false
			}
		}
		if keep {
			env = append(env, kv)
		}
	}
	return env
}

// lastLine is the last non-empty line of out.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// `server token create … | tail -1` is the token, and so is the last line
// where stdout and stderr are one stream (2>&1, docker compose exec with
// its terminal): the log lines of the private cluster come first. The
// token is checked against the store, not only by its shape.
func TestTokenCreateLastLineIsTheToken(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The server's directory, with the private cluster it made there.
	dir := t.TempDir()
	cluster := dbtest.StartCluster(t, ctx, pgcluster.Config{Dir: filepath.Join(dir, ".leasehold", "pg")})
	env := environWithout("DATABASE_URL")
	server := filepath.Join(binDir, "server")
	migrate := exec.Command(server, "migrate", "up")
	migrate.Dir, migrate.Env = dir, env
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("server migrate up: %v\n%s", err, out)
	}
	pool, err := pgxpool.New(ctx, cluster.URL("leasehold"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store := apitoken.NewStore(pool)

	for _, merged := range []bool{false, true} {
		name := fmt.Sprintf("phone-merged-%v", merged)
		cmd := exec.Command(server, "token", "create", "--role", "worker", "--name", name)
		cmd.Dir, cmd.Env = dir, env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if merged {
			cmd.Stderr = &stdout
		}
		if err := cmd.Run(); err != nil {
			t.Fatalf("server token create: %v\n%s%s", err, stdout.String(), stderr.String())
		}
		if merged && !strings.Contains(stdout.String(), "private PostgreSQL cluster") {
			t.Fatalf("no log line in the merged output, so the test shows nothing:\n%s", stdout.String())
		}
		secret := lastLine(stdout.String())
		tok, err := store.Authenticate(ctx, secret)
		if err != nil {
			t.Fatalf("merged=%v: the last line %q is not a token (%v); output:\n%s", merged, secret, err, stdout.String())
		}
		if tok.Name != name || tok.Role != apitoken.RoleWorker {
			t.Fatalf("the last line is token %q (%s), want %q (worker)", tok.Name, tok.Role, name)
		}
	}
}

// A subcommand run with no DATABASE_URL where the server never ran (a
// VPS's home directory) makes no private cluster: it says which database
// it would use and why it is not there, and leaves the directory as it
// was. With DATABASE_URL naming a database without Leasehold's schema,
// it says that, not `relation "api_tokens" does not exist`.
func TestSubcommandWithoutDatabaseMakesNoCluster(t *testing.T) {
	t.Parallel()
	server := filepath.Join(binDir, "server")
	dir := t.TempDir()
	for _, args := range [][]string{
		{"token", "create", "--role", "worker", "--name", "pixel7"},
		{"token", "list"},
		{"prune", "--dry-run"},
		{"migrate", "version"},
	} {
		cmd := exec.Command(server, args...)
		cmd.Dir, cmd.Env = dir, environWithout("DATABASE_URL")
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("server %s succeeded with no database:\n%s", strings.Join(args, " "), out)
		}
		for _, want := range []string{"DATABASE_URL is not set", filepath.Join(dir, ".leasehold", "pg"), "a subcommand never does", "server.env"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("server %s: no %q in:\n%s", strings.Join(args, " "), want, out)
			}
		}
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			t.Fatalf("server %s left %v in its directory: it made a cluster", strings.Join(args, " "), entries[0].Name())
		}
	}

	// A database of its own without Leasehold's schema.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := dbtest.AdminURL(t)
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	empty := fmt.Sprintf("lh_empty_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+empty); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+empty+" WITH (FORCE)") }()
	emptyURL := admin + " dbname=" + empty // a key/value string: the last dbname counts
	if u, err := url.Parse(admin); err == nil && u.Scheme != "" {
		u.Path = "/" + empty
		emptyURL = u.String()
	}
	cmd := exec.Command(server, "token", "create", "--role", "worker", "--name", "pixel7")
	cmd.Dir, cmd.Env = dir, append(environWithout("DATABASE_URL"), "DATABASE_URL="+emptyURL)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), fmt.Sprintf("the database %q", empty)) ||
		!strings.Contains(string(out), "has no Leasehold schema") || strings.Contains(string(out), "does not exist (SQLSTATE") {
		t.Fatalf("token create on a database without the schema: %v\n%s", err, out)
	}
}

// `make run` on an address another program holds says so and starts
// nothing, instead of announcing "Leasehold is up" over someone else's
// server while its own fails to bind.
func TestMakeRunRefusesAPortTakenByAnotherProgram(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	other := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"status":"live"}`) // even an answer like ours, on a port we did not open
	})}
	go func() { _ = other.Serve(ln) }()
	defer other.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "run", "ADDR="+ln.Addr().String())
	cmd.Dir = ".."
	cmd.Env = append(environWithout("DATABASE_URL"), "DATABASE_URL=postgres://nobody@127.0.0.1:1/none")
	// Whatever make starts goes with it when the test gives up on it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("make run succeeded on a taken port:\n%s", out)
	}
	if strings.Contains(string(out), "is up") || strings.Contains(string(out), "server listening") {
		t.Fatalf("make run started or announced a server on a taken port:\n%s", out)
	}
	if !strings.Contains(string(out), ln.Addr().String()+" is already taken by another program") ||
		!strings.Contains(string(out), "make run ADDR=") {
		t.Fatalf("make run did not say the address is taken and what to do:\n%s", out)
	}
}

// readmeBlock is the README's shell block that contains marker.
func readmeBlock(t *testing.T, marker string) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range strings.Split(string(b), "```sh\n")[1:] {
		block = block[:strings.Index(block, "```")]
		if strings.Contains(block, marker) {
			return block
		}
	}
	t.Fatalf("no shell block of the README contains %q", marker)
	return ""
}

// The README's commands, pasted into a shell beside a fresh `make run`
// (its server with --demo and its sim worker, as the Makefile starts
// them), all succeed: the retry of job 4 waits until job 4 is dead (a
// retry before is a 409), every body says it is JSON, every variable is
// set. curl -f makes any 4xx fail the script.
func TestReadmeCommandsWorkOnAFreshDemo(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = ln.Addr().String()
	ln.Close()
	e.apiURL, e.artifacts = "http://"+e.addr, t.TempDir()
	e.spawn("server", []string{"--demo"}, "LEASEHOLD_ADDR="+e.addr, "LEASEHOLD_ARTIFACTS="+e.artifacts,
		"LEASEHOLD_API_TOKEN=lh_dev_token_change_me")
	e.eventually("server ready", 30*time.Second, func() bool {
		resp, err := http.Get(e.apiURL + "/health/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	e.startWorker("sim-worker", "--concurrency", "4", "--lease", "10s", "--grace", "3s", "--artifacts", e.artifacts)

	for _, marker := range []string{"jobs/4/retry", `"kind":"app_investigation"`} {
		script := readmeBlock(t, marker)
		script = strings.ReplaceAll(script, "localhost:8080", e.addr)
		script = strings.ReplaceAll(script, "curl ", "curl -fsS ")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, "bash", "-e", "-c", script).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("the README's block with %s failed: %v\n%s\n--- script ---\n%s", marker, err, out, script)
		}
		if marker == "jobs/4/retry" && !strings.Contains(string(out), `{"id":4,`) {
			t.Fatalf("the retry printed no job 4:\n%s", out)
		}
	}
	got, err := client.New(e.apiURL, "lh_dev_token_change_me").WaitFor(e.ctx, 6, client.StateSucceeded, client.StateDead)
	if err != nil || got.State != client.StateSucceeded {
		t.Fatalf("the README's first job (6): %v, %v", got.State, err)
	}
}
