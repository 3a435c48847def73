//go:build unix

// Package pgcluster runs a private PostgreSQL cluster from the PostgreSQL
// binaries installed on the machine, so that the server and the test suite
// work without an externally provided database (DATABASE_URL unset).
//
// The cluster lives in Config.Dir (data in Dir/data, log in Dir/postgres.log;
// as root, when the postgres user cannot reach Dir, both live in a directory
// of that user's keyed by Dir, see placeReachable) and listens only on a unix socket in a short directory of its own under
// /tmp, so it never clashes with a system PostgreSQL on TCP port 5432.
//
// Several processes may use the same Dir at once: Start serialises with a
// flock on Dir/start.lock, and every Cluster returned by Start holds a shared
// flock on Dir/users.lock until Stop, so that the cluster is only stopped
// once nobody uses it any more.
package pgcluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const (
	// superuser is the bootstrap superuser initdb creates; with trust auth
	// over a private socket no password is needed.
	superuser = "leasehold"
	// appDatabase is created on first start so callers can connect at once.
	appDatabase = "leasehold"
	// port only names the socket file (.s.PGSQL.<port>); there is no TCP
	// listener, so the default cannot clash with a system server.
	port = 5432
	// unprivilegedUser runs the cluster when we are root, because initdb
	// and postgres refuse to run as root.
	unprivilegedUser = "postgres"
	// confMarker tags the settings we append to postgresql.conf so they are
	// appended exactly once.
	confMarker = "# leasehold pgcluster settings"
	// readyTimeout bounds how long Start waits for the server to answer.
	readyTimeout = 60 * time.Second
)

// searchRoots are the directories searched for <version>/bin/{initdb,pg_ctl}
// when the binaries are not on PATH. It is a variable so tests can point it
// at an empty directory.
var searchRoots = []string{"/usr/lib/postgresql"}

// ErrNoPostgres is returned (wrapped) by Start when initdb or pg_ctl cannot
// be found.
var ErrNoPostgres = errors.New("PostgreSQL server binaries (initdb, pg_ctl) not found on PATH or under /usr/lib/postgresql/*/bin: " +
	"install PostgreSQL (e.g. `apt-get install postgresql`) or set DATABASE_URL to use an existing database")

// ErrNoCluster is returned (wrapped) by Start with Config.MustExist when
// Dir holds no cluster yet.
var ErrNoCluster = errors.New("there is no private cluster")

// Config says where the cluster lives.
type Config struct {
	Dir    string       // data lives in Dir/data; default "./.leasehold/pg" (made absolute)
	Logger *slog.Logger // default slog.Default()
	// MustExist makes Start use only a cluster that was initialised
	// before (and start it if it is stopped): it never runs initdb nor
	// creates Dir. For a one-off command, which must act on the server's
	// database and not on a new empty one made where it happens to run.
	MustExist bool
}

// Cluster is a running private cluster.
type Cluster struct {
	dir     string
	dataDir string
	sockDir string
	logPath string
	pgCtl   string
	run     runner
	log     *slog.Logger
	owned   bool

	mu      sync.Mutex
	users   *os.File // shared flock on Dir/users.lock while in use
	stopped bool
}

