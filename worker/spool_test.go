package worker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// The spool holds at most its bound: an artifact that does not fit is
// refused whole (nothing of it stays, on disk or in the count), and room
// comes back as artifacts leave.
func TestSpoolBound(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{"", t.TempDir()} {
		name := "Memory"
		if dir != "" {
			name = "Directory"
		}
		t.Run(name, func(t *testing.T) {
			s, err := OpenSpool(dir, 100)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			a, err := s.put("a.png", bytes.NewReader(make([]byte, 60)))
			if err != nil || a.size != 60 || s.Used() != 60 {
				t.Fatalf("first put: %v, size %d, used %d", err, a.size, s.Used())
			}
			// Larger than one read, so that it fails part way through.
			_, err = s.put("b.png", io.MultiReader(bytes.NewReader(make([]byte, 30)), bytes.NewReader(make([]byte, 30))))
			if !errors.Is(err, ErrSpoolFull) || !strings.Contains(err.Error(), "100 bytes at most") {
				t.Fatalf("second put: %v, want ErrSpoolFull", err)
			}
			if s.Used() != 60 || len(spooledFiles(t, s)) != min(len(dir), 1) {
				t.Fatalf("after a refusal: used %d, files %v", s.Used(), spooledFiles(t, s))
			}
			body, err := a.open()
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := io.ReadAll(body); len(got) != 60 {
				t.Fatalf("read back %d bytes", len(got))
			}
			body.Close()
			a.remove()
			if s.Used() != 0 || len(spooledFiles(t, s)) != 0 {
				t.Fatalf("after remove: used %d, files %v", s.Used(), spooledFiles(t, s))
			}
			if _, err := s.put("c.png", bytes.NewReader(make([]byte, 100))); err != nil {
				t.Fatalf("a file of exactly the bound: %v", err)
			}
		})
	}
	if _, err := OpenSpool("", 0); err == nil {
		t.Fatal("a spool of 0 bytes opened")
	}
}

func spooledFiles(t *testing.T, s *Spool) []string {
	t.Helper()
	if s.Dir() == "" {
		return nil
	}
	entries, err := os.ReadDir(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() != "lock" {
			names = append(names, e.Name())
		}
	}
	return names
}

// At start, a spool removes what a killed worker left (its lock is free),
// and leaves alone the directory of a worker still running on the same
// spool directory; closed, a spool removes its own.
func TestSpoolCleansWhatDeadWorkersLeft(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dead := filepath.Join(dir, "w-dead")
	if err := os.MkdirAll(dead, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"lock", "a-1", "a-2"} {
		if err := os.WriteFile(filepath.Join(dead, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	live, err := OpenSpool(dir, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := live.put("kept.png", strings.NewReader("pending")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a dead worker's spool is still there: %v", err)
	}
	other, err := OpenSpool(dir, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if files := spooledFiles(t, live); len(files) != 1 {
		t.Fatalf("a live worker's spool was cleaned by another's start: %v", files)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(other.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a closed spool's directory is still there: %v", err)
	}
	live.Close()
}

// flakyBackend refuses the first uploads with a transient error (a
// connection refused), records what it stores, and can refuse one name.
type flakyBackend struct {
	Backend
	mu       sync.Mutex
	failures int
	refuse   string
	stored   []string
	progress []string
}

func (b *flakyBackend) UploadArtifact(_ context.Context, _ queue.Lease, name string, _ int32, r io.Reader) (queue.Artifact, error) {
	body, _ := io.ReadAll(r)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failures > 0 {
		b.failures--
		return queue.Artifact{}, syscall.ECONNREFUSED
	}
	if name == b.refuse {
		return queue.Artifact{}, &queue.ValidationError{Field: "file", Message: "not an image"}
	}
	if string(body) != "bytes of "+name {
		return queue.Artifact{}, errors.New("wrong bytes for " + name)
	}
	b.stored = append(b.stored, name)
	return queue.Artifact{Name: name}, nil
}

func (b *flakyBackend) Progress(_ context.Context, _ queue.Lease, _ int32, _ float64, msg string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.progress = append(b.progress, msg)
	return nil
}

// An attempt's uploads go in order, each retried through transient
// errors from the spooled bytes; one refused is recorded on the attempt
// with its name and why; settling waits for all of them, and the spool
// is empty afterwards.
func TestUploadsInOrderThroughFailures(t *testing.T) {
	t.Parallel()
	spool, err := OpenSpool(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer spool.Close()
	b := &flakyBackend{failures: 5, refuse: "step-03.png"}
	u := newUploads(b, spool, queue.Lease{JobID: 1, Token: 1}, &jobLog{base: slog.New(slog.DiscardHandler)})
	var names []string
	for i := range 6 {
		name := "step-0" + string(rune('1'+i)) + ".png"
		names = append(names, name)
		if _, err := u.add(name, 0, strings.NewReader("bytes of "+name)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u.settle(ctx, time.Now().Add(30*time.Second))
	want := slices.Delete(slices.Clone(names), 2, 3)
	if !slices.Equal(b.stored, want) {
		t.Fatalf("stored %v, want %v", b.stored, want)
	}
	if len(b.progress) != 1 || !strings.HasPrefix(b.progress[0], "artifact step-03.png not stored: refused: ") {
		t.Fatalf("records %q", b.progress)
	}
	if spool.Used() != 0 || len(spooledFiles(t, spool)) != 0 {
		t.Fatalf("the spool holds %d bytes, %v", spool.Used(), spooledFiles(t, spool))
	}
}

// Uploads that cannot finish before the lease ends are cut in time for
// the outcome, and recorded as given up.
func TestUploadsGiveUpBeforeTheLeaseEnds(t *testing.T) {
	t.Parallel()
	spool, _ := OpenSpool("", 1<<20)
	b := &flakyBackend{failures: 1 << 30}
	u := newUploads(b, spool, queue.Lease{JobID: 1, Token: 1}, &jobLog{base: slog.New(slog.DiscardHandler)})
	if _, err := u.add("step-01.png", 0, strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	validUntil := time.Now().Add(2 * time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), validUntil)
	defer cancel()
	u.settle(ctx, validUntil)
	if left := time.Until(validUntil); left < 500*time.Millisecond {
		t.Fatalf("settling left %v of the lease for the outcome", left)
	}
	if len(b.progress) != 1 || !strings.HasPrefix(b.progress[0], "artifact step-01.png not stored: the lease was ending") {
		t.Fatalf("records %q", b.progress)
	}
	if spool.Used() != 0 {
		t.Fatalf("the spool holds %d bytes", spool.Used())
	}
}

// Workers started at the same moment on one spool directory (the
// default one, say, of several phones' workers on one machine) all open
// their spools, and none cleans another's away while it is being made.
func TestSpoolsOpenedTogether(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for round := range 20 {
		var wg sync.WaitGroup
		spools := make([]*Spool, 8)
		errs := make([]error, len(spools))
		for i := range spools {
			wg.Go(func() { spools[i], errs[i] = OpenSpool(dir, 1000) })
		}
		wg.Wait()
		for i, s := range spools {
			if errs[i] != nil {
				t.Fatalf("round %d: spool %d: %v", round, i, errs[i])
			}
			if _, err := os.Stat(s.Dir()); err != nil {
				t.Fatalf("round %d: spool %d's directory is gone: %v", round, i, err)
			}
		}
		for _, s := range spools {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
