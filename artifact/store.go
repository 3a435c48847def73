// Package artifact stores the screenshots and text files of job attempts:
// bytes in content-addressed files outside any web root, metadata in
// PostgreSQL through the queue package, which fences every record by the
// attempt's lease. Images are accepted by content, never by name or
// declared type, and are checked without ever being decoded.
package artifact

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// Default limits, from SPEC.
const (
	DefaultMaxImageBytes = 10 << 20
	DefaultMaxPixels     = 10000
	DefaultMaxTextBytes  = 5 << 20
)

// Limits bounds what Put accepts; a zero field takes its default.
type Limits struct {
	// MaxImageBytes bounds an image file (default 10 MiB).
	MaxImageBytes int64
	// MaxWidth and MaxHeight bound an image's declared size in pixels
	// (default 10000 each).
	MaxWidth, MaxHeight int
	// MaxTextBytes bounds a text artifact (default 5 MiB).
	MaxTextBytes int64
}

// withDefaults fills the zero fields of l.
func (l Limits) withDefaults() Limits {
	return Limits{
		MaxImageBytes: cmp.Or(l.MaxImageBytes, DefaultMaxImageBytes),
		MaxWidth:      cmp.Or(l.MaxWidth, DefaultMaxPixels),
		MaxHeight:     cmp.Or(l.MaxHeight, DefaultMaxPixels),
		MaxTextBytes:  cmp.Or(l.MaxTextBytes, DefaultMaxTextBytes),
	}
}

// MaxBytes is the largest artifact of any kind, which bounds an upload.
func (l Limits) MaxBytes() int64 { return max(l.MaxImageBytes, l.MaxTextBytes) }

// ErrTooLarge means the content is larger than its kind's byte limit.
var ErrTooLarge = errors.New("artifact too large")

// RejectedError means the content is not acceptable: not a PNG, JPEG or
// WebP image, a broken one, one with too many pixels, or text that is not
// UTF-8. Reason says which, for the uploader.
type RejectedError struct {
	Reason string
}

// Error implements error.
func (e *RejectedError) Error() string { return "artifact rejected: " + e.Reason }

func rejectf(format string, args ...any) *RejectedError {
	return &RejectedError{Reason: fmt.Sprintf(format, args...)}
}

// Store keeps artifact files under a directory:
// objects/<sha[0:2]>/<sha256 hex> for the content, tmp/ for uploads in
// progress (the same file system, so that publishing is a rename).
type Store struct {
	objects, tmp string
	q            *queue.Client
	limits       Limits
	// locks serialise, per hash prefix, placing a file, recording it and
	// removing it again when the record is refused; otherwise a refused
	// upload could delete the file that a concurrent upload of the same
	// content has just recorded. (Processes sharing the directory are not
	// covered; an orphan or missing file is then possible but rare.)
	locks [256]sync.Mutex
	// gcGrace is how long a file is safe from the collector after it was
	// placed or reused (see CollectFiles); beforeRemove is a test hook.
	gcGrace      time.Duration
	beforeRemove func(sum string)
}

// New returns a Store in dir, creating its objects and tmp directories.
func New(dir string, q *queue.Client, limits Limits) (*Store, error) {
	s := &Store{
		objects: filepath.Join(dir, "objects"), tmp: filepath.Join(dir, "tmp"),
		q: q, limits: limits.withDefaults(), gcGrace: DefaultGCGrace,
	}
	for _, d := range []string{s.objects, s.tmp} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, fmt.Errorf("creating artifact storage: %w", err)
		}
	}
	return s, nil
}

// Limits returns the limits in force, defaults filled in.
func (s *Store) Limits() Limits { return s.limits }

// CheckWritable creates and removes a file where uploads are written,
// which is what storing an artifact needs.
func (s *Store) CheckWritable() error {
	f, err := os.CreateTemp(s.tmp, ".ready-*")
	if err != nil {
		return err
	}
	return errors.Join(f.Close(), os.Remove(f.Name()))
}

