// Package e2e runs Leasehold as a user does: real server and worker
// processes on a real PostgreSQL, killed with real signals.
package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/db/dbtest"
	"github.com/leasehold/leasehold/internal/testutil"
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "leasehold-e2e-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	for _, name := range []string{"server", "worker"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), "../cmd/"+name)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building", name, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is one isolated Leasehold installation: its own database, a server
// process and any number of worker processes.
type env struct {
	t         *testing.T
	ctx       context.Context
	dbURL     string
	pool      *pgxpool.Pool
	token     string
	apiURL    string
	addr      string // the server's, kept across restarts
	artifacts string // the server's artifact storage
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, dbtest.NewDatabase(t))
}

// newEnvOn is an env on a database the caller provides (newEnv makes
// one of dbtest's; a restart test brings its own cluster's).
func newEnvOn(t *testing.T, url string) *env {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return &env{t: t, ctx: ctx, dbURL: url, pool: pool, token: "lh_test_" + hex.EncodeToString(b)}
}

// proc is a running program whose output is kept for failure reports.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *testutil.LockedBuffer
	done chan struct{}
	err  error
}

func (e *env) spawn(name string, args []string, extraEnv ...string) *proc {
	e.t.Helper()
	return e.spawnIn("", name, args, extraEnv...)
}

// spawnIn is spawn with dir as the program's working directory ("": the
// test's).
func (e *env) spawnIn(dir, name string, args []string, extraEnv ...string) *proc {
	e.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, strings.Fields(name)[0]), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DATABASE_URL="+e.dbURL, "LEASEHOLD_API_TOKEN="+e.token)
	cmd.Env = append(cmd.Env, extraEnv...)
	p := &proc{name: name, cmd: cmd, out: &testutil.LockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("starting %s: %v", name, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	e.t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			<-p.done
		}
		if e.t.Failed() {
			e.t.Logf("--- output of %s ---\n%s", name, p.out.String())
		}
	})
	return p
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signalling %s: %v", p.name, err)
	}
}

func (p *proc) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %v", p.name, timeout)
		return nil
	}
}

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// startServer runs the server and waits until it is ready: on a free port
// the first time, on the same one after that.
func (e *env) startServer() *proc {
	e.t.Helper()
	return e.startServerWith()
}

// startServerWith is startServer with more environment.
func (e *env) startServerWith(extraEnv ...string) *proc {
	e.t.Helper()
	if e.addr == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			e.t.Fatal(err)
		}
		e.addr = ln.Addr().String()
		ln.Close()
		e.apiURL = "http://" + e.addr
		e.artifacts = e.t.TempDir()
	}
	p := e.spawn("server", nil, append([]string{"LEASEHOLD_ADDR=" + e.addr, "LEASEHOLD_ARTIFACTS=" + e.artifacts}, extraEnv...)...)
	e.eventually("server ready", 30*time.Second, func() bool {
		resp, err := http.Get(e.apiURL + "/health/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

func (e *env) startWorker(id string, args ...string) *proc {
	e.t.Helper()
	return e.spawn("worker "+id, append([]string{"--id", id}, args...))
}

// client is a client of the admin API with the server's admin token.
func (e *env) client() *client.Client { return client.New(e.apiURL, e.token) }

// waitFor waits through the admin API until job id is in one of states.
func (e *env) waitFor(id int64, timeout time.Duration, states ...client.State) client.JobDetail {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, timeout)
	defer cancel()
	d, err := e.client().WaitFor(ctx, id, states...)
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

func (e *env) eventually(what string, timeout time.Duration, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(e.ctx, sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return n
}
