package web_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/artifact/artifacttest"
	"github.com/leasehold/leasehold/internal/testutil"
)

// A person who cancels a bundle download is not a server failure (issue
// 17: each was logged as an ERROR): the bundle ends at info, naming the
// job, and nothing is logged at error.
func TestAttemptBundleAbortedByClientIsNotAnError(t *testing.T) {
	t.Parallel()
	eachArtifactBackend(t, func(t *testing.T, kind string) {
		f := setupBundleOn(t, kind)
		// The images first: encoding three noisy 1200×1200 PNGs under
		// -race took a loaded CI longer than the claim's minute of lease.
		pngs := [][]byte{noisyPNG(t, 1200, 1200), noisyPNG(t, 1200, 1200), noisyPNG(t, 1200, 1200)}
		l := f.claim(t)
		for i, name := range []string{"a.png", "b.png", "c.png"} {
			if _, err := f.store.Put(f.ctx, l, name, bytes.NewReader(pngs[i])); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(f.ctx)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+bundlePath(l.JobID, 1), nil)
		req.Header.Set("Authorization", "Bearer "+f.admin)
		res, err := f.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(res.Body, make([]byte, 64<<10)); err != nil {
			t.Fatal(err)
		}
		cancel() // the browser's Cancel: the connection closes mid-bundle
		res.Body.Close()
		testutil.Eventually(t, 10*time.Second, "the aborted bundle logged", func() bool {
			return strings.Contains(f.logs.String(), "attempt bundle: the client went away")
		})
		for line := range strings.Lines(f.logs.String()) {
			if strings.Contains(line, "level=ERROR") {
				t.Errorf("logged as an error: %s", line)
			}
		}
		if !strings.Contains(f.logs.String(), "level=INFO msg=\"attempt bundle: the client went away\" job_id=") {
			t.Errorf("the info line does not name the job:\n%s", f.logs.String())
		}
	})
}

// Entry names a worker chose unpack as themselves on any system (issue
// 17): no drive or stream colon, no name over 255 bytes.
func TestAttemptBundleEntryNamesArePortable(t *testing.T) {
	t.Parallel()
	eachArtifactBackend(t, func(t *testing.T, kind string) {
		f := setupBundleOn(t, kind)
		l := f.claim(t)
		long := strings.Repeat("é", 250) + ".png" // 504 bytes, 254 characters
		for _, name := range []string{"C:evil.png", long, "aux.png. "} {
			if _, err := f.store.Put(f.ctx, l, name, bytes.NewReader(artifacttest.PNG(t, 4, 4))); err != nil {
				t.Fatalf("%q: %v", name, err)
			}
		}
		names, _ := unzip(t, f.get(t, bundlePath(l.JobID, 1)).want(t, http.StatusOK).body)
		if len(names) != 4 || names[0] != "001-screenshot-C_evil.png" || names[2] != "003-screenshot-aux.png" || names[3] != "attempt.json" {
			t.Errorf("entries %q", names)
		}
		for _, n := range names {
			if len(n) > 255 || strings.ContainsAny(n, `<>:"|?*\`) || strings.HasSuffix(n, ".") || strings.HasSuffix(n, " ") {
				t.Errorf("entry %q (%d bytes) does not unpack on Windows", n, len(n))
			}
		}
		// (The store keeps at most 255 bytes of a name, so its .png is gone
		// before the bundle; the entry is cut again for its prefix.)
		if !strings.HasPrefix(names[1], "002-screenshot-éé") || !utf8.ValidString(names[1]) {
			t.Errorf("the long name became %q", names[1])
		}
	})
}
