package worker

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// DefaultSpoolMax bounds a spool when nothing else is said: 512 MiB.
const DefaultSpoolMax = 512 << 20

// ErrSpoolFull means an artifact did not fit in the spool: the artifacts
// still waiting for the server take all of its room.
var ErrSpoolFull = errors.New("artifact spool full")

// Spool keeps every artifact an executor hands over until the server (or,
// for a direct worker, the artifact store) has confirmed it, so that an
// upload can be sent again after an outage: the executor's reader is read
// once, into the spool. It is bounded in bytes; an artifact that does not
// fit is refused with ErrSpoolFull.
//
// A spool in a directory gives each worker process a directory of its
// own inside it (w-*), locked while the process runs: at start, the
// directories of processes that are gone (killed, say) are removed, since
// their leases are gone too, while those of workers still running on the
// same directory are left alone. Without a directory the spool holds its
// files in memory.
type Spool struct {
	dir  string // this process's own directory; "" in memory
	max  int64
	lock io.Closer // held while the spool is open

	mu   sync.Mutex
	used int64
	seq  int64
}

// OpenSpool opens a spool of at most max bytes under dir ("" for one in
// memory), removing what workers that are gone left there.
func OpenSpool(dir string, max int64) (*Spool, error) {
	if max <= 0 {
		return nil, fmt.Errorf("spool size %d: must be positive", max)
	}
	s := &Spool{max: max}
	if dir == "" {
		return s, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the artifact spool: %w", err)
	}
	cleanSpool(dir)
	// Made under a name the cleaning ignores, locked, then renamed: a
	// worker starting at the same moment never takes it for a dead one's.
	tmp, err := os.MkdirTemp(dir, "new-")
	if err != nil {
		return nil, fmt.Errorf("creating the artifact spool: %w", err)
	}
	lock, err := lockSpoolDir(tmp, true)
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("locking the artifact spool: %w", err)
	}
	own := filepath.Join(dir, "w-"+strings.TrimPrefix(filepath.Base(tmp), "new-"))
	if err := os.Rename(tmp, own); err != nil {
		_ = lock.Close()
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("creating the artifact spool: %w", err)
	}
	s.dir, s.lock = own, lock
	return s, nil
}

// cleanSpool removes the directories of dir whose workers are gone: those
// whose lock can be taken (a new-* one too: a start that died between
// taking its lock and its rename). One still being made has no "lock"
// yet, or holds it (lockSpoolDir); one whose start died before it had a
// lock stays, empty.
func cleanSpool(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !(strings.HasPrefix(e.Name(), "w-") || strings.HasPrefix(e.Name(), "new-")) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		lock, err := lockSpoolDir(path, false)
		if err != nil {
			continue // a worker that runs, or a lock this system cannot take
		}
		_ = os.RemoveAll(path)
		_ = lock.Close()
	}
}

// Dir is the spool's own directory, "" for a spool in memory.
func (s *Spool) Dir() string { return s.dir }

// Used is how many bytes the spool holds.
func (s *Spool) Used() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// Close removes the spool's own directory: whatever is still in it
// belongs to leases this process no longer holds.
func (s *Spool) Close() error {
	if s.dir == "" {
		return nil
	}
	err := os.RemoveAll(s.dir)
	return errors.Join(err, s.lock.Close())
}

// reserve takes n bytes of room, or reports that they are not there.
func (s *Spool) reserve(n int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used+n > s.max {
		return false
	}
	s.used += n
	return true
}

func (s *Spool) free(n int64) {
	s.mu.Lock()
	s.used -= n
	s.mu.Unlock()
}

// spooled is one artifact in the spool.
type spooled struct {
	spool *Spool
	name  string // the artifact's name, for display
	step  int32  // the attempt's step it belongs to; 0 for none
	path  string // its file, or
	data  []byte // its bytes, in memory
	size  int64
}

// put copies r into the spool. When the spool has no room for all of it,
// nothing is kept and the error is ErrSpoolFull.
func (s *Spool) put(name string, r io.Reader) (*spooled, error) {
	f := &spooled{spool: s, name: name}
	w := &spoolWriter{spool: s}
	var (
		buf  bytes.Buffer
		file *os.File
	)
	if s.dir == "" {
		w.to = &buf
	} else {
		s.mu.Lock()
		s.seq++
		seq := s.seq
		s.mu.Unlock()
		var err error
		if file, err = os.OpenFile(filepath.Join(s.dir, fmt.Sprintf("a-%d", seq)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err != nil {
			return nil, fmt.Errorf("spooling artifact: %w", err)
		}
		f.path, w.to = file.Name(), file
	}
	_, err := io.Copy(w, r)
	if file != nil {
		err = errors.Join(err, file.Close())
	}
	if err != nil {
		s.free(w.n)
		if f.path != "" {
			_ = os.Remove(f.path)
		}
		if errors.Is(err, ErrSpoolFull) {
			return nil, fmt.Errorf("%w (%d bytes at most)", ErrSpoolFull, s.max)
		}
		return nil, fmt.Errorf("spooling artifact: %w", err)
	}
	f.size, f.data = w.n, buf.Bytes()
	return f, nil
}

// open returns the artifact's bytes from the start.
func (f *spooled) open() (io.ReadCloser, error) {
	if f.path == "" {
		return io.NopCloser(bytes.NewReader(f.data)), nil
	}
	return os.Open(f.path)
}

// remove takes the artifact out of the spool: it is stored, or given up.
func (f *spooled) remove() {
	if f.path != "" {
		_ = os.Remove(f.path)
	}
	f.data = nil
	f.spool.free(f.size)
}

// spoolWriter writes to the spool while it has room.
type spoolWriter struct {
	spool *Spool
	to    io.Writer
	n     int64 // bytes reserved and written
}

func (w *spoolWriter) Write(p []byte) (int, error) {
	if !w.spool.reserve(int64(len(p))) {
		return 0, ErrSpoolFull
	}
	n, err := w.to.Write(p)
	w.spool.free(int64(len(p) - n))
	w.n += int64(n)
	return n, err
}
