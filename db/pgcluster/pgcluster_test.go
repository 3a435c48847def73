package pgcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// newDir returns a fresh cluster dir. It is not t.TempDir(): that is 0700 and
// owned by root when tests run as root, and the postgres user that then runs
// the cluster could not traverse it.
func newDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "lh-pgc-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Registered first so it runs after the Stop cleanups of start().
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// start starts a cluster in dir and makes sure it is stopped at the end of
// the test even if the test fails half-way.
func start(t *testing.T, ctx context.Context, dir string) *Cluster {
	t.Helper()
	c, err := Start(ctx, Config{Dir: dir})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Errorf("Stop in cleanup: %v", err)
		}
	})
	return c
}

func stop(t *testing.T, ctx context.Context, c *Cluster) {
	t.Helper()
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

func queryString(t *testing.T, ctx context.Context, url, sql string) string {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connecting to %q: %v", url, err)
	}
	defer conn.Close(ctx)
	var s string
	if err := conn.QueryRow(ctx, sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

func execSQL(t *testing.T, ctx context.Context, url, sql string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connecting to %q: %v", url, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func assertAnswers(t *testing.T, ctx context.Context, c *Cluster) {
	t.Helper()
	if got := queryString(t, ctx, c.URL("leasehold"), "SELECT current_database()"); got != "leasehold" {
		t.Fatalf("current_database() = %q, want leasehold", got)
	}
}

func assertGone(t *testing.T, ctx context.Context, c *Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := ping(ctx, c.URL("postgres")); err == nil {
		t.Fatal("cluster still answers after Stop")
	}
}

func TestNoPostgres(t *testing.T) {
	t.Setenv("PATH", "")
	old := searchRoots
	searchRoots = []string{t.TempDir()}
	t.Cleanup(func() { searchRoots = old })

	_, err := Start(t.Context(), Config{Dir: filepath.Join(t.TempDir(), "pg")})
	if !errors.Is(err, ErrNoPostgres) {
		t.Fatalf("Start error = %v, want ErrNoPostgres", err)
	}
	if !strings.Contains(err.Error(), "DATABASE_URL") || !strings.Contains(err.Error(), "apt-get install postgresql") {
		t.Fatalf("error %q should say how to install PostgreSQL or set DATABASE_URL", err)
	}
}

func TestParseVersion(t *testing.T) {
	versions := []string{"9.6", "15", "17", "9"}
	var best string
	var bestVer []int
	for _, v := range versions {
		got, ok := parseVersion(v)
		if !ok {
			t.Fatalf("parseVersion(%q) failed", v)
		}
		if best == "" || slices.Compare(got, bestVer) > 0 {
			best, bestVer = v, got
		}
	}
	if best != "17" {
		t.Fatalf("highest version = %s, want 17", best)
	}
	if _, ok := parseVersion("main"); ok {
		t.Fatal("parseVersion(main) should fail")
	}
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := newDir(t)

	c1 := start(t, ctx, dir)
	if !c1.Owned() {
		t.Fatal("first Start: Owned() = false, want true")
	}
	assertAnswers(t, ctx, c1)
	execSQL(t, ctx, c1.URL("leasehold"), "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('survives restart')")

	// A second user of the same Dir reuses the running server.
	c2 := start(t, ctx, dir)
	if c2.Owned() {
		t.Fatal("second Start: Owned() = true, want false")
	}
	assertAnswers(t, ctx, c2)
	stop(t, ctx, c2)
	assertAnswers(t, ctx, c1) // a non-owner's Stop leaves the server alone

	stop(t, ctx, c1)
	assertGone(t, ctx, c1)
	if _, err := os.Stat(filepath.Join(c1.sockDir, ".s.PGSQL.5432")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket still present after Stop: %v", err)
	}

	// A postmaster.pid naming a live process that is not postgres (a PID
	// reused after a crash) must not prevent the restart.
	run, err := currentRunner()
	if err != nil {
		t.Fatal(err)
	}
	sleeper := run.command(ctx, "sleep", "30")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	pidFile := filepath.Join(dir, "data", "postmaster.pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(sleeper.Process.Pid)+"\n"+filepath.Join(dir, "data")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(pidFile, run.uid, run.gid); err != nil {
		t.Fatal(err)
	}

	c3 := start(t, ctx, dir)
	if !c3.Owned() {
		t.Fatal("Start after Stop: Owned() = false, want true")
	}
	if got := queryString(t, ctx, c3.URL("leasehold"), "SELECT v FROM kept"); got != "survives restart" {
		t.Fatalf("after restart kept.v = %q", got)
	}
	stop(t, ctx, c3)
	assertGone(t, ctx, c3)

	// When the server cannot start, the error carries the log's reason.
	conf, err := os.OpenFile(filepath.Join(dir, "data", "postgresql.conf"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conf.WriteString("no_such_setting_xyz = 1\n"); err != nil {
		t.Fatal(err)
	}
	conf.Close()
	_, err = Start(ctx, Config{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "no_such_setting_xyz") {
		t.Fatalf("Start with a broken config: error = %v, want one quoting postgres.log", err)
	}
}

// TestConcurrentStart starts one Dir from several goroutines at once; flock
// locks belong to open files, so this exercises the same locking as separate
// processes would.
func TestConcurrentStart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := newDir(t)

	const n = 4
	clusters := make([]*Cluster, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { clusters[i], errs[i] = Start(ctx, Config{Dir: dir}) })
	}
	wg.Wait()
	var owner *Cluster
	var others []*Cluster
	for i, c := range clusters {
		if errs[i] != nil {
			t.Fatalf("Start %d: %v", i, errs[i])
		}
		t.Cleanup(func() { c.Stop(context.Background()) })
		if c.Owned() {
			if owner != nil {
				t.Fatal("more than one Start reports Owned()")
			}
			owner = c
		} else {
			others = append(others, c)
		}
		assertAnswers(t, ctx, c)
	}
	if owner == nil {
		t.Fatal("no Start reports Owned()")
	}

	// The owner leaving first must not pull the server from under the
	// others; the last one out stops it.
	stop(t, ctx, owner)
	for _, c := range others[:len(others)-1] {
		assertAnswers(t, ctx, c)
		stop(t, ctx, c)
	}
	last := others[len(others)-1]
	assertAnswers(t, ctx, last)
	stop(t, ctx, last)
	assertGone(t, ctx, last)
}

// TestMultiProcess starts the same Dir from separate processes (re-running
// this test binary as helpers), as parallel go test binaries would.
func TestMultiProcess(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := newDir(t)

	type helper struct {
		cmd   *osexec.Cmd
		stdin io.WriteCloser
		out   *bufio.Reader
	}
	var helpers []helper
	for range 3 {
		cmd := osexec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "PGCLUSTER_HELPER_DIR="+dir)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stdin.Close(); cmd.Wait() })
		helpers = append(helpers, helper{cmd, stdin, bufio.NewReader(stdout)})
	}
	owners := 0
	for i, h := range helpers {
		for {
			line, err := h.out.ReadString('\n')
			if err != nil {
				t.Fatalf("helper %d: %v", i, err)
			}
			if strings.HasPrefix(line, "owned=") {
				if strings.TrimSpace(line) == "owned=true" {
					owners++
				}
				break
			}
		}
	}
	if owners != 1 {
		t.Fatalf("%d helper processes report Owned(), want exactly 1", owners)
	}

	c := start(t, ctx, dir)
	if c.Owned() {
		t.Fatal("Start while helpers run: Owned() = true, want false")
	}
	// All helpers, the owner among them, stop and exit; we still use it.
	for i, h := range helpers {
		h.stdin.Close()
		if err := h.cmd.Wait(); err != nil {
			t.Fatalf("helper %d: %v", i, err)
		}
	}
	assertAnswers(t, ctx, c)
	stop(t, ctx, c) // last user of a cluster this package started
	assertGone(t, ctx, c)
}

