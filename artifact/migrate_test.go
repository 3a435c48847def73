package artifact_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasehold/leasehold/artifact"
)

// newBucket is an S3 backend on the package's SeaweedFS with a bucket of
// its own.
func newBucket(t *testing.T, ctx context.Context) *artifact.S3 {
	t.Helper()
	srv := sharedS3(t)
	var r [6]byte
	_, _ = rand.Read(r[:])
	cfg, err := artifact.S3ConfigFromEnv("s3://m-"+hex.EncodeToString(r[:])+"/migrated", srv.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	cfg.SpoolDir = t.TempDir()
	b, err := artifact.NewS3(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fillDir writes n small objects into a directory store the way the
// store lays them out, and returns their sums.
func fillDir(t *testing.T, root string, n int) map[string]int64 {
	t.Helper()
	if _, err := artifact.NewDir(root); err != nil {
		t.Fatal(err)
	}
	want := make(map[string]int64, n)
	for i := range n {
		b := fmt.Appendf(nil, "artifact %d of %d\n", i, n)
		s := sum(b)
		p := filepath.Join(root, "objects", s[:2], s)
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o640); err != nil {
			t.Fatal(err)
		}
		want[s] = int64(len(b))
	}
	return want
}

// 10,000 files to a bucket, stopped a third of the way and started again:
// the second run copies only the rest, and every object ends up there,
// whole.
func TestMigrateResumes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const n = 10000
	root := filepath.Join(t.TempDir(), "artifacts")
	want := fillDir(t, root, n)
	from, err := artifact.NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	to := newBucket(t, ctx)

	stopCtx, stop := context.WithCancel(ctx)
	start := time.Now()
	first, err := artifact.Migrate(stopCtx, from, to, artifact.MigrateOptions{Progress: func(r artifact.MigrateResult) {
		if r.Copied >= n/3 {
			stop()
		}
	}})
	stop()
	if !errors.Is(err, context.Canceled) || first.Copied < n/3 || first.Copied >= n {
		t.Fatalf("stopped run: %+v, %v; want cancelled after about %d", first, err, n/3)
	}
	t.Logf("first run: %d copied in %v, then stopped", first.Copied, time.Since(start).Round(time.Millisecond))

	start = time.Now()
	second, err := artifact.Migrate(ctx, from, to, artifact.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("second run: %d copied, %d skipped in %v", second.Copied, second.Skipped, time.Since(start).Round(time.Millisecond))
	if second.Skipped < first.Copied || second.Copied+second.Skipped != n {
		t.Errorf("resumed run %+v after %d copied: want the copied ones skipped and the rest copied", second, first.Copied)
	}
	got := map[string]int64{}
	if err := to.Walk(ctx, func(o artifact.ObjectInfo) error { got[o.SHA256] = o.Size; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("%d objects in the bucket, want %d", len(got), n)
	}
	for s, size := range want {
		if got[s] != size {
			t.Fatalf("object %s: %d bytes, want %d", s, got[s], size)
		}
	}
	// A third run finds everything there.
	third, err := artifact.Migrate(ctx, from, to, artifact.MigrateOptions{})
	if err != nil || third.Copied != 0 || third.Skipped != n {
		t.Errorf("third run: %+v %v, want all %d skipped", third, err, n)
	}
}

// A source file whose bytes do not hash to its name is not copied, and
// the run says so; the others are.
func TestMigrateRefusesCorrupt(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, kind string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		root := filepath.Join(t.TempDir(), "artifacts")
		want := fillDir(t, root, 20)
		var bad string
		for s := range want {
			bad = s
			break
		}
		if err := os.WriteFile(filepath.Join(root, "objects", bad[:2], bad), []byte("flipped bits\n"), 0o640); err != nil {
			t.Fatal(err)
		}
		from, err := artifact.NewDir(root)
		if err != nil {
			t.Fatal(err)
		}
		var to artifact.Backend
		if kind == kindS3 {
			to = newBucket(t, ctx)
		} else if to, err = artifact.NewDir(filepath.Join(t.TempDir(), "to")); err != nil {
			t.Fatal(err)
		}
		res, err := artifact.Migrate(ctx, from, to, artifact.MigrateOptions{})
		if err == nil || len(res.Corrupt) != 1 || res.Corrupt[0] != bad || res.Copied != 19 {
			t.Fatalf("%+v %v: want 19 copied and %s refused", res, err, bad)
		}
		if _, err := to.Stat(ctx, bad); err == nil {
			t.Error("the corrupt object was copied")
		}
	})
}
