package web_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/artifact/artifacttest"
	"github.com/leasehold/leasehold/web"
)

// setupBundle is an artifact fixture whose server also knows sessions,
// for the job page's Download link.
func setupBundle(t *testing.T) *artifactFixture {
	t.Helper()
	return setupBundleOn(t, kindDir)
}

// setupBundleOn is setupBundle on kind's backend.
func setupBundleOn(t *testing.T, kind string) *artifactFixture {
	t.Helper()
	f := setupArtifactsOn(t, kind)
	f.srv = httptest.NewServer(web.New(web.Config{
		Pool: f.pool, Queue: f.queue, Tokens: f.tokens, Logger: testLogger(f.logs), Auth: f.auth,
		ArtifactsDir: t.TempDir(), Metrics: f.metrics, Artifacts: f.store,
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func bundlePath(job int64, n any) string {
	return fmt.Sprintf("/api/v1/jobs/%d/attempts/%v/bundle", job, n)
}

// unzip reads a whole zip answer: entry names in order, and contents.
func unzip(t *testing.T, body []byte) ([]string, map[string][]byte) {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		t.Fatalf("not a zip: %v", err)
	}
	var names []string
	files := map[string][]byte{}
	for _, zf := range zr.File {
		rc, err := zf.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("%s: %v", zf.Name, err)
		}
		names = append(names, zf.Name)
		files[zf.Name] = b
	}
	return names, files
}

func TestAttemptBundle(t *testing.T) {
	t.Parallel()
	eachArtifactBackend(t, func(t *testing.T, kind string) {
		f := setupBundleOn(t, kind)
		l := f.claim(t)
		put := func(name string, content []byte) {
			t.Helper()
			if _, err := f.store.Put(f.ctx, l, name, bytes.NewReader(content)); err != nil {
				t.Fatal(err)
			}
		}
		progress := func(msg string) {
			t.Helper()
			if err := f.queue.Progress(f.ctx, l, 0.1, msg); err != nil {
				t.Fatal(err)
			}
		}
		shots := [][]byte{artifacttest.PNG(t, 10, 20), artifacttest.PNG(t, 11, 20), artifacttest.PNG(t, 12, 20)}
		logcat := []byte("I/ActivityManager: start\n")
		progress("open the app")
		put("home.png", shots[0])
		put("logcat.txt", logcat)
		progress("tap Settings")
		put("../settings.png", shots[1]) // the name's path goes
		put("settings.png", shots[2])
		if _, err := f.queue.Fail(f.ctx, l, "no toggle", false); err != nil {
			t.Fatal(err)
		}

		res := f.get(t, bundlePath(l.JobID, 1)).want(t, http.StatusOK)
		if ct := res.header.Get("Content-Type"); ct != "application/zip" {
			t.Errorf("Content-Type %q", ct)
		}
		disp, params, err := mime.ParseMediaType(res.header.Get("Content-Disposition"))
		if err != nil || disp != "attachment" || params["filename"] != fmt.Sprintf("job-%d-attempt-1.zip", l.JobID) {
			t.Errorf("Content-Disposition %q", res.header.Get("Content-Disposition"))
		}
		names, files := unzip(t, res.body)
		want := []string{"001-screenshot-home.png", "002-text-logcat.txt", "003-screenshot-settings.png", "004-screenshot-settings.png", "attempt.json"}
		if !reflect.DeepEqual(names, want) {
			t.Fatalf("entries %q, want %q", names, want)
		}
		for name, content := range map[string][]byte{want[0]: shots[0], want[1]: logcat, want[2]: shots[1], want[3]: shots[2]} {
			if !bytes.Equal(files[name], content) {
				t.Errorf("%s: %d bytes differ from the upload", name, len(files[name]))
			}
		}

		// attempt.json: the attempt and its events exactly as the job's API
		// shows them, its progress, and the steps.
		var manifest struct {
			JobID     int64            `json:"job_id"`
			Attempt   map[string]any   `json:"attempt"`
			Events    []map[string]any `json:"events"`
			Progress  []map[string]any `json:"progress"`
			Artifacts []map[string]any `json:"artifacts"`
			Steps     []struct {
				Step    int    `json:"step"`
				File    string `json:"file"`
				Message string `json:"message"`
			} `json:"steps"`
		}
		if err := json.Unmarshal(files["attempt.json"], &manifest); err != nil {
			t.Fatalf("attempt.json: %v\n%s", err, files["attempt.json"])
		}
		var job struct {
			Attempts []map[string]any `json:"attempts"`
			Events   []map[string]any `json:"events"`
		}
		f.get(t, fmt.Sprintf("/api/v1/jobs/%d", l.JobID)).want(t, http.StatusOK).decode(t, &job)
		var events []map[string]any
		for _, e := range job.Events {
			if e["attempt"] == float64(1) {
				events = append(events, e)
			}
		}
		if manifest.JobID != l.JobID || !reflect.DeepEqual(manifest.Attempt, job.Attempts[0]) {
			t.Errorf("attempt %v, want %v", manifest.Attempt, job.Attempts[0])
		}
		if !reflect.DeepEqual(manifest.Events, events) || len(events) < 4 {
			t.Errorf("events %v, want %v", manifest.Events, events)
		}
		if len(manifest.Progress) != 2 || manifest.Progress[1]["detail"].(map[string]any)["message"] != "tap Settings" {
			t.Errorf("progress %v", manifest.Progress)
		}
		if len(manifest.Artifacts) != 4 || manifest.Artifacts[1]["file"] != want[1] || manifest.Artifacts[1]["kind"] != "text" {
			t.Errorf("artifacts %v", manifest.Artifacts)
		}
		type step = struct {
			Step    int    `json:"step"`
			File    string `json:"file"`
			Message string `json:"message"`
		}
		if wantSteps := []step{{1, want[0], "open the app"}, {2, want[2], "tap Settings"}, {3, want[3], "tap Settings"}}; !reflect.DeepEqual(manifest.Steps, wantSteps) {
			t.Errorf("steps %+v, want %+v", manifest.Steps, wantSteps)
		}

		t.Run("Access", func(t *testing.T) {
			path := bundlePath(l.JobID, 1)
			for _, tc := range []struct {
				name, token string
				status      int
				errHas      string
			}{
				{"NoToken", "-", 401, "bearer token or session"},
				{"WorkerToken", f.worker, 403, "viewer role"},
				{"BadToken", "lh_nope", 401, "invalid"},
			} {
				res := f.do(t, call{method: http.MethodGet, path: path, token: tc.token}).want(t, tc.status)
				if msg, _ := res.json(t)["error"].(string); !strings.Contains(msg, tc.errHas) {
					t.Errorf("%s: error = %q, want it to mention %q", tc.name, msg, tc.errHas)
				}
			}
			// The job page's Download link: a signed-in browser.
			b := f.signIn(t, "alice")
			res := b.get(t, path).want(t, http.StatusOK)
			if names, _ := unzip(t, res.body); len(names) != 5 {
				t.Errorf("with a session: entries %q", names)
			}
		})

		t.Run("BadRequests", func(t *testing.T) {
			for _, tc := range []struct {
				path, field, errHas string
				status              int
			}{
				{"/api/v1/jobs/abc/attempts/1/bundle", "id", "positive integer", 400},
				{bundlePath(l.JobID, "x"), "n", "positive integer", 400},
				{bundlePath(l.JobID, 0), "n", "positive integer", 400},
				{bundlePath(l.JobID, "99999999999"), "n", "positive integer", 400},
				{bundlePath(l.JobID+1000, 1), "", "job not found", 404},
				{bundlePath(l.JobID, 2), "", "has no attempt 2", 404},
			} {
				body := f.get(t, tc.path).want(t, tc.status).json(t)
				if msg, _ := body["error"].(string); !strings.Contains(msg, tc.errHas) || (tc.field != "" && body["field"] != tc.field) {
					t.Errorf("%s: %v", tc.path, body)
				}
			}
		})
	})
}

// TestAttemptBundleStreams shows that the zip is written as the files are
// read, never built first: the second artifact's file is a named pipe
// that gets its bytes only after the client has received the whole first
// artifact. An answer built in memory (or one not flushed per file) never
// gets that far.
func TestAttemptBundleStreams(t *testing.T) {
	t.Parallel()
	f := setupBundle(t)
	l := f.claim(t)
	first, second := noisyPNG(t, 1000, 1000), artifacttest.PNG(t, 30, 30) // a few MB, then a little
	if _, err := f.store.Put(f.ctx, l, "first.png", bytes.NewReader(first)); err != nil {
		t.Fatal(err)
	}
	a2, err := f.store.Put(f.ctx, l, "second.png", bytes.NewReader(second))
	if err != nil {
		t.Fatal(err)
	}
	pipe := filepath.Join(f.dir, "objects", a2.SHA256[:2], a2.SHA256)
	if err := os.Remove(pipe); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	fed := false
	feed := func() {
		if fed {
			return
		}
		fed = true
		w, err := os.OpenFile(pipe, os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer w.Close()
		if _, err := w.Write(second); err != nil {
			t.Error(err)
		}
	}
	// On failure, a server still waiting on the pipe must not keep the
	// test's server from closing (cleanups run last in, first out).
	t.Cleanup(func() {
		if w, err := os.OpenFile(pipe, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	})

	ctx, cancel := context.WithTimeout(f.ctx, 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+bundlePath(l.JobID, 1), nil)
	req.Header.Set("Authorization", "Bearer "+f.admin)
	res, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("no answer before the second file was read: %v", err)
	}
	defer res.Body.Close()
	var got bytes.Buffer
	chunk := make([]byte, 32<<10)
	for !bytes.Contains(got.Bytes(), first) {
		n, err := res.Body.Read(chunk)
		got.Write(chunk[:n])
		if err != nil {
			t.Fatalf("after %d bytes, before the first file was all there: %v", got.Len(), err)
		}
	}
	if len(first) < 2<<20 {
		t.Fatalf("first file is only %d bytes", len(first))
	}
	feed()
	if _, err := io.Copy(&got, res.Body); err != nil {
		t.Fatal(err)
	}
	checkResponse(t, req, res.StatusCode, res.Header, got.Bytes())
	if res.Header.Get("Content-Length") != "" {
		t.Errorf("Content-Length %q: the answer was sized before it was sent", res.Header.Get("Content-Length"))
	}
	names, files := unzip(t, got.Bytes())
	if len(names) != 3 || !bytes.Equal(files["002-screenshot-second.png"], second) || !bytes.Equal(files["001-screenshot-first.png"], first) {
		t.Errorf("entries %q", names)
	}
}

// noisyPNG is a w×h PNG of random pixels, which do not compress: about
// 4 bytes a pixel.
func noisyPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewPCG(1, 2))
	for i := range img.Pix {
		img.Pix[i] = byte(r.Uint32())
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