// TestHelperProcess is run by TestMultiProcess in a child process: it starts
// the cluster, reports ownership, and stops it once stdin closes.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv("PGCLUSTER_HELPER_DIR")
	if dir == "" {
		t.Skip("helper for TestMultiProcess")
	}
	ctx := t.Context()
	c, err := Start(ctx, Config{Dir: dir})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	assertAnswers(t, ctx, c)
	fmt.Printf("owned=%v\n", c.Owned())
	io.Copy(io.Discard, os.Stdin)
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// TestUnreachableDirAsRoot: root's checkout in a 0700 home directory. The
// postgres user that runs the cluster cannot traverse the path to the
// configured dir, so the data must live where it can, and stay there for
// the next start.
func TestUnreachableDirAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root runs the cluster as another user (postgres), who may be unable to reach the dir")
	}
	t.Parallel()
	ctx := t.Context()
	home, err := os.MkdirTemp("", "lh-root-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(home, "checkout", ".leasehold", "testpg")
	run, err := currentRunner()
	if err != nil {
		t.Fatal(err)
	}
	if checkSearchable(dir, run) == nil {
		t.Fatalf("%s should be out of reach of user %s", dir, run.name)
	}

	startHere := func() *Cluster {
		t.Helper()
		c, err := Start(ctx, Config{Dir: dir})
		if err != nil {
			t.Fatalf("Start in a dir under a 0700 directory: %v", err)
		}
		// Stop before the data's own directory is removed (cleanups run
		// last in, first out).
		t.Cleanup(func() {
			if err := c.Stop(context.Background()); err != nil {
				t.Errorf("Stop in cleanup: %v", err)
			}
		})
		return c
	}
	c := startHere()
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(c.dataDir)) })
	if strings.HasPrefix(c.dataDir, home+"/") {
		t.Fatalf("data dir %s is still under the unreachable %s", c.dataDir, home)
	}
	if err := checkSearchable(c.dataDir, run); err != nil {
		t.Fatalf("data dir out of reach: %v", err)
	}
	assertAnswers(t, ctx, c)
	execSQL(t, ctx, c.URL("leasehold"), "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('same place next time')")
	stop(t, ctx, c)
	assertGone(t, ctx, c)

	again := startHere()
	if again.dataDir != c.dataDir || !again.Owned() {
		t.Fatalf("second start: data dir %s (owned %v), want %s again", again.dataDir, again.Owned(), c.dataDir)
	}
	if got := queryString(t, ctx, again.URL("leasehold"), "SELECT v FROM kept"); got != "same place next time" {
		t.Fatalf("after restart kept.v = %q", got)
	}
	stop(t, ctx, again)
}
