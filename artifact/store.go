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
	"sync"
	"time"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/screenhash"
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

// Store keeps artifacts: their bytes in a Backend (a directory or an S3
// bucket) under content-addressed names, their rows through the queue.
type Store struct {
	b      Backend
	q      *queue.Client
	limits Limits
	// locks serialise, per hash prefix, this process's uploads finding
	// and placing an object, so that the same new content uploaded twice
	// at once is counted once in the storage figures. Safety against the
	// collector does not rest on them (see CollectFiles).
	locks [256]sync.Mutex
	// gcGrace is how long an object is left alone by the collector after
	// it was written (see CollectFiles); beforeRemove is a test hook.
	gcGrace      time.Duration
	beforeRemove func(sum string)
}

// New returns a Store in the directory dir, creating its objects and tmp
// directories.
func New(dir string, q *queue.Client, limits Limits) (*Store, error) {
	d, err := NewDir(dir)
	if err != nil {
		return nil, err
	}
	return NewStore(d, q, limits), nil
}

// NewStore returns a Store whose bytes live in b.
func NewStore(b Backend, q *queue.Client, limits Limits) *Store {
	return &Store{b: b, q: q, limits: limits.withDefaults(), gcGrace: DefaultGCGrace}
}

// SetGCGrace sets how long an object just written is left alone by the
// collector (DefaultGCGrace unless set; zero: not at all). It spares
// churn only; safety rests on the content's lock (see CollectFiles).
func (s *Store) SetGCGrace(d time.Duration) { s.gcGrace = max(d, 0) }

// Backend returns where the bytes live.
func (s *Store) Backend() Backend { return s.b }

// Limits returns the limits in force, defaults filled in.
func (s *Store) Limits() Limits { return s.limits }

// CheckWritable writes and removes a small object where uploads are
// written, which is what storing an artifact needs.
func (s *Store) CheckWritable(ctx context.Context) error { return s.b.CheckWritable(ctx) }

// Put stores r as an artifact of l's attempt and records it. name is for
// display only (it is cleaned and never becomes a path); its extension
// decides only whether r is read as text (.txt, .log, .xml) or must be an
// image. Errors: ErrTooLarge, *RejectedError, and the queue's errors
// unchanged (queue.ErrLeaseLost for a stale lease, queue.ErrNotFound).
func (s *Store) Put(ctx context.Context, l queue.Lease, name string, r io.Reader) (queue.Artifact, error) {
	return s.PutStep(ctx, l, name, 0, r)
}

// PutStep is Put for an artifact of the attempt's given step (1 to
// queue.MaxStep; 0: none), which a replay shows with that step's progress.
func (s *Store) PutStep(ctx context.Context, l queue.Lease, name string, step int32, r io.Reader) (queue.Artifact, error) {
	a := queue.Artifact{Name: CleanName(name)}
	if step != 0 {
		a.Step = &step
	}
	tmp, err := s.b.Spool()
	if err != nil {
		return queue.Artifact{}, fmt.Errorf("creating upload file: %w", err)
	}
	defer func() {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
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
	return s.publish(ctx, l, tmp, a)
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
	a.ScreenHash = screenHashOf(tmp, w, h)
	return nil
}

// maxHashPixels bounds the screenshots given a perceptual hash: decoding
// one takes 4 bytes a pixel (a phone's 1080×2400 is 10 MB; this bound
// 64 MB), and the limits allow far larger images than a phone takes.
const maxHashPixels = 16 << 20

// screenHashOf returns the perceptual hash of the image spooled in tmp
// (w×h pixels, already checked whole), which groups failures by the
// screen they ended on; nil for an image over maxHashPixels, or one the
// decoder cannot read (the upload is stored all the same: the hash only
// groups).
func screenHashOf(tmp *os.File, w, h int) *int64 {
	if w*h > maxHashPixels {
		return nil
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return nil
	}
	sum, err := screenhash.Decode(bufio.NewReaderSize(tmp, 32<<10), maxHashPixels)
	if err != nil {
		return nil
	}
	v := int64(sum)
	return &v
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

// publish stores the spooled upload under its content's name and records
// it. The object is written first, outside any lock (an S3 PUT takes a
// while); then, holding the content's lock in the database, the store
// checks it is still there, writes it again from the spool in the rare
// case that a collector removed it meanwhile, and records the row (see
// CollectFiles for why that is safe). When the record is refused, the
// object goes again unless another artifact names it, and the queue's
// error is returned unchanged.
func (s *Store) publish(ctx context.Context, l queue.Lease, spool *os.File, a queue.Artifact) (queue.Artifact, error) {
	placed, err := s.place(ctx, spool, a)
	if err != nil {
		return queue.Artifact{}, fmt.Errorf("storing artifact: %w", err)
	}
	rec, err := s.q.RecordArtifactPlaced(ctx, l, a, func(ctx context.Context) error {
		_, err := s.b.Stat(ctx, a.SHA256)
		if errors.Is(err, fs.ErrNotExist) {
			err = s.b.Put(ctx, a.SHA256, spool, a.Size)
		}
		if err != nil {
			return fmt.Errorf("storing artifact: %w", err)
		}
		return nil
	})
	if err != nil {
		if placed {
			s.removeUnused(ctx, a.SHA256, a.Size)
		}
		return queue.Artifact{}, err
	}
	return rec, nil
}

// place writes the object of a unless it is there already (its name is
// its content's hash, so the bytes are the same), and reports whether it
// wrote one, for the storage figures.
func (s *Store) place(ctx context.Context, spool *os.File, a queue.Artifact) (placed bool, err error) {
	prefix, _ := hex.DecodeString(a.SHA256[:2])
	mu := &s.locks[prefix[0]]
	mu.Lock()
	defer mu.Unlock()
	_, err = s.b.Stat(ctx, a.SHA256)
	switch {
	case err == nil:
		return false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return false, err
	}
	if err := s.b.Put(ctx, a.SHA256, spool, a.Size); err != nil {
		return false, err
	}
	// The figures are kept, not exact: a failure here (or a crash) leaves
	// them off until the pruner's next sweep sets them.
	_ = s.q.AddArtifactStorage(ctx, 1, a.Size)
	return true, nil
}

// removeUnused removes the object of sum unless an artifact names it or
// an upload of it is being recorded. It runs after a refusal, maybe
// because the client went away, so it does not inherit ctx's
// cancellation. A failure leaves an unreferenced object, which costs only
// space until retention collects it.
func (s *Store) removeUnused(ctx context.Context, sum string, size int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	removed, err := s.q.CollectArtifactFile(ctx, sum, func(ctx context.Context) error { return s.b.Delete(ctx, sum) })
	if err == nil && removed {
		_ = s.q.AddArtifactStorage(ctx, -1, -size)
	}
}

// Open returns the metadata and the open content of artifact id, to
// read, seek (Range) and close. queue.ErrNotFound when there is no such
// artifact; an error matching fs.ErrNotExist when its row outlived its
// object.
func (s *Store) Open(ctx context.Context, id int64) (queue.Artifact, io.ReadSeekCloser, error) {
	a, err := s.q.GetArtifact(ctx, id)
	if err != nil {
		return queue.Artifact{}, nil, err
	}
	if !validSum(a.SHA256) {
		return queue.Artifact{}, nil, fmt.Errorf("opening artifact %d: malformed sha256 %q", id, a.SHA256)
	}
	f, err := s.b.Open(ctx, a.SHA256)
	if err != nil {
		return queue.Artifact{}, nil, fmt.Errorf("opening artifact %d: %w", id, err)
	}
	return a, f, nil
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
