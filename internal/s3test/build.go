package s3test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
)

// Binary returns the path of the weed binary, building it when it is
// missing: `go mod download` of the module, a writable copy of its tree
// (the module cache is read-only, and `go install` refuses the module for
// its replace directives), `go build ./weed`. A file lock keeps test
// binaries running side by side from building it twice. log, when set,
// hears the build's output. $LEASEHOLD_WEED names a binary to use instead.
func Binary(ctx context.Context, log io.Writer) (string, error) {
	if p := os.Getenv("LEASEHOLD_WEED"); p != "" {
		return p, nil
	}
	buildOnce.Do(func() { built, buildErr = build(ctx, log) })
	return built, buildErr
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

func build(ctx context.Context, log io.Writer) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "leasehold", "seaweedfs-"+Version)
	bin := filepath.Join(dir, "weed")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil // built by another process while this one waited
	}
	if log == nil {
		log = io.Discard
	}
	var out bytes.Buffer
	dl := exec.CommandContext(ctx, "go", "mod", "download", "-json", Module+"@"+Version)
	dl.Dir, dl.Stdout, dl.Stderr = os.TempDir(), &out, log
	dl.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if err := dl.Run(); err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", Module, Version, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out.Bytes(), &mod); err != nil || mod.Dir == "" {
		return "", fmt.Errorf("go mod download: no module directory in %q", out.String())
	}
	src, err := os.MkdirTemp("", "seaweedfs-src-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	cp := exec.CommandContext(ctx, "cp", "-r", mod.Dir+"/.", src)
	cp.Stderr = log
	if err := cp.Run(); err != nil {
		return "", fmt.Errorf("copying the module: %w", err)
	}
	if err := exec.CommandContext(ctx, "chmod", "-R", "u+w", src).Run(); err != nil {
		return "", fmt.Errorf("making the copy writable: %w", err)
	}
	tmp := bin + ".tmp"
	gb := exec.CommandContext(ctx, "go", "build", "-o", tmp, "./weed")
	gb.Dir, gb.Stdout, gb.Stderr = src, log, log
	gb.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-buildvcs=false")
	if err := gb.Run(); err != nil {
		return "", fmt.Errorf("go build ./weed: %w", err)
	}
	return bin, os.Rename(tmp, bin)
}

// lockedBuffer collects a process's output from its two pipes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) bytes() *bytes.Buffer {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.NewBuffer(append([]byte(nil), l.b.Bytes()...))
}
