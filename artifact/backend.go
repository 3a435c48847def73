package artifact

import (
	"context"
	"crypto/sha256"
	"io"
	"os"
	"time"
)

// Backend is where artifact bytes live, one object per distinct content,
// named by its SHA-256: a local directory (Dir) or an S3-compatible bucket
// (S3). Store puts the rules on top (checks, records, collection); a
// Backend only moves bytes. Every method that finds no object answers an
// error matching fs.ErrNotExist.
type Backend interface {
	// Spool creates a local file for an upload in progress; Put then
	// takes its bytes. The caller removes it (a Dir spools in its own
	// tmp/ so that Put is a link, not a copy).
	Spool() (*os.File, error)
	// Put stores the spool's size bytes as the object of sum. The spool
	// stays open and the caller's. An object already there has the same
	// bytes (its name is their hash) and may be replaced.
	Put(ctx context.Context, sum string, spool *os.File, size int64) error
	// Stat describes the object of sum.
	Stat(ctx context.Context, sum string) (ObjectInfo, error)
	// Open returns the object of sum to read, seek (for Range) and close.
	Open(ctx context.Context, sum string) (io.ReadSeekCloser, error)
	// Delete removes the object of sum; deleting one that is not there
	// is not an error.
	Delete(ctx context.Context, sum string) error
	// Walk calls fn for every object, in no particular order, stopping at
	// fn's first error.
	Walk(ctx context.Context, fn func(ObjectInfo) error) error
	// CheckWritable writes and removes a small object where uploads go.
	CheckWritable(ctx context.Context) error
	// String names the storage for messages (a path or s3://bucket/prefix).
	String() string
}

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	SHA256  string
	Size    int64
	ModTime time.Time
	// Checksum is the SHA-256 its writer recorded with it (S3 metadata),
	// "" where the backend keeps none.
	Checksum string
}

// validSum reports whether sum is 64 lower-case hex digits, so that a
// corrupted row can never name a path or key outside the objects.
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

// OpenBackend opens the storage named by location: s3://bucket/prefix
// (configured by getenv, see S3ConfigFromEnv; the bucket is created when
// missing) or a directory.
func OpenBackend(ctx context.Context, location string, getenv func(string) string) (Backend, error) {
	if _, _, ok, err := ParseS3URL(location); err != nil {
		return nil, err
	} else if ok {
		cfg, err := S3ConfigFromEnv(location, getenv)
		if err != nil {
			return nil, err
		}
		return NewS3(ctx, cfg)
	}
	return NewDir(location)
}
