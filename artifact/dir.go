package artifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Dir keeps objects in a local directory: objects/<sha[0:2]>/<sha256 hex>
// for the content, tmp/ for uploads in progress (on the same file system,
// so that placing an upload is a hard link).
type Dir struct {
	root, objects, tmp string
}

// NewDir returns the Dir at root, creating its objects and tmp folders.
func NewDir(root string) (*Dir, error) {
	d := &Dir{root: root, objects: filepath.Join(root, "objects"), tmp: filepath.Join(root, "tmp")}
	for _, p := range []string{d.objects, d.tmp} {
		if err := os.MkdirAll(p, 0o750); err != nil {
			return nil, fmt.Errorf("creating artifact storage: %w", err)
		}
	}
	return d, nil
}

// String implements Backend.
func (d *Dir) String() string { return d.root }

// path is where the content with this SHA-256 lives.
func (d *Dir) path(sum string) string { return filepath.Join(d.objects, sum[:2], sum) }

// Spool implements Backend.
func (d *Dir) Spool() (*os.File, error) { return os.CreateTemp(d.tmp, "put-*") }

// Put implements Backend: the spool made durable, then hard-linked into
// place, so that the spool stays for the caller; a copy where the file
// system has no links.
func (d *Dir) Put(_ context.Context, sum string, spool *os.File, _ int64) error {
	dst := d.path(sum)
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		return err
	}
	// Durable before the database says it exists.
	if err := errors.Join(spool.Chmod(0o640), spool.Sync()); err != nil {
		return err
	}
	path := spool.Name()
	err := os.Link(path, dst)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return nil
	}
	return d.copyIn(path, dst)
}

// copyIn copies src to dst through a file in tmp/ and a rename.
func (d *Dir) copyIn(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.CreateTemp(d.tmp, "copy-*")
	if err != nil {
		return err
	}
	defer os.Remove(out.Name())
	_, err = io.Copy(out, in)
	if err = errors.Join(err, out.Chmod(0o640), out.Sync(), out.Close()); err != nil {
		return err
	}
	return os.Rename(out.Name(), dst)
}

// Stat implements Backend.
func (d *Dir) Stat(_ context.Context, sum string) (ObjectInfo, error) {
	fi, err := os.Stat(d.path(sum))
	if err != nil {
		return ObjectInfo{}, err
	}
	return ObjectInfo{SHA256: sum, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// Open implements Backend.
func (d *Dir) Open(_ context.Context, sum string) (io.ReadSeekCloser, error) {
	return os.Open(d.path(sum))
}

// Delete implements Backend.
func (d *Dir) Delete(_ context.Context, sum string) error {
	err := os.Remove(d.path(sum))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Walk implements Backend.
func (d *Dir) Walk(ctx context.Context, fn func(ObjectInfo) error) error {
	return filepath.WalkDir(d.objects, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.IsDir() || !validSum(e.Name()) {
			return nil
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed meanwhile
		} else if err != nil {
			return err
		}
		return fn(ObjectInfo{SHA256: e.Name(), Size: fi.Size(), ModTime: fi.ModTime()})
	})
}

// CheckWritable implements Backend: a file created and removed where
// uploads are written.
func (d *Dir) CheckWritable(context.Context) error {
	f, err := os.CreateTemp(d.tmp, ".ready-*")
	if err != nil {
		return err
	}
	return errors.Join(f.Close(), os.Remove(f.Name()))
}
