package artifact_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/artifact"
	"github.com/leasehold/leasehold/artifact/artifacttest"
	"github.com/leasehold/leasehold/queue"
)

// objectPath is where a directory store keeps the content with this hash.
func (f *fixture) objectPath(sum string) string {
	return filepath.Join(f.dir, "objects", sum[:2], sum)
}

// ageFile makes an object look placed two hours ago, past the grace
// period: a directory's by its mtime; S3 objects cannot be aged, and their
// stores have no grace period (setupOn).
func (f *fixture) ageFile(t *testing.T, sum string) {
	t.Helper()
	if f.kind == kindS3 {
		return
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(f.objectPath(sum), old, old); err != nil {
		t.Fatal(err)
	}
}

// exists reports whether the object of sum is stored.
func (f *fixture) exists(t *testing.T, sum string) bool {
	t.Helper()
	_, err := f.store.Backend().Stat(f.ctx, sum)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// deleteJob deletes a job row, and so its artifact rows, as a prune does.
func (f *fixture) deleteJob(t *testing.T, id int64) {
	t.Helper()
	if _, err := f.pool.Exec(f.ctx, "DELETE FROM jobs WHERE id = $1", id); err != nil {
		t.Fatal(err)
	}
}

func TestCollectFilesKeepsReferenced(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, kind string) {
		f := setupOn(t, kind)
		png := artifacttest.PNG(t, 4, 4)
		l1 := f.lease(t)
		a1, err := f.store.Put(f.ctx, l1, "one.png", bytes.NewReader(png))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.q.Complete(f.ctx, l1, nil); err != nil {
			t.Fatal(err)
		}
		l2 := f.lease(t)
		if _, err := f.store.Put(f.ctx, l2, "two.png", bytes.NewReader(png)); err != nil {
			t.Fatal(err)
		}
		f.ageFile(t, a1.SHA256)
		f.wantStorage(t, 1, int64(len(png)))

		f.deleteJob(t, l1.JobID)
		res, err := f.store.CollectFiles(f.ctx, queue.FileGCRequest{Candidates: []string{a1.SHA256}, Sweep: true})
		if err != nil {
			t.Fatal(err)
		}
		if res.Files != 0 || !f.exists(t, a1.SHA256) {
			t.Fatalf("collected %+v: a file another job references must stay", res)
		}

		f.deleteJob(t, l2.JobID)
		res, err = f.store.CollectFiles(f.ctx, queue.FileGCRequest{DryRun: true, Sweep: true})
		if err != nil || res.Files != 1 || res.Bytes != int64(len(png)) || !f.exists(t, a1.SHA256) {
			t.Fatalf("dry run: %+v %v, want 1 file of %d bytes counted and kept", res, err, len(png))
		}
		res, err = f.store.CollectFiles(f.ctx, queue.FileGCRequest{Candidates: []string{a1.SHA256}})
		if err != nil || res.Files != 1 || res.Bytes != int64(len(png)) {
			t.Fatalf("collected %+v %v, want the unreferenced file", res, err)
		}
		if f.exists(t, a1.SHA256) {
			t.Fatal("unreferenced file still there")
		}
		if files := f.files(t); len(files) != 0 {
			t.Fatalf("left behind: %v", files)
		}
		f.wantStorage(t, 0, 0)
	})
}

