// Package s3test runs a real S3-compatible server for tests: SeaweedFS's
// weed, built once from its module into the user's cache directory
// (os.UserCacheDir()/leasehold/seaweedfs-<version>/weed; .ci/run builds it
// before the tests) and started per test on free ports of 127.0.0.1, with
// one identity so that requests are signed for real. Imported by tests
// only.
package s3test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Module and Version are the SeaweedFS release the tests run.
const (
	Module  = "github.com/seaweedfs/seaweedfs"
	Version = "v0.0.0-20261109003541-7506e5f91cd6"
)

// The identity the server accepts (every action on every bucket).
const (
	AccessKey = "leasehold-test"
	SecretKey = "leasehold-test-secret-key"
)

// Server is a running weed server with its S3 gateway.
type Server struct {
	// Endpoint is the S3 gateway's URL, http://127.0.0.1:PORT.
	Endpoint string
}

// Env returns the variables that configure Leasehold for this server
// (LEASEHOLD_ARTIFACTS aside).
func (s *Server) Env() []string {
	return []string{
		"AWS_ENDPOINT_URL=" + s.Endpoint, "AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=" + AccessKey, "AWS_SECRET_ACCESS_KEY=" + SecretKey,
		"LEASEHOLD_S3_PATH_STYLE=true",
	}
}

// Getenv reads Env as os.Getenv would.
func (s *Server) Getenv(name string) string {
	for _, kv := range s.Env() {
		if k, v, _ := strings.Cut(kv, "="); k == name {
			return v
		}
	}
	return ""
}

// Start runs a weed server for t, stopped (and its data removed) at
// cleanup. It fails t when weed cannot be built or does not answer.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := startFor(cleanupFunc(t.Cleanup))
	if err != nil {
		t.Fatalf("starting SeaweedFS: %v", err)
	}
	return s
}

type cleanupFunc func(func())

func (c cleanupFunc) Cleanup(fn func()) { c(fn) }

// startFor starts a server whose process and files c's cleanups remove.
func startFor(c interface{ Cleanup(func()) }) (*Server, error) {
	bin, err := Binary(context.Background(), nil)
	if err != nil {
		return nil, fmt.Errorf("building SeaweedFS: %w", err)
	}
	dir, err := os.MkdirTemp("", "leasehold-s3test-")
	if err != nil {
		return nil, err
	}
	c.Cleanup(func() { _ = os.RemoveAll(dir) })
	cfg := filepath.Join(dir, "s3.json")
	ident := map[string]any{"identities": []any{map[string]any{
		"name":        "leasehold",
		"credentials": []any{map[string]string{"accessKey": AccessKey, "secretKey": SecretKey}},
		"actions":     []string{"Admin", "Read", "List", "Tagging", "Write"},
	}}}
	b, _ := json.Marshal(ident)
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o750); err != nil {
		return nil, err
	}
	var lastErr error
	for range 3 { // a port taken between picking and binding: pick again
		s, cmd, logs, err := start(bin, data, cfg)
		if err == nil {
			c.Cleanup(func() { stop(cmd) })
			return s, nil
		}
		stop(cmd)
		lastErr = fmt.Errorf("%w\n%s", err, tail(logs.Bytes(), 4000))
	}
	return nil, lastErr
}

func start(bin, data, cfg string) (*Server, *exec.Cmd, *bytes.Buffer, error) {
	p, err := freePorts(8)
	if err != nil {
		return nil, nil, &bytes.Buffer{}, err
	}
	args := []string{"server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir=" + data,
		"-master.port=" + p[0], "-master.port.grpc=" + p[1],
		"-volume.port=" + p[2], "-volume.port.grpc=" + p[3],
		"-filer.port=" + p[4], "-filer.port.grpc=" + p[5],
		"-s3", "-s3.port=" + p[6], "-s3.port.grpc=" + p[7], "-s3.config=" + cfg,
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.iam=false",
		"-master.volumeSizeLimitMB=64", "-volume.max=0", "-volume.preStopSeconds=0",
	}
	cmd := exec.Command(bin, args...)
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Dir = data
	// Its own group, so that stop reaches every process; and killed with
	// the test binary should that die without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, nil, &logs.b, err
	}
	s := &Server{Endpoint: "http://127.0.0.1:" + p[6]}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return nil, nil, logs.bytes(), fmt.Errorf("weed exited: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		if ready(s.Endpoint) {
			return s, cmd, logs.bytes(), nil
		}
	}
	return nil, cmd, logs.bytes(), errors.New("the S3 gateway did not answer within 90s")
}

// ready reports whether the gateway answers S3 (an unsigned ListBuckets
// is refused with an S3 error document once it serves).
func ready(endpoint string) bool {
	resp, err := http.Get(endpoint + "/")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusOK
}

func stop(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_, _ = cmd.Process.Wait()
}

func freePorts(n int) ([]string, error) {
	var out []string
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		out = append(out, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	}
	return out, nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