// Start initialises the cluster on first use (initdb with trust auth,
// superuser "leasehold"), starts it if it is not already running, waits until
// it accepts queries, creates database "leasehold" if missing, and returns it.
// Safe to call from several processes at once (serialised with a flock on a
// file in Dir). If the cluster was already running (another process started
// it), Start reuses it and Owned() reports false.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	dir := cfg.Dir
	if dir == "" {
		dir = filepath.Join(".leasehold", "pg")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("resolving cluster dir: %w", err)
	}

	if cfg.MustExist {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("%w in %s (no such directory)", ErrNoCluster, dir)
		}
	}
	initdb, pgCtl, err := findBinaries()
	if err != nil {
		return nil, err
	}
	run, err := currentRunner()
	if err != nil {
		return nil, err
	}

	sum := sha256.Sum256([]byte(dir))
	c := &Cluster{
		dir:     dir,
		dataDir: filepath.Join(dir, "data"),
		// Unix socket paths are limited to ~107 bytes, so the socket cannot
		// live under an arbitrarily deep Dir; a hash keeps it unique per Dir.
		sockDir: "/tmp/lh-" + hex.EncodeToString(sum[:])[:12],
		logPath: filepath.Join(dir, "postgres.log"),
		pgCtl:   pgCtl,
		run:     run,
		log:     log.With("dir", dir),
	}

	if err := mkdirAll(dir, run); err != nil {
		return nil, fmt.Errorf("creating cluster dir: %w", err)
	}
	if run.cred != nil {
		if err := c.placeReachable(run); err != nil {
			return nil, err
		}
	}

	lock, err := lockFile(ctx, filepath.Join(dir, "start.lock"), syscall.LOCK_EX, func() {
		c.log.Info("waiting for another process to finish starting the private postgres cluster")
	})
	if err != nil {
		return nil, fmt.Errorf("locking cluster dir: %w", err)
	}
	defer lock.Close() // closing releases the flock

	if err := c.ensureSocketDir(); err != nil {
		return nil, err
	}
	// A failure must not leave behind a server nobody can stop, nor litter
	// /tmp; Remove only succeeds on the dir once no server has a socket in it.
	fail := func(err error) (*Cluster, error) {
		if c.owned {
			if stopErr := c.pgCtlStop(context.WithoutCancel(ctx)); stopErr != nil {
				c.log.Warn("stopping postgres after failed start", "err", stopErr)
			}
			os.Remove(c.managedPath())
		}
		os.Remove(c.sockDir)
		return nil, err
	}
	if cfg.MustExist {
		if _, err := os.Stat(filepath.Join(c.dataDir, "PG_VERSION")); err != nil {
			return fail(fmt.Errorf("%w in %s (%s holds none)", ErrNoCluster, dir, c.dataDir))
		}
	}
	if err := c.initialise(ctx, initdb); err != nil {
		return fail(err)
	}
	if err := c.ensureConf(); err != nil {
		return fail(err)
	}
	if err := c.startIfStopped(ctx); err != nil {
		return fail(err)
	}
	if err := waitReady(ctx, c.URL("postgres"), readyTimeout); err != nil {
		return fail(fmt.Errorf("waiting for postgres on %s: %w%s", c.sockDir, err, c.logTail()))
	}
	if err := createDatabase(ctx, c.URL("postgres"), appDatabase); err != nil {
		return fail(err)
	}
	users, err := lockFile(ctx, filepath.Join(dir, "users.lock"), syscall.LOCK_SH, nil)
	if err != nil {
		return fail(fmt.Errorf("registering cluster user: %w", err))
	}
	c.users = users
	return c, nil
}

// URL returns a pgx connection string for database dbname over the cluster's
// unix socket.
func (c *Cluster) URL(dbname string) string {
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable",
		quoteConnValue(c.sockDir), port, superuser, quoteConnValue(dbname))
}

// Owned reports whether this Start call started the server (rather than
// reusing one another process had started).
func (c *Cluster) Owned() bool { return c.owned }

// Stop stops the server with pg_ctl stop -m fast when this Cluster started it
// (Owned) and no other process still uses it. If other processes still use
// the cluster, it is left running and the last of them to call Stop stops
// it; a Cluster that merely reused a server someone else started outside this
// package never stops it. Stop is safe to call more than once.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}

	lock, err := lockFile(ctx, filepath.Join(c.dir, "start.lock"), syscall.LOCK_EX, nil)
	if err != nil {
		return fmt.Errorf("locking cluster dir: %w", err)
	}
	defer lock.Close()

	c.stopped = true
	if c.users != nil {
		c.users.Close() // drops our shared hold
		c.users = nil
	}

	// An exclusive lock is only available when no other Cluster holds a
	// shared one, i.e. we are the last user.
	last, err := lockFile(ctx, filepath.Join(c.dir, "users.lock"), syscall.LOCK_EX|syscall.LOCK_NB, nil)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		if c.owned {
			c.log.Info("leaving private postgres running: other processes still use it; the last one stops it")
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking for other cluster users: %w", err)
	}
	defer last.Close()

	_, statErr := os.Stat(c.managedPath())
	managed := statErr == nil
	if !c.owned && !managed {
		return nil
	}
	if err := c.pgCtlStop(ctx); err != nil {
		return err
	}
	if err := os.Remove(c.managedPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing cluster marker: %w", err)
	}
	// The socket dir lives in /tmp; remove it so test runs don't litter.
	// It is empty once postgres has shut down, so Remove suffices.
	if err := os.Remove(c.sockDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.log.Warn("removing socket dir", "path", c.sockDir, "err", err)
	}
	return nil
}

