package e2e

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/db"
)

const libfaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

// startSkewedPostgres starts a PostgreSQL whose clock runs an hour ahead
// of this machine's (libfaketime; Go programs read the clock without libc,
// so the database is the side that can be shifted). It returns the URL of
// a migrated database.
func startSkewedPostgres(t *testing.T, offset string) string {
	t.Helper()
	if _, err := os.Stat(libfaketime); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("libfaketime missing (%v): .ci/run installs the faketime package", err)
		}
		t.Skip("libfaketime not installed (apt-get install faketime)")
	}
	bin := ""
	if matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb"); len(matches) > 0 {
		bin = filepath.Dir(matches[len(matches)-1])
	} else {
		t.Fatal("PostgreSQL server binaries not found under /usr/lib/postgresql")
	}
	dir, err := os.MkdirTemp("", "lh-skew-")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dir, 0o755)
	var cred *syscall.Credential
	if os.Geteuid() == 0 { // initdb refuses root
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running PostgreSQL as root needs a postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		_ = os.Chown(dir, uid, gid)
	}
	run := func(env []string, name string, args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = "/"
		cmd.Env = append([]string{"PATH=/usr/bin:/bin", "LC_ALL=C"}, env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
	}
	data := filepath.Join(dir, "data")
	run(nil, "initdb", "-D", data, "-U", "leasehold", "--auth=trust", "--no-sync")
	conf := "listen_addresses = ''\nunix_socket_directories = '" + dir + "'\nfsync = off\n"
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(conf)
	f.Close()
	run([]string{"FAKETIME=" + offset, "LD_PRELOAD=" + libfaketime}, "pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-w", "start")
	t.Cleanup(func() {
		run(nil, "pg_ctl", "-D", data, "-m", "immediate", "stop")
		os.RemoveAll(dir)
	})

	ctx := context.Background()
	admin, err := pgx.Connect(ctx, "host="+dir+" user=leasehold dbname=postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE leasehold"); err != nil {
		t.Fatal(err)
	}
	url := "host=" + dir + " user=leasehold dbname=leasehold"
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := db.Migrate(pool); err != nil {
		t.Fatal(err)
	}
	return url
}

// The database's clock is an hour ahead of the workers', or an hour
// behind: leases still last exactly what they should, nothing is
// reclaimed early, and a dead worker's lease is reclaimed right after its
// deadline. Every deadline is computed and compared by the database alone.
func TestClockSkewChangesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, offset string
		skew         time.Duration
	}{
		{"DatabaseAheadOneHour", "+1h", time.Hour},
		{"DatabaseBehindOneHour", "-1h", -time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testClockSkew(t, tc.offset, tc.skew)
		})
	}
}

func testClockSkew(t *testing.T, offset string, want time.Duration) {
	url := startSkewedPostgres(t, offset)
	e := newEnv(t)
	e.dbURL = url
	pool, err := pgxpool.New(e.ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e.pool = pool
	var skew time.Duration
	if err := pool.QueryRow(e.ctx, "SELECT now() - $1::timestamptz", time.Now()).Scan(&skew); err != nil {
		t.Fatal(err)
	}
	if d := skew - want; d < -time.Minute || d > time.Minute {
		t.Fatalf("database clock is %v off this machine's, want about %v", skew, want)
	}

	e.startServer()
	args := []string{"--lease", "1s", "--heartbeat", "300ms"}
	a := e.startWorker("worker-a", args...)
	// Runs 3 s under a 1 s lease: it needs its renewals, which a worker
	// that compared its clock with the database's would get wrong.
	long := e.submit(map[string]any{"app": "com.example.long", "sim": map[string]any{"steps": 3, "step_ms": 1000}})
	e.eventually("the long job succeeds on worker A's renewals", 30*time.Second, func() bool {
		return e.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'succeeded'", long) == 1
	})
	if n := e.count("SELECT count(*) FROM job_attempts WHERE job_id = $1", long); n != 1 {
		t.Fatalf("the long job took %d attempts, want 1", n)
	}

	orphan := e.submit(map[string]any{"app": "com.example.orphan", "sim": map[string]any{"hang": true, "step_ms": 100}})
	e.eventually("worker A runs the orphan", 20*time.Second, func() bool {
		return e.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'running'", orphan) == 1
	})
	a.signal(t, syscall.SIGKILL)
	e.eventually("the orphan is reclaimed", 20*time.Second, func() bool {
		return e.count("SELECT count(*) FROM job_attempts WHERE job_id = $1 AND outcome = 'lease_expired'", orphan) == 1
	})
	var held, past time.Duration
	if err := pool.QueryRow(e.ctx, `SELECT ended_at - heartbeat_at, ended_at - lease_until FROM job_attempts
		WHERE job_id = $1 AND number = 1`, orphan).Scan(&held, &past); err != nil {
		t.Fatal(err)
	}
	if past < 0 || past > 500*time.Millisecond || held < time.Second {
		t.Fatalf("reclaimed %v after the last heartbeat, %v past the deadline; want the 1s lease, then at once", held, past)
	}
}
