package e2e

import (
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

	"github.com/leasehold/leasehold/internal/testutil"
)

// caddy is a real Caddy in front of the server, running a Caddyfile (the
// shipped deploy/Caddyfile, or a variant of it) on plain HTTP
// (LEASEHOLD_DOMAIN=http://127.0.0.1:port), so that the worker needs no
// CA. The site address and the upstream come from the environment, as in
// production (LEASEHOLD_DOMAIN, LEASEHOLD_UPSTREAM); a global block turns
// off Caddy's admin endpoint (one port for every Caddy of the machine),
// and its autosave goes to a directory of the test.
type caddy struct {
	e    *env
	addr string
	// upstreams, when set, is LEASEHOLD_UPSTREAMS (deploy/multi): the
	// servers behind it, space-separated.
	upstreams string
	dir       string
	cmd       *exec.Cmd
	out       *testutil.LockedBuffer
	// exited is closed when the Caddy started last has exited.
	exited <-chan struct{}
}

// shippedCaddyfile is deploy/Caddyfile's text.
func shippedCaddyfile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../deploy/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// withGlobalOption adds option to caddyfile's global options block (a
// first block whose opening line is "{" alone, as the shipped file has),
// or puts one in front: Caddy takes one such block, first.
func withGlobalOption(caddyfile, option string) string {
	lines := strings.SplitAfter(caddyfile, "\n")
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if t == "{" {
			return strings.Join(lines[:i+1], "") + "\t" + option + "\n" + strings.Join(lines[i+1:], "")
		}
		break
	}
	return "{\n\t" + option + "\n}\n\n" + caddyfile
}

// startCaddy runs Caddy with caddyfile in front of e's server, and waits
// until it proxies it.
func (e *env) startCaddy(caddyfile string) *caddy {
	e.t.Helper()
	return e.startCaddyBefore(caddyfile, nil)
}

// startCaddyBefore is startCaddy in front of the servers at addrs
// (LEASEHOLD_UPSTREAMS) rather than e's one server.
func (e *env) startCaddyBefore(caddyfile string, addrs []string) *caddy {
	e.t.Helper()
	if _, err := exec.LookPath("caddy"); err != nil {
		e.t.Skip("caddy is not installed")
	}
	dir := e.t.TempDir()
	conf := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(conf, []byte(withGlobalOption(caddyfile, "admin off")), 0o600); err != nil {
		e.t.Fatal(err)
	}
	// The port is free when chosen, but another process of a busy machine
	// may take it before Caddy binds it: then another.
	for try := 1; ; try++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			e.t.Fatal(err)
		}
		c := &caddy{e: e, addr: ln.Addr().String(), dir: dir, upstreams: strings.Join(addrs, " ")}
		ln.Close()
		if err := c.run(); err == nil {
			return c
		} else if try == 5 || !strings.Contains(err.Error(), "address already in use") {
			e.t.Fatal(err)
		}
	}
}

// start starts Caddy (again, after stop) on the same port.
func (c *caddy) start() {
	c.e.t.Helper()
	if err := c.run(); err != nil {
		c.e.t.Fatal(err)
	}
}

// run starts Caddy and waits until it proxies the server; an error when
// it exits first (its output says why) or never does.
func (c *caddy) run() error {
	t := c.e.t
	t.Helper()
	c.cmd = exec.Command("caddy", "run", "--config", filepath.Join(c.dir, "Caddyfile"), "--adapter", "caddyfile")
	c.cmd.Env = append(os.Environ(), "LEASEHOLD_DOMAIN=http://"+c.addr, "LEASEHOLD_UPSTREAM="+c.e.addr,
		"LEASEHOLD_UPSTREAMS="+c.upstreams, "XDG_DATA_HOME="+c.dir, "XDG_CONFIG_HOME="+c.dir, "HOME="+c.dir)
	c.out = &testutil.LockedBuffer{}
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if err := c.cmd.Start(); err != nil {
		return fmt.Errorf("starting caddy: %w", err)
	}
	cmd, out := c.cmd, c.out
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	c.exited = exited
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("--- output of caddy ---\n%s", out.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if resp, err := http.Get(c.url() + "/health/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("caddy exited before it proxied the server: %s", out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("caddy did not proxy the server within 20 s:\n%s", out.String())
		}
	}
}

// stop stops Caddy (SIGTERM, as a restart does) and waits until it is gone:
// its port refuses connections from then on.
func (c *caddy) stop() {
	c.e.t.Helper()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

func (c *caddy) url() string { return "http://" + c.addr }