// placeReachable moves the data dir and log out of Dir when the postgres
// user cannot traverse the path to it, as with a checkout in root's home
// (mode 0700). They go to a directory of its own under that user's home
// (or /var/tmp), named by a hash of Dir so that each checkout keeps its
// own cluster across runs; the locks stay in Dir, which only we use.
func (c *Cluster) placeReachable(run runner) error {
	unreachable := checkSearchable(c.dir, run)
	if unreachable == nil {
		return nil
	}
	sum := sha256.Sum256([]byte(c.dir))
	for _, base := range []string{run.home, "/var/tmp"} {
		if base == "" || !filepath.IsAbs(base) || checkSearchable(base, run) != nil {
			continue
		}
		home := filepath.Join(base, "leasehold-"+hex.EncodeToString(sum[:])[:12])
		if err := ensureOwnedDir(home, run); err != nil {
			return err
		}
		c.dataDir = filepath.Join(home, "data")
		c.logPath = filepath.Join(home, "postgres.log")
		c.log.Info("the postgres user cannot reach the cluster dir, so its data lives elsewhere",
			"data", c.dataDir, "reason", unreachable)
		return nil
	}
	return unreachable
}

// ensureOwnedDir creates dir (mode 0700) for user r, or accepts an existing
// one only if it is a real directory owned by r or by root: it may live in
// a world-writable directory such as /var/tmp.
func ensureOwnedDir(dir string, r runner) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating cluster home: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("checking cluster home: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || (int(st.Uid) != r.uid && st.Uid != 0) {
		return fmt.Errorf("%s exists but is not a directory owned by %s or root; remove it", dir, r.name)
	}
	if err := os.Lchown(dir, r.uid, r.gid); err != nil {
		return fmt.Errorf("handing %s to user %s: %w", dir, r.name, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("restricting %s: %w", dir, err)
	}
	return nil
}

// managedPath names a marker file that exists while a server started by this
// package runs; it lets the last user stop a server whose starter has gone.
func (c *Cluster) managedPath() string { return filepath.Join(c.dir, "managed") }

// initialise runs initdb unless the data dir already holds a cluster.
func (c *Cluster) initialise(ctx context.Context, initdb string) error {
	if _, err := os.Stat(filepath.Join(c.dataDir, "PG_VERSION")); err == nil {
		return nil
	}
	if err := os.Mkdir(c.dataDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating data dir: %w", err)
	}
	if c.run.cred != nil {
		if err := os.Chown(c.dataDir, c.run.uid, c.run.gid); err != nil {
			return fmt.Errorf("handing data dir to user %s: %w", c.run.name, err)
		}
	}
	c.log.Info("initialising private postgres cluster", "data", c.dataDir, "initdb", initdb)
	cmd := c.run.command(ctx, initdb,
		"-D", c.dataDir,
		"-U", superuser,
		"--auth=trust",
		// Explicit encoding and locale so the cluster does not depend on
		// whatever LANG the caller happens to have.
		"--encoding=UTF8",
		"--locale=C",
	)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initialising postgres cluster in %s (remove it to start afresh): %w\n%s",
			c.dataDir, err, bytes.TrimSpace(out))
	}
	return nil
}

// ensureConf appends our settings to postgresql.conf once. Having them in the
// file (not only on the pg_ctl command line) means a manual restart keeps the
// cluster off TCP.
func (c *Cluster) ensureConf() error {
	path := filepath.Join(c.dataDir, "postgresql.conf")
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading postgresql.conf: %w", err)
	}
	if bytes.Contains(b, []byte(confMarker)) {
		return nil
	}
	conf := fmt.Sprintf("\n%s: a private cluster reachable only over its own unix socket.\n"+
		"listen_addresses = ''\n"+
		"unix_socket_directories = '%s'\n"+
		"port = %d\n"+
		"max_connections = 200\n",
		confMarker, c.sockDir, port)
	// O_APPEND as root keeps the file's owner, so postgres can still read it.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("opening postgresql.conf: %w", err)
	}
	if _, err := f.WriteString(conf); err != nil {
		f.Close()
		return fmt.Errorf("writing postgresql.conf: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing postgresql.conf: %w", err)
	}
	return nil
}

