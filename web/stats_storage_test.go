package web_test

import (
	"net/http"
	"testing"

	"github.com/leasehold/leasehold/templates/htmltest"
)

// /api/v1/stats and the overview show what the artifact files take, from
// the kept figures.
func TestStatsStorage(t *testing.T) {
	t.Parallel()
	f := setup(t)
	type storage struct {
		Files int64 `json:"artifact_files"`
		Bytes int64 `json:"artifact_bytes"`
	}
	var s struct {
		Storage *storage `json:"storage"`
	}
	f.get(t, "/api/v1/stats").want(t, http.StatusOK).decode(t, &s)
	if s.Storage == nil || *s.Storage != (storage{}) {
		t.Fatalf("empty storage: %+v", s.Storage)
	}
	if err := f.queue.AddArtifactStorage(f.ctx, 2, 3<<20+1<<19); err != nil {
		t.Fatal(err)
	}
	f.get(t, "/api/v1/stats").want(t, http.StatusOK).decode(t, &s)
	if *s.Storage != (storage{Files: 2, Bytes: 3<<20 + 1<<19}) {
		t.Fatalf("storage: %+v", *s.Storage)
	}
	d := parseHTML(t, f.signIn(t, "alice").get(t, "/").want(t, http.StatusOK))
	if files, bytes := htmltest.Text(d.One(t, "storage-files")), htmltest.Text(d.One(t, "storage-bytes")); files != "2" || bytes != "3.5 MiB" {
		t.Errorf("overview storage: %q files, %q", files, bytes)
	}
}