// wantStorage checks the kept storage figures.
func (f *fixture) wantStorage(t *testing.T, files, bytes int64) {
	t.Helper()
	got, err := f.q.ArtifactStorage(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got != (queue.Storage{ArtifactFiles: files, ArtifactBytes: bytes}) {
		t.Fatalf("storage %+v, want %d files, %d bytes", got, files, bytes)
	}
}

// A file no row names is still kept while it is young: an upload places
// its file before it records the row.
func TestCollectFilesSweepGrace(t *testing.T) {
	t.Parallel()
	f := setup(t)
	young, old := []byte("young\n"), []byte("old\n")
	for _, b := range [][]byte{young, old} {
		path := f.objectPath(sum(b))
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	f.ageFile(t, sum(old))
	res, err := f.store.CollectFiles(f.ctx, queue.FileGCRequest{Sweep: true})
	if err != nil || res.Files != 1 || res.Bytes != int64(len(old)) {
		t.Fatalf("sweep: %+v %v, want the old orphan", res, err)
	}
	if f.exists(t, sum(old)) || !f.exists(t, sum(young)) {
		t.Fatal("sweep removed the wrong file")
	}
	// The sweep sets the figures to what stays, files written behind the
	// store's back included.
	f.wantStorage(t, 1, int64(len(young)))
}

// Another process uploads the same content while the collector decides:
// after the collector found no row, before it moves the file. The upload
// finds the file and reuses it; the file must survive.
func TestCollectFilesConcurrentReupload(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, kind string) {
		f := setupOn(t, kind)
		png := artifacttest.PNG(t, 5, 5)
		l1 := f.lease(t)
		a1, err := f.store.Put(f.ctx, l1, "one.png", bytes.NewReader(png))
		if err != nil {
			t.Fatal(err)
		}
		f.deleteJob(t, l1.JobID)
		f.ageFile(t, a1.SHA256)

		// A second store on the same directory: another server.
		other := f.newStore(t, artifact.Limits{})
		var reup queue.Artifact
		f.store.SetGCHooks(0, func(string) {
			l2 := f.lease(t)
			if reup, err = other.Put(f.ctx, l2, "again.png", bytes.NewReader(png)); err != nil {
				t.Error(err)
			}
		})
		res, err := f.store.CollectFiles(f.ctx, queue.FileGCRequest{Candidates: []string{a1.SHA256}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Files != 0 {
			t.Fatalf("collected %+v during a re-upload", res)
		}
		_, file, err := f.store.Open(f.ctx, reup.ID)
		if err != nil {
			t.Fatalf("the re-uploaded artifact's file is gone: %v", err)
		}
		_ = file.Close()
		if files := f.files(t); len(files) != 1 {
			t.Fatalf("files = %v, want the one object", files)
		}
	})
}

// Many uploads of one content while the collector runs without pause:
// every upload's row must name an object that is there, however the
// removals and the uploads interleave. Each uploader deletes its job once
// it has checked, so the object keeps becoming unreferenced and the
// collector keeps removing it.
func TestCollectFilesRacingUploads(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, kind string) {
		f := setupOn(t, kind)
		f.store.SetGCHooks(0, nil)
		png := artifacttest.PNG(t, 6, 6)
		// Each uploader runs at least minRounds rounds and goes on until
		// the collector has removed the object wantRemovals times: with
		// several uploaders a moment with no row is rare on a slow backend
		// (S3 under -race), and the test is about those moments.
		const uploaders, minRounds, wantRemovals = 4, 12, 5
		deadline := time.Now().Add(2 * time.Minute)
		done := make(chan struct{})
		var removed, uploads atomic.Int64
		gcDone := make(chan error, 1)
		go func() {
			for {
				select {
				case <-done:
					gcDone <- nil
					return
				default:
				}
				res, err := f.store.CollectFiles(f.ctx, queue.FileGCRequest{Candidates: []string{sum(png)}})
				if err != nil {
					gcDone <- err
					return
				}
				removed.Add(res.Files)
			}
		}()
		var wg sync.WaitGroup
		for u := range uploaders {
			wg.Go(func() {
				for round := 0; round < minRounds || removed.Load() < wantRemovals && time.Now().Before(deadline); round++ {
					l := f.leaseOn(t, fmt.Sprintf("uploader-%d", u))
					a, err := f.store.Put(f.ctx, l, "same.png", bytes.NewReader(png))
					if err != nil {
						t.Error(err)
						return
					}
					uploads.Add(1)
					// The row exists until this uploader deletes the job.
					meta, r, err := f.store.Open(f.ctx, a.ID)
					if err != nil {
						t.Errorf("artifact %d recorded, its object missing: %v", a.ID, err)
						return
					}
					got, err := io.ReadAll(r)
					_ = r.Close()
					if err != nil || !bytes.Equal(got, png) || meta.SHA256 != sum(png) {
						t.Errorf("artifact %d: read %d bytes, %v", a.ID, len(got), err)
					}
					f.deleteJob(t, l.JobID)
				}
			})
		}
		wg.Wait()
		close(done)
		if err := <-gcDone; err != nil {
			t.Fatal(err)
		}
		t.Logf("%d uploads, the collector removed the object %d times", uploads.Load(), removed.Load())
		if removed.Load() < wantRemovals {
			t.Fatalf("the collector removed the object %d times in %d uploads, want %d: the race was not exercised", removed.Load(), uploads.Load(), wantRemovals)
		}
	})
}