// startIfStopped starts the server unless a live one already runs on the data
// dir, and records in c.owned whether it did.
func (c *Cluster) startIfStopped(ctx context.Context) error {
	running, err := c.running(ctx)
	if err != nil {
		return err
	}
	if running {
		// pg_ctl only checks that the PID in postmaster.pid is alive; after
		// a crash or container restart that PID may belong to an unrelated
		// process, which would also make postgres refuse to start.
		if pid, stale := stalePostmasterPID(c.dataDir); stale {
			c.log.Warn("removing stale postmaster.pid", "pid", pid)
			if err := os.Remove(filepath.Join(c.dataDir, "postmaster.pid")); err != nil {
				return fmt.Errorf("removing stale postmaster.pid: %w", err)
			}
			running = false
		}
	}
	if running {
		c.log.Info("reusing running private postgres", "socket", c.sockDir)
		return nil
	}

	if err := c.prepareLog(); err != nil {
		return err
	}
	c.log.Info("starting private postgres", "socket", c.sockDir, "log", c.logPath)
	// pg_ctl runs -o through the shell, so '' yields an empty value.
	opts := fmt.Sprintf("-k %s -p %d -c listen_addresses=''", c.sockDir, port)
	cmd := c.run.command(ctx, c.pgCtl, "start", "-D", c.dataDir, "-w", "-t", "60", "-l", c.logPath, "-o", opts)
	// Its own process group keeps the postmaster out of reach of a terminal
	// Ctrl-C aimed at us; Stop shuts it down deliberately.
	cmd.SysProcAttr.Setpgid = true
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("starting postgres: %w\n%s%s", err, bytes.TrimSpace(out), c.logTail())
	}
	c.owned = true
	if err := os.WriteFile(c.managedPath(), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return fmt.Errorf("writing cluster marker: %w", err)
	}
	return nil
}

// running asks pg_ctl status whether a server runs on the data dir.
func (c *Cluster) running(ctx context.Context) (bool, error) {
	out, err := c.run.command(ctx, c.pgCtl, "status", "-D", c.dataDir).CombinedOutput()
	if err == nil {
		return true, nil
	}
	// pg_ctl status exits 3 when no server is running.
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) && exitErr.ExitCode() == 3 {
		return false, nil
	}
	return false, fmt.Errorf("checking postgres status: %w\n%s", err, bytes.TrimSpace(out))
}

// pgCtlStop shuts the server down if it runs.
func (c *Cluster) pgCtlStop(ctx context.Context) error {
	running, err := c.running(ctx)
	if err != nil || !running {
		return err
	}
	c.log.Info("stopping private postgres")
	out, err := c.run.command(ctx, c.pgCtl, "stop", "-D", c.dataDir, "-m", "fast", "-w", "-t", "60").CombinedOutput()
	if err != nil {
		return fmt.Errorf("stopping postgres: %w\n%s%s", err, bytes.TrimSpace(out), c.logTail())
	}
	return nil
}

// prepareLog makes sure the postgres user can append to the log file, which
// lives in Dir (owned by us, not by that user).
func (c *Cluster) prepareLog() error {
	f, err := os.OpenFile(c.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("creating postgres log: %w", err)
	}
	f.Close()
	if c.run.cred != nil {
		if err := os.Chown(c.logPath, c.run.uid, c.run.gid); err != nil {
			return fmt.Errorf("handing postgres log to user %s: %w", c.run.name, err)
		}
	}
	return nil
}