// Put stores r as an artifact of l's attempt and records it. name is for
// display only (it is cleaned and never becomes a path); its extension
// decides only whether r is read as text (.txt, .log, .xml) or must be an
// image. Errors: ErrTooLarge, *RejectedError, and the queue's errors
// unchanged (queue.ErrLeaseLost for a stale lease, queue.ErrNotFound).
func (s *Store) Put(ctx context.Context, l queue.Lease, name string, r io.Reader) (queue.Artifact, error) {
	a := queue.Artifact{Name: CleanName(name)}
	tmp, err := os.CreateTemp(s.tmp, "put-*")
	if err != nil {
		return queue.Artifact{}, fmt.Errorf("creating upload file: %w", err)
	}
	handedOver := false
	defer func() {
		if !handedOver {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	r = ctxReader{ctx, r}
	if isTextName(a.Name) {
		a.Kind, a.ContentType = queue.ArtifactText, TextContentType
		err = s.receiveText(tmp, r, &a)
	} else {
		a.Kind = queue.ArtifactScreenshot
		err = s.receiveImage(tmp, r, &a)
	}
	if err != nil {
		return queue.Artifact{}, err
	}
	// Durable before the database says it exists.
	if err := errors.Join(tmp.Chmod(0o640), tmp.Sync(), tmp.Close()); err != nil {
		return queue.Artifact{}, fmt.Errorf("writing artifact: %w", err)
	}
	handedOver = true
	return s.publish(ctx, l, tmp.Name(), a)
}

// receiveText copies r into tmp, refusing more than MaxTextBytes and
// anything that is not UTF-8 text without NUL bytes.
func (s *Store) receiveText(tmp *os.File, r io.Reader, a *queue.Artifact) error {
	check := &textCheck{}
	var err error
	a.Size, a.SHA256, err = receive(tmp, r, s.limits.MaxTextBytes, check)
	if err != nil {
		return err
	}
	return check.finish()
}

// receiveImage recognises the format from the first bytes (refusing
// anything else before reading on), copies r into tmp, then walks the
// file's structure: complete, and no more pixels than the limits allow.
func (s *Store) receiveImage(tmp *os.File, r io.Reader, a *queue.Artifact) error {
	br := bufio.NewReaderSize(r, 32<<10)
	head, err := br.Peek(sniffLen)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading artifact: %w", err)
	}
	f, err := sniff(head)
	if err != nil {
		return err
	}
	if a.Size, a.SHA256, err = receive(tmp, br, s.limits.MaxImageBytes, nil); err != nil {
		return err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("rereading artifact: %w", err)
	}
	w, h, err := f.check(bufio.NewReaderSize(tmp, 32<<10), a.Size, s.limits)
	if err != nil {
		return err
	}
	w32, h32 := int32(w), int32(h)
	a.ContentType, a.Width, a.Height = f.contentType, &w32, &h32
	return nil
}

// receive copies at most limit bytes of r into dst, hashing them on the
// way (and passing them to also, if set); one byte more is ErrTooLarge.
// Memory stays at one copy buffer whatever r holds.
func receive(dst io.Writer, r io.Reader, limit int64, also io.Writer) (size int64, sum string, err error) {
	h := sha256.New()
	w := io.MultiWriter(dst, h)
	if also != nil {
		w = io.MultiWriter(dst, h, also)
	}
	n, err := io.Copy(w, io.LimitReader(r, limit+1))
	var rejected *RejectedError
	switch {
	case errors.As(err, &rejected):
		return 0, "", rejected
	case err != nil:
		return 0, "", fmt.Errorf("receiving artifact: %w", err)
	case n > limit:
		return 0, "", fmt.Errorf("%w: the limit is %d bytes", ErrTooLarge, limit)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// publish moves the upload (whose file it now owns) to its
// content-addressed name and records it. When the record is refused, the
// file goes again unless another artifact names it, and the queue's error
// is returned unchanged.
func (s *Store) publish(ctx context.Context, l queue.Lease, tmpName string, a queue.Artifact) (queue.Artifact, error) {
	prefix, _ := hex.DecodeString(a.SHA256[:2])
	mu := &s.locks[prefix[0]]
	mu.Lock()
	defer mu.Unlock()

	path := s.path(a.SHA256)
	reused, err := s.place(tmpName, path)
	if err != nil {
		_ = os.Remove(tmpName)
		return queue.Artifact{}, fmt.Errorf("storing artifact: %w", err)
	}

	if !reused {
		// The figures are kept, not exact: a failure here (or a crash)
		// leaves them off until the pruner's next sweep sets them.
		_ = s.q.AddArtifactStorage(ctx, 1, a.Size)
	}

	rec, err := s.q.RecordArtifact(ctx, l, a)
	if err != nil {
		s.removeUnused(ctx, a.SHA256, a.Size)
		_ = os.Remove(tmpName)
		return queue.Artifact{}, err
	}
	if reused {
		// The row names the file now. Should a collector of another
		// process have removed it all the same (see CollectFiles), the
		// upload's own copy takes its place.
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			_ = os.Rename(tmpName, path)
		}
		_ = os.Remove(tmpName)
	}
	return rec, nil
}

// place renames tmpName to path or, when path exists already (the name is
// the content's hash, so the bytes are the same), marks that file fresh
// (its mtime) and reports reused: the caller then keeps tmpName until the
// artifact is recorded. The fresh mtime is what keeps a collector from
// removing the file meanwhile (see CollectFiles).
func (s *Store) place(tmpName, path string) (reused bool, err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return false, err
	}
	now := time.Now()
	err = os.Chtimes(path, now, now)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, os.Rename(tmpName, path)
	default:
		return false, err
	}
}

// removeUnused removes the file of sum unless an artifact names it. It
// runs after a refusal, maybe because the client went away, so it does
// not inherit ctx's cancellation. A failure leaves an unreferenced file,
// which costs only disk space until retention collects it.
func (s *Store) removeUnused(ctx context.Context, sum string, size int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	inUse, err := s.q.ArtifactFileInUse(ctx, sum)
	if err != nil || inUse {
		return
	}
	if os.Remove(s.path(sum)) == nil {
		_ = s.q.AddArtifactStorage(ctx, -1, -size)
	}
}

// Open returns the metadata and the open file of artifact id; the caller
// closes the file. queue.ErrNotFound when there is no such artifact.
func (s *Store) Open(ctx context.Context, id int64) (queue.Artifact, *os.File, error) {
	a, err := s.q.GetArtifact(ctx, id)
	if err != nil {
		return queue.Artifact{}, nil, err
	}
	if !validSum(a.SHA256) {
		return queue.Artifact{}, nil, fmt.Errorf("opening artifact %d: malformed sha256 %q", id, a.SHA256)
	}
	f, err := os.Open(s.path(a.SHA256))
	if err != nil {
		return queue.Artifact{}, nil, fmt.Errorf("opening artifact %d: %w", id, err)
	}
	return a, f, nil
}

// path is where the content with this SHA-256 lives.
func (s *Store) path(sum string) string {
	return filepath.Join(s.objects, sum[:2], sum)
}

// validSum reports whether sum is 64 lower-case hex digits, so that a
// corrupted row can never make Open leave the objects directory.
func validSum(sum string) bool {
	if len(sum) != sha256.Size*2 {
		return false
	}
	for _, c := range []byte(sum) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ctxReader stops a long upload once ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
