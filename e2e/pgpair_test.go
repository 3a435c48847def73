package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A pgPair is a PostgreSQL primary and a streaming standby of it: two
// private clusters made from the machine's own binaries (initdb, then
// pg_basebackup -R of the primary), listening on private TCP ports of
// 127.0.0.1 and on sockets in a temporary directory of their own. The
// server and workers reach them as a production deployment does, with a
// multi-host URL that asks for the one that accepts writes.
type pgPair struct {
	t                *testing.T
	bin              string
	run              pgRunner
	root             string
	primary, standby *pgNode
}

// pgNode is one cluster of a pair.
type pgNode struct {
	name string
	data string
	port int
	log  string
}

// pgPairOptions says how the pair replicates.
type pgPairOptions struct {
	// Synchronous makes the primary wait for the standby to flush each
	// commit before acknowledging it (synchronous_standby_names = '*',
	// synchronous_commit = on): a commit the primary acknowledged
	// survives the primary's loss.
	Synchronous bool
}

// pgRunner runs PostgreSQL's programs: as ourselves, or, when we are
// root (initdb and postgres refuse root), as the postgres user.
type pgRunner struct {
	cred     *syscall.Credential
	uid, gid int
}

// newPGPair starts a primary and a standby streaming from it, with a
// database "leasehold" on both, and stops both when the test ends. It
// skips the test when PostgreSQL's server programs are not installed.
func newPGPair(t *testing.T, opts pgPairOptions) *pgPair {
	t.Helper()
	bin := pgBinDir(t)
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("the pair's kill and freeze find a cluster's processes in /proc, which this system lacks")
	}
	run := pgRunner{uid: os.Getuid(), gid: os.Getgid()}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("running as root, PostgreSQL needs an unprivileged user \"postgres\" to run as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		run = pgRunner{cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, uid: uid, gid: gid}
	}
	// Short, since the sockets live in it (a socket path is at most 107
	// bytes), and the postgres user's, since it creates both data dirs.
	root, err := os.MkdirTemp("", "lh-ha-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(root, run.uid, run.gid); err != nil {
		t.Fatal(err)
	}
	p := &pgPair{t: t, bin: bin, run: run, root: root}
	ports := freePorts(t, 2)
	p.primary = &pgNode{name: "primary", data: filepath.Join(root, "primary"), port: ports[0], log: filepath.Join(root, "primary.log")}
	p.standby = &pgNode{name: "standby", data: filepath.Join(root, "standby"), port: ports[1], log: filepath.Join(root, "standby.log")}
	t.Cleanup(func() {
		for _, n := range []*pgNode{p.primary, p.standby} {
			// A frozen cluster cannot stop; a killed one has nothing left.
			p.signalAll(n, syscall.SIGCONT)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, _ = p.command(ctx, "pg_ctl", "stop", "-D", n.data, "-m", "immediate", "-w").CombinedOutput()
			cancel()
			if t.Failed() {
				if b, err := os.ReadFile(n.log); err == nil {
					t.Logf("--- %s's log (port %d) ---\n%s", n.name, n.port, tail(b, 60))
				}
			}
		}
		os.RemoveAll(root)
	})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p.must(ctx, "initdb", "-D", p.primary.data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	conf := fmt.Sprintf(`
# leasehold e2e: a primary on a private port
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
max_connections = 200
# Only processes are killed here, never the machine: the page cache
# keeps every write, so there is no need to wait for the disk.
fsync = off
synchronous_commit = on
wal_keep_size = '256MB'
log_line_prefix = '%%m [%%p] '
log_connections = on
`, p.primary.port, root)
	p.appendConf(p.primary, conf)
	p.start(ctx, p.primary)
	conn, err := pgx.Connect(ctx, p.primary.url("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE leasehold"); err != nil {
		t.Fatal(err)
	}
	p.must(ctx, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(p.primary.port), "-U", "postgres",
		"-D", p.standby.data, "-R", "-X", "stream", "-c", "fast", "--no-sync")
	// Promoted, the standby has no standby of its own to wait for.
	p.appendConf(p.standby, fmt.Sprintf("\n# leasehold e2e: the standby\nport = %d\nsynchronous_standby_names = ''\ncluster_name = 'standby'\n", p.standby.port))
	p.start(ctx, p.standby)
	p.awaitStreaming(ctx, conn, "async")
	if opts.Synchronous {
		// Only now: until a standby streams, every commit would wait.
		for _, s := range []string{"ALTER SYSTEM SET synchronous_standby_names = '*'", "SELECT pg_reload_conf()"} {
			if _, err := conn.Exec(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		p.awaitStreaming(ctx, conn, "sync")
	}
	conn.Close(ctx)
	return p
}

// awaitStreaming waits until the primary streams to the standby in mode
// (pg_stat_replication's sync_state: async or sync).
func (p *pgPair) awaitStreaming(ctx context.Context, conn *pgx.Conn, mode string) {
	p.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = $1", mode).Scan(&n)
		if err != nil {
			p.t.Fatal(err)
		}
		if n == 1 {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the standby is not streaming (%s) after 30s", mode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// URL is what the server and workers are given: both hosts, the one
// that accepts writes chosen, and a bounded connect.
func (p *pgPair) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/leasehold?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		p.primary.port, p.standby.port)
}

// url reaches this node alone, whatever it is now, for the test's own
// administration: its sessions write even while the cluster defaults to
// read-only transactions.
func (n *pgNode) url(dbname string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable&connect_timeout=2&default_transaction_read_only=off", n.port, dbname)
}

// readURL reaches the standby alone, as a server's read replica
// (LEASEHOLD_READ_DATABASE_URL): read-only, and given up fast.
func (p *pgPair) readURL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/leasehold?sslmode=disable&connect_timeout=1", p.standby.port)
}

// killPrimary kills the primary's postmaster and every process of its
// cluster with SIGKILL, as when its machine is lost, and waits until
// they are gone. Nothing of it comes back.
func (p *pgPair) killPrimary() { p.kill(p.primary) }

// kill kills n's postmaster and every process of its cluster with
// SIGKILL and waits until they are gone.
func (p *pgPair) kill(n *pgNode) {
	p.t.Helper()
	pids := p.signalAll(n, syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for processAlive(pid) {
			if time.Now().After(deadline) {
				p.t.Fatalf("process %d of the %s outlived SIGKILL", pid, n.name)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// promote makes the standby the primary (pg_ctl promote) and returns
// the moment it accepts writes, as seen from a session opened before.
func (p *pgPair) promote() {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := p.connect(ctx, p.standby, "leasehold")
	defer conn.Close(ctx)
	p.must(ctx, "pg_ctl", "promote", "-D", p.standby.data, "-W")
	for {
		var recovering bool
		if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovering); err != nil {
			p.t.Fatal(err)
		}
		if !recovering {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stallReplication stops the primary's WAL sender (SIGSTOP), so that
// the standby falls behind an asynchronous primary by whatever it commits
// until the returned function lets the sender go on. (Stopping the
// standby's receiver would not do: what was sent waits in its socket.)
func (p *pgPair) stallReplication() (resume func()) {
	p.t.Helper()
	raw, err := os.ReadFile(filepath.Join(p.primary.data, "postmaster.pid"))
	if err != nil {
		p.t.Fatal(err)
	}
	pm, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
	for _, c := range childrenOf(pm) {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c))
		if bytes.Contains(cmdline, []byte("walsender")) {
			if err := syscall.Kill(c, syscall.SIGSTOP); err != nil {
				p.t.Fatal(err)
			}
			return func() { _ = syscall.Kill(c, syscall.SIGCONT) }
		}
	}
	p.t.Fatal("the primary has no WAL sender")
	return nil
}

// freeze stops every process of n's cluster with SIGSTOP, postmaster
// first so that it starts no new one, as a hung machine or a VM paused by
// its host; thaw lets them go on.
func (p *pgPair) freeze(n *pgNode) { p.signalAll(n, syscall.SIGSTOP) }
func (p *pgPair) thaw(n *pgNode)   { p.signalAll(n, syscall.SIGCONT) }

// signalAll sends sig to n's postmaster, then to each of its children
// (listed after the postmaster got the signal), and returns their pids.
func (p *pgPair) signalAll(n *pgNode, sig syscall.Signal) []int {
	raw, err := os.ReadFile(filepath.Join(n.data, "postmaster.pid"))
	if err != nil {
		return nil
	}
	pm, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
	if err != nil || !processAlive(pm) {
		return nil
	}
	// The children are listed before the postmaster dies: orphans would
	// have another parent.
	children := childrenOf(pm)
	if err := syscall.Kill(pm, sig); err != nil {
		p.t.Errorf("signalling the %s's postmaster: %v", n.name, err)
	}
	if sig != syscall.SIGKILL {
		children = childrenOf(pm)
	}
	for _, c := range children {
		_ = syscall.Kill(c, sig)
	}
	return append([]int{pm}, children...)
}

// connect opens a session of the test's own on node n, trying again
// until ctx ends: each try is bounded by the URL's connect_timeout (2 s),
// and on a loaded CI machine a standby just cut off from its killed
// primary once took longer than that to answer ("failed to receive
// message: timeout"). The node logs every connection it receives
// (log_connections), so a failure shows whether the tries reached it.
func (p *pgPair) connect(ctx context.Context, n *pgNode, dbname string) *pgx.Conn {
	p.t.Helper()
	for try := 1; ; try++ {
		conn, err := pgx.Connect(ctx, n.url(dbname))
		if err == nil {
			return conn
		}
		if ctx.Err() != nil {
			p.t.Fatalf("connecting to the %s (port %d), %d tries: %v", n.name, n.port, try, err)
		}
		p.t.Logf("connecting to the %s (port %d), try %d: %v; trying again", n.name, n.port, try, err)
		time.Sleep(100 * time.Millisecond)
	}
}

// execSQL runs statements on node n alone.
func (p *pgPair) execSQL(n *pgNode, sqls ...string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn := p.connect(ctx, n, "leasehold")
	defer conn.Close(ctx)
	for _, s := range sqls {
		if _, err := conn.Exec(ctx, s); err != nil {
			p.t.Fatalf("%s on the %s: %v", s, n.name, err)
		}
	}
}

func (p *pgPair) start(ctx context.Context, n *pgNode) {
	p.t.Helper()
	for try := 1; ; try++ {
		before, _ := os.ReadFile(n.log) // pg_ctl -l appends: look at this try's lines only
		cmd := p.command(ctx, "pg_ctl", "start", "-D", n.data, "-w", "-t", "60", "-l", n.log)
		// Out of reach of a signal to our process group.
		cmd.SysProcAttr.Setpgid = true
		out, err := cmd.CombinedOutput()
		if err == nil {
			return
		}
		b, _ := os.ReadFile(n.log)
		// The port was free when freePorts looked, but another test's
		// server or an outgoing connection (both take ports of the same
		// ephemeral range) may have taken it since. start is each node's
		// first start, before anything has reached it, so it may move to
		// another port (the last port line of its configuration wins).
		// Seen once in .ci/run, for the standby.
		if try < 3 && len(b) >= len(before) && bytes.Contains(b[len(before):], []byte("Address already in use")) {
			n.port = freePorts(p.t, 1)[0]
			p.appendConf(n, fmt.Sprintf("\n# leasehold e2e: the port taken, try %d\nport = %d\n", try+1, n.port))
			p.t.Logf("the %s's port was taken meanwhile; starting it on %d", n.name, n.port)
			continue
		}
		p.t.Fatalf("starting the %s: %v\n%s\n%s", n.name, err, out, tail(b, 30))
	}
}

func (p *pgPair) appendConf(n *pgNode, conf string) {
	p.t.Helper()
	// Appending as root keeps the file the postgres user's.
	f, err := os.OpenFile(filepath.Join(n.data, "postgresql.conf"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		p.t.Fatal(err)
	}
	if _, err := f.WriteString(conf); err != nil {
		p.t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		p.t.Fatal(err)
	}
}

func (p *pgPair) must(ctx context.Context, prog string, args ...string) {
	p.t.Helper()
	if out, err := p.command(ctx, prog, args...).CombinedOutput(); err != nil {
		p.t.Fatalf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, out)
	}
}

func (p *pgPair) command(ctx context.Context, prog string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, prog), args...)
	cmd.Dir = p.root
	for _, kv := range os.Environ() {
		// PGDATA, PGPORT, PGHOST… would override what is passed.
		if !strings.HasPrefix(kv, "PG") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.run.cred}
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// pgBinDir finds initdb, pg_ctl and pg_basebackup: beside pg_ctl on
// PATH, else in the newest /usr/lib/postgresql/*/bin; it skips the test
// when there are none.
func pgBinDir(t *testing.T) string {
	t.Helper()
	has := func(dir string) bool {
		for _, prog := range []string{"initdb", "pg_ctl", "pg_basebackup"} {
			if fi, err := os.Stat(filepath.Join(dir, prog)); err != nil || fi.Mode().Perm()&0o111 == 0 {
				return false
			}
		}
		return true
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil && has(filepath.Dir(p)) {
		return filepath.Dir(p)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if has(d) {
			return d
		}
	}
	t.Skip("PostgreSQL's server programs (initdb, pg_ctl, pg_basebackup) are not on PATH nor in /usr/lib/postgresql/*/bin: install PostgreSQL (apt-get install postgresql) to run the primary+standby tests")
	return ""
}

// freePorts returns n TCP ports of 127.0.0.1 that were free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _ := procStat(c); ppid == pid {
			out = append(out, c)
		}
	}
	return out
}

// processAlive reports whether pid runs; a zombie (which nobody may reap
// in a container without an init) counts as gone.
func processAlive(pid int) bool {
	_, state := procStat(pid)
	return state != "" && state != "Z" && state != "X"
}

// procStat reads a process's parent and state from /proc/PID/stat.
func procStat(pid int) (ppid int, state string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, ""
	}
	// The command name, in parentheses, may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, ""
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, ""
	}
	ppid, _ = strconv.Atoi(f[1])
	return ppid, f[0]
}

func tail(b []byte, lines int) string {
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}