// ensureSocketDir creates the socket directory with mode 0700, owned by the
// user running postgres. Because it lives in world-writable /tmp, an existing
// entry is only accepted if it is a real directory owned by that user (or by
// root when we are root, from a run that stopped before chowning it).
func (c *Cluster) ensureSocketDir() error {
	if err := os.Mkdir(c.sockDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating socket dir: %w", err)
	}
	fi, err := os.Lstat(c.sockDir)
	if err != nil {
		return fmt.Errorf("checking socket dir: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok {
		return fmt.Errorf("socket dir %s exists but is not a directory; remove it", c.sockDir)
	}
	owner := int(st.Uid)
	switch {
	case owner == c.run.uid:
	case c.run.cred != nil && owner == 0:
		if err := os.Lchown(c.sockDir, c.run.uid, c.run.gid); err != nil {
			return fmt.Errorf("handing socket dir to user %s: %w", c.run.name, err)
		}
	default:
		return fmt.Errorf("socket dir %s is owned by uid %d, not by uid %d which runs postgres; remove it", c.sockDir, owner, c.run.uid)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(c.sockDir, 0o700); err != nil {
			return fmt.Errorf("restricting socket dir: %w", err)
		}
	}
	return nil
}

// logTail returns the end of postgres.log formatted for appending to an
// error, since the reason a server fails to start is only written there.
func (c *Cluster) logTail() string {
	const maxBytes, maxLines = 4096, 20
	f, err := os.Open(c.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > maxBytes {
		if _, err := f.Seek(-maxBytes, io.SeekEnd); err != nil {
			return ""
		}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	return fmt.Sprintf("\n--- last lines of %s ---\n%s", c.logPath, strings.Join(lines, "\n"))
}

// stalePostmasterPID reports whether postmaster.pid names a live process that
// is not a postgres server. It returns false whenever it cannot tell (no /proc),
// leaving the decision to pg_ctl.
func stalePostmasterPID(dataDir string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0, false
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return pid, false
	}
	name := strings.TrimSpace(string(comm))
	return pid, name != "postgres" && name != "postmaster"
}

// findBinaries locates initdb and pg_ctl: on PATH first, else in the highest
// version directory under searchRoots.
func findBinaries() (initdb, pgCtl string, err error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		// Prefer the initdb next to pg_ctl so both come from one version.
		if sib := filepath.Join(filepath.Dir(p), "initdb"); isExecutable(sib) {
			return sib, p, nil
		}
		if i, err := exec.LookPath("initdb"); err == nil {
			return i, p, nil
		}
	}
	var bestDir string
	var bestVer []int
	for _, root := range searchRoots {
		entries, err := os.ReadDir(root)
		if err != nil {
			continue
		}
		for _, e := range entries {
			ver, ok := parseVersion(e.Name())
			if !ok {
				continue
			}
			bin := filepath.Join(root, e.Name(), "bin")
			if !isExecutable(filepath.Join(bin, "initdb")) || !isExecutable(filepath.Join(bin, "pg_ctl")) {
				continue
			}
			if bestDir == "" || slices.Compare(ver, bestVer) > 0 {
				bestDir, bestVer = bin, ver
			}
		}
	}
	if bestDir == "" {
		return "", "", fmt.Errorf("finding postgres binaries: %w", ErrNoPostgres)
	}
	return filepath.Join(bestDir, "initdb"), filepath.Join(bestDir, "pg_ctl"), nil
}

// parseVersion parses a version directory name such as "15" or "9.6" into
// numeric parts, so that 9.6 < 15 < 17.
func parseVersion(s string) ([]int, bool) {
	var ver []int
	for part := range strings.SplitSeq(s, ".") {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return nil, false
		}
		ver = append(ver, n)
	}
	return ver, true
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// runner runs the PostgreSQL binaries as the user that owns the cluster.
type runner struct {
	cred *syscall.Credential // nil: run as ourselves
	uid  int
	gid  int
	gids []int // all groups of the user, for permission checks
	name string
	home string
}

// currentRunner returns a runner for ourselves, or for the unprivileged
// postgres user when we are root, since initdb and postgres refuse root.
func currentRunner() (runner, error) {
	if os.Geteuid() != 0 {
		gids, _ := os.Getgroups()
		return runner{uid: os.Geteuid(), gid: os.Getegid(), gids: append(gids, os.Getegid())}, nil
	}
	u, err := user.Lookup(unprivilegedUser)
	if err != nil {
		return runner{}, fmt.Errorf("running as root, initdb needs an unprivileged user %q (create one, e.g. `useradd --system --home-dir /var/lib/postgresql %s`, run as a non-root user, or set DATABASE_URL): %w",
			unprivilegedUser, unprivilegedUser, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return runner{}, fmt.Errorf("parsing ids of user %s: %w", u.Username, err)
	}
	if uid == 0 {
		return runner{}, fmt.Errorf("user %q has uid 0; initdb needs an unprivileged user (or set DATABASE_URL)", u.Username)
	}
	r := runner{uid: uid, gid: gid, gids: []int{gid}, name: u.Username, home: u.HomeDir}
	groups := []uint32{uint32(gid)}
	if ids, err := u.GroupIds(); err == nil {
		for _, s := range ids {
			if g, err := strconv.Atoi(s); err == nil && g != gid {
				r.gids = append(r.gids, g)
				groups = append(groups, uint32(g))
			}
		}
	}
	r.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}
	return r, nil
}

// command builds an exec.Cmd for a PostgreSQL binary.
func (r runner) command(ctx context.Context, bin string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	// "/" is always reachable, unlike our cwd, which the postgres user may
	// not be allowed to enter.
	cmd.Dir = "/"
	cmd.Env = r.env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: r.cred}
	// Never hang on output pipes held by a stray grandchild.
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// env is our environment without PG* variables (PGDATA, PGPORT, PGHOST,
// PGOPTIONS... would override what we pass explicitly), and with HOME/USER
// of the postgres user when running as it.
func (r runner) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") {
			continue
		}
		if r.cred != nil && (strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "USER=") || strings.HasPrefix(kv, "LOGNAME=")) {
			continue
		}
		env = append(env, kv)
	}
	if r.cred != nil {
		env = append(env, "HOME="+r.home, "USER="+r.name, "LOGNAME="+r.name)
	}
	return env
}

