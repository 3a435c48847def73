package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
)

// MigrateOptions tune Migrate.
type MigrateOptions struct {
	// Concurrency is how many objects are copied at once (default 8).
	Concurrency int
	// Progress, when set, is called after each object with the totals so
	// far (from several goroutines, one at a time).
	Progress func(MigrateResult)
}

// MigrateResult counts what Migrate did.
type MigrateResult struct {
	// Copied objects were written to the destination, read back and
	// found to hash to their names; Bytes counts theirs.
	Copied, Bytes int64
	// Skipped objects were there already with the same size (and, on S3,
	// the same recorded SHA-256): a run that was stopped and started again.
	Skipped int64
	// Corrupt source objects do not hash to their names; they are not
	// copied, and Migrate fails after trying the rest.
	Corrupt []string
}

// Migrate copies every object of from to to, verifying each: the source
// bytes must hash to the object's name before they are written, and the
// written object is read back and hashed again. It can be stopped at any
// point and run again: objects already at the destination are skipped (a
// write is atomic on both backends, so one that is there is whole).
func Migrate(ctx context.Context, from, to Backend, opt MigrateOptions) (MigrateResult, error) {
	n := opt.Concurrency
	if n <= 0 {
		n = 8
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		copied, bytes, skipped atomic.Int64
		mu                     sync.Mutex
		corrupt                []string
	)
	snapshot := func() MigrateResult {
		return MigrateResult{Copied: copied.Load(), Bytes: bytes.Load(), Skipped: skipped.Load(), Corrupt: corrupt}
	}
	work := make(chan ObjectInfo)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for o := range work {
				done, err := migrateOne(ctx, from, to, o)
				var bad *corruptError
				switch {
				case errors.As(err, &bad):
					mu.Lock()
					corrupt = append(corrupt, o.SHA256)
					mu.Unlock()
				case err != nil:
					cancel(fmt.Errorf("copying %s: %w", o.SHA256, err))
					continue
				case done:
					copied.Add(1)
					bytes.Add(o.Size)
				default:
					skipped.Add(1)
				}
				if opt.Progress != nil {
					mu.Lock()
					opt.Progress(snapshot())
					mu.Unlock()
				}
			}
		})
	}
	walkErr := from.Walk(ctx, func(o ObjectInfo) error {
		select {
		case work <- o:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	close(work)
	wg.Wait()
	res := snapshot()
	if err := context.Cause(ctx); err != nil {
		return res, err
	}
	if walkErr != nil {
		return res, fmt.Errorf("listing %s: %w", from, walkErr)
	}
	if len(res.Corrupt) > 0 {
		return res, fmt.Errorf("%d objects of %s do not hash to their names and were not copied (first: %s)", len(res.Corrupt), from, res.Corrupt[0])
	}
	return res, nil
}

type corruptError struct{ got string }

func (e *corruptError) Error() string { return "content hashes to " + e.got }

// migrateOne copies one object unless to has it already; it reports
// whether it copied.
func migrateOne(ctx context.Context, from, to Backend, o ObjectInfo) (bool, error) {
	have, err := to.Stat(ctx, o.SHA256)
	switch {
	case err == nil && have.Size == o.Size && (have.Checksum == "" || have.Checksum == o.SHA256):
		return false, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return false, err
	}
	spool, err := to.Spool()
	if err != nil {
		return false, err
	}
	defer func() {
		_ = spool.Close()
		_ = os.Remove(spool.Name())
	}()
	src, err := from.Open(ctx, o.SHA256)
	if err != nil {
		return false, err
	}
	size, got, err := copyHashing(spool, src)
	_ = src.Close()
	if err != nil {
		return false, err
	}
	if got != o.SHA256 {
		return false, &corruptError{got: got}
	}
	if err := to.Put(ctx, o.SHA256, spool, size); err != nil {
		return false, err
	}
	back, err := to.Open(ctx, o.SHA256)
	if err != nil {
		return false, fmt.Errorf("reading back: %w", err)
	}
	n, again, err := copyHashing(io.Discard, back)
	_ = back.Close()
	if err != nil {
		return false, fmt.Errorf("reading back: %w", err)
	}
	if again != o.SHA256 || n != size {
		_ = to.Delete(ctx, o.SHA256)
		return false, fmt.Errorf("written object reads back as %d bytes hashing to %s", n, again)
	}
	return true, nil
}

func copyHashing(dst io.Writer, src io.Reader) (int64, string, error) {
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(dst, h), src)
	return n, hex.EncodeToString(h.Sum(nil)), err
}
