package artifact_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasehold/leasehold/artifact"
	"github.com/leasehold/leasehold/artifact/artifacttest"
	"github.com/leasehold/leasehold/queue"
)

// objectPath is where the store keeps the content with this hash.
func (f *fixture) objectPath(sum string) string {
	return filepath.Join(f.dir, "objects", sum[:2], sum)
}

// ageFile makes a file look placed two hours ago, past the grace period.
func (f *fixture) ageFile(t *testing.T, sum string) {
	t.Helper()
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(f.objectPath(sum), old, old); err != nil {
		t.Fatal(err)
	}
}

// deleteJob deletes a job row, and so its artifact rows, as a prune does.
func (f *fixture) deleteJob(t *testing.T, id int64) {
	t.Helper()
	if _, err := f.pool.Exec(f.ctx, "DELETE FROM jobs WHERE id = $1", id); err != nil {
		t.Fatal(err)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func TestCollectFilesKeepsReferenced(t *testing.T) {
	t.Parallel()
	f := setup(t)
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
	if res.Files != 0 || !exists(f.objectPath(a1.SHA256)) {
		t.Fatalf("collected %+v: a file another job references must stay", res)
	}

	f.deleteJob(t, l2.JobID)
	res, err = f.store.CollectFiles(f.ctx, queue.FileGCRequest{DryRun: true, Sweep: true})
	if err != nil || res.Files != 1 || res.Bytes != int64(len(png)) || !exists(f.objectPath(a1.SHA256)) {
		t.Fatalf("dry run: %+v %v, want 1 file of %d bytes counted and kept", res, err, len(png))
	}
	res, err = f.store.CollectFiles(f.ctx, queue.FileGCRequest{Candidates: []string{a1.SHA256}})
	if err != nil || res.Files != 1 || res.Bytes != int64(len(png)) {
		t.Fatalf("collected %+v %v, want the unreferenced file", res, err)
	}
	if exists(f.objectPath(a1.SHA256)) {
		t.Fatal("unreferenced file still there")
	}
	if files := f.files(t); len(files) != 0 {
		t.Fatalf("left behind: %v", files)
	}
	f.wantStorage(t, 0, 0)
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
	if exists(f.objectPath(sum(old))) || !exists(f.objectPath(sum(young))) {
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
	f := setup(t)
	png := artifacttest.PNG(t, 5, 5)
	l1 := f.lease(t)
	a1, err := f.store.Put(f.ctx, l1, "one.png", bytes.NewReader(png))
	if err != nil {
		t.Fatal(err)
	}
	f.deleteJob(t, l1.JobID)
	f.ageFile(t, a1.SHA256)

	// A second store on the same directory: another server.
	other, err := artifact.New(f.dir, f.q, artifact.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var reup queue.Artifact
	f.store.SetGCHooks(artifact.DefaultGCGrace, func(string) {
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
}