// mkdirAll creates dir and any missing parents. When running postgres as
// another user, the directories it creates are made 0755 regardless of umask
// so that user can reach Dir/data and Dir/postgres.log.
func mkdirAll(dir string, r runner) error {
	var created []string
	for p := dir; ; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil || p == filepath.Dir(p) {
			break
		}
		created = append(created, p)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if r.cred != nil {
		for _, p := range created {
			if err := os.Chmod(p, 0o755); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkSearchable verifies that user r can traverse every directory from /
// down to dir, so that postgres running as r can reach its data dir; without
// this the failure would surface as an obscure chdir/permission error.
func checkSearchable(dir string, r runner) error {
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("checking access to %s: %w", p, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		perm := fi.Mode().Perm()
		var bit fs.FileMode
		switch {
		case int(st.Uid) == r.uid:
			bit = 0o100
		case slices.Contains(r.gids, int(st.Gid)):
			bit = 0o010
		default:
			bit = 0o001
		}
		if perm&bit == 0 {
			return fmt.Errorf("postgres runs as user %s (initdb refuses root), which cannot reach %s because %s (mode %v, uid %d) is not searchable by it: "+
				"use a cluster dir it can reach, grant access (e.g. chmod o+x %s), or set DATABASE_URL",
				r.name, dir, p, perm, st.Uid, p)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// lockFile opens path and takes a flock on it (how is LOCK_EX or LOCK_SH,
// optionally with LOCK_NB to fail at once with EWOULDBLOCK). Without LOCK_NB
// it polls so that ctx can cancel the wait; waiting is called once if the
// lock is busy. Closing the returned file releases the lock.
func lockFile(ctx context.Context, path string, how int, waiting func()) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	delay := 10 * time.Millisecond
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || how&syscall.LOCK_NB != 0 {
			f.Close()
			return nil, err
		}
		if waiting != nil {
			waiting()
			waiting = nil
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 250*time.Millisecond)
	}
}

// waitReady retries SELECT 1 with backoff until it succeeds or timeout
// passes. pg_ctl -w already waits for startup, but a reused server may still
// be recovering, and this also proves the socket URL is right.
func waitReady(ctx context.Context, url string, timeout time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	delay := 25 * time.Millisecond
	for {
		err := ping(wctx, url)
		if err == nil {
			return nil
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("no answer within %s: %w", timeout, err)
		case <-time.After(delay):
		}
		delay = min(delay*2, time.Second)
	}
}

func ping(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, "SELECT 1")
	return err
}

// createDatabase creates database name unless it exists.
func createDatabase(ctx context.Context, url, name string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("connecting to create database %s: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("checking for database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	// A concurrent creator (not serialised by our lock) may have won.
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" {
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating database %s: %w", name, err)
	}
	return nil
}

// quoteConnValue quotes a keyword/value connection string value when needed.
func quoteConnValue(s string) string {
	if s != "" && !strings.ContainsAny(s, " '\\\t\n") {
		return s
	}
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, `'`, `\'`)
	return "'" + s + "'"
}
