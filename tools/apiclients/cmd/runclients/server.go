package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// server is a Leasehold server this program started, with its log.
type server struct {
	cmd        *exec.Cmd
	env        []string
	exited     chan struct{} // closed when the process has ended
	waitErr    error         // how it ended, once exited is closed
	url        string        // http://127.0.0.1:PORT
	adminToken string

	mu  sync.Mutex
	log bytes.Buffer // stdout and stderr
}

// startServer starts bin in dir on dbURL (the private cluster in
// dir/.leasehold/pg when empty), on a free loopback port, and waits until
// /health/ready answers 200. Nothing of the caller's LEASEHOLD_* or
// DATABASE_URL reaches it.
func startServer(ctx context.Context, bin, dir, dbURL string) (*server, error) {
	s := &server{adminToken: "lh_clients_" + rand.Text(), exited: make(chan struct{})}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEASEHOLD_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			s.env = append(s.env, kv)
		}
	}
	s.env = append(s.env, "LEASEHOLD_API_TOKEN="+s.adminToken, "LEASEHOLD_ADMIN_PASSWORD="+rand.Text())
	if dbURL != "" {
		s.env = append(s.env, "DATABASE_URL="+dbURL)
	}

	// Port 0 and the address the server logs: no race for a free port.
	s.cmd = exec.Command(bin, "--addr", "127.0.0.1:0", "--log-format", "json")
	s.cmd.Dir, s.cmd.Env = dir, s.env
	s.cmd.Stdout = s.logWriter()
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	dieWithParent(s.cmd)
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the server: %w", err)
	}
	listening := make(chan string, 1)
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			s.mu.Lock()
			s.log.Write(line)
			s.log.WriteByte('\n')
			s.mu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(line, &rec) == nil && rec.Msg == "server listening" {
				select {
				case listening <- rec.Addr:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	go func() {
		<-logDone // Wait closes the pipe: read it to the end first
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()

	fail := func(err error) (*server, error) {
		return nil, errors.Join(err, s.stop(), errors.New(s.logText()))
	}
	// The first start of a private cluster runs initdb: allow for it.
	select {
	case s.url = <-listening:
	case <-s.exited:
		return fail(errors.New("the server ended before listening"))
	case <-ctx.Done():
		return fail(ctx.Err())
	case <-time.After(2 * time.Minute):
		return fail(errors.New("the server did not listen within 2 minutes"))
	}
	if err := s.waitReady(ctx, 30*time.Second); err != nil {
		return fail(err)
	}
	return s, nil
}

func (s *server) waitReady(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/health/ready", nil)
		if err != nil {
			return err
		}
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s/health/ready: %w (last: %v)", s.url, ctx.Err(), err)
		case <-s.exited:
			return errors.New("the server ended while starting")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// workerToken creates a worker token with `server token create`, which
// prints the token alone on its last line.
func (s *server) workerToken(ctx context.Context, name string) (string, error) {
	cmd := exec.CommandContext(ctx, s.cmd.Path, "token", "create", "--role", "worker", "--name", name)
	cmd.Dir, cmd.Env = s.cmd.Dir, s.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("creating a worker token: %w\n%s", err, stderr.Bytes())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	token := strings.TrimSpace(lines[len(lines)-1])
	if token == "" {
		return "", fmt.Errorf("creating a worker token: no token in %q", out)
	}
	return token, nil
}

// stop sends SIGTERM and waits for a graceful exit (which also stops a
// private cluster); after 30 s it kills the server.
func (s *server) stop() error {
	select {
	case <-s.exited:
		return fmt.Errorf("the server ended by itself: %v", s.waitErr)
	default:
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping the server: %w", err)
	}
	select {
	case <-s.exited:
		if s.waitErr != nil {
			return fmt.Errorf("the server did not stop cleanly: %w", s.waitErr)
		}
		return nil
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
		return errors.New("the server did not stop within 30 s of SIGTERM: killed")
	}
}

func (s *server) logWriter() io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.log.Write(p)
	})
}

func (s *server) logText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return "server log:\n" + s.log.String()
}

func (s *server) dumpLog(w io.Writer) { fmt.Fprintln(w, s.logText()) }

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// createDatabase creates a database with a random name on the server of
// base (a URL or a keyword/value string) and returns its URL and a func
// that drops it.
func createDatabase(ctx context.Context, base string) (string, func() error, error) {
	name := "lh_clients_" + strings.ToLower(rand.Text()[:16])
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", nil, fmt.Errorf("connecting to TEST_DATABASE_URL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("creating database %s: %w", name, err)
	}
	drop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return fmt.Errorf("dropping database %s: %w", name, err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("dropping database %s: %w", name, err)
		}
		return nil
	}
	if u, err := url.Parse(base); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + name
		return u.String(), drop, nil
	}
	return base + " dbname=" + name, drop, nil
}
