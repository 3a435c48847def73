package web_test

import (
	"bytes"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/artifact/artifacttest"
)

func TestArtifactGet(t *testing.T) {
	t.Parallel()
	eachArtifactBackend(t, func(t *testing.T, kind string) {
		f := setupArtifactsOn(t, kind)
		l := f.claim(t)
		png := artifacttest.PNG(t, 30, 20)
		img, err := f.store.Put(f.ctx, l, "screen.png", bytes.NewReader(png))
		if err != nil {
			t.Fatal(err)
		}
		text := []byte("<hierarchy><node text=\"<script>alert(1)</script>\"/></hierarchy>\n")
		dump, err := f.store.Put(f.ctx, l, `ui "dump"; é.xml`, bytes.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}

		res := f.get(t, "/artifacts/"+itoa(img.ID)).want(t, http.StatusOK)
		for h, want := range map[string]string{
			"Content-Type":            "image/png",
			"X-Content-Type-Options":  "nosniff",
			"Content-Security-Policy": "default-src 'none'; sandbox",
			"Cache-Control":           "private, max-age=31536000, immutable",
			"Content-Disposition":     `inline; filename=screen.png`,
			"Content-Length":          itoa(int64(len(png))),
			"Etag":                    `"` + img.SHA256 + `"`,
		} {
			if got := res.header.Get(h); got != want {
				t.Errorf("%s = %q, want %q", h, got, want)
			}
		}
		if !bytes.Equal(res.body, png) {
			t.Error("served bytes differ")
		}

		res = f.get(t, "/artifacts/"+itoa(dump.ID)).want(t, http.StatusOK)
		if ct := res.header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
			t.Errorf("text Content-Type = %q", ct)
		}
		disp, params, err := mime.ParseMediaType(res.header.Get("Content-Disposition"))
		if err != nil || disp != "attachment" || params["filename"] != `ui "dump"; é.xml` {
			t.Errorf("Content-Disposition %q: %s %v %v", res.header.Get("Content-Disposition"), disp, params, err)
		}
		if res.header.Get("X-Content-Type-Options") != "nosniff" || !bytes.Equal(res.body, text) {
			t.Errorf("text answer: %v %q", res.header, res.body)
		}

		t.Run("RangeAndHead", func(t *testing.T) {
			res := f.do(t, call{method: http.MethodGet, path: "/artifacts/" + itoa(img.ID), header: map[string]string{"Range": "bytes=0-7"}})
			res.want(t, http.StatusPartialContent)
			if !bytes.Equal(res.body, png[:8]) {
				t.Errorf("range body = %q", res.body)
			}
			res = f.do(t, call{method: http.MethodHead, path: "/artifacts/" + itoa(img.ID)}).want(t, http.StatusOK)
			if len(res.body) != 0 || res.header.Get("Content-Length") != itoa(int64(len(png))) || res.header.Get("Content-Type") != "image/png" {
				t.Errorf("HEAD: %v, %d bytes", res.header, len(res.body))
			}
			f.do(t, call{method: http.MethodGet, path: "/artifacts/" + itoa(img.ID),
				header: map[string]string{"If-None-Match": `"` + img.SHA256 + `"`}}).want(t, http.StatusNotModified)
		})

		// A range past the end answers the JSON error every other refusal
		// answers (as web/openapi.json says), not net/http's text/plain.
		t.Run("RangeNotSatisfiable", func(t *testing.T) {
			res := f.do(t, call{method: http.MethodGet, path: "/artifacts/" + itoa(img.ID),
				header: map[string]string{"Range": "bytes=100000-"}}).want(t, http.StatusRequestedRangeNotSatisfiable)
			if ct := res.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("416 Content-Type = %q, want application/json", ct)
			}
			if msg, _ := res.json(t)["error"].(string); !strings.Contains(msg, "range") {
				t.Errorf("416 error = %q, want it to mention the range", msg)
			}
			if cr := res.header.Get("Content-Range"); cr != "bytes */"+itoa(int64(len(png))) {
				t.Errorf("416 Content-Range = %q, want bytes */%d", cr, len(png))
			}
			for _, h := range []string{"Content-Disposition", "Etag", "Cache-Control"} {
				if v := res.header.Get(h); v != "" {
					t.Errorf("416 answer has %s %q", h, v)
				}
			}
		})

		t.Run("Refusals", func(t *testing.T) {
			path := "/artifacts/" + itoa(img.ID)
			for _, tc := range []struct {
				name, path, token string
				status            int
				errHas            string
			}{
				{"NoToken", path, "-", 401, "bearer"},
				{"WorkerToken", path, f.worker, 403, "viewer role"},
				{"BadToken", path, "lh_nope", 401, "invalid"},
				{"Unknown", "/artifacts/999999", "", 404, "artifact not found"},
				{"NotANumber", "/artifacts/abc", "", 400, "positive integer"},
				{"Negative", "/artifacts/-1", "", 400, "positive integer"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					res := f.do(t, call{method: http.MethodGet, path: tc.path, token: tc.token}).want(t, tc.status)
					if msg, _ := res.json(t)["error"].(string); !strings.Contains(msg, tc.errHas) {
						t.Errorf("error = %q, want it to mention %q", msg, tc.errHas)
					}
				})
			}
		})

		t.Run("FileMissing", func(t *testing.T) {
			f.removeObject(t, dump.SHA256)
			res := f.get(t, "/artifacts/"+itoa(dump.ID)).want(t, http.StatusNotFound)
			if msg, _ := res.json(t)["error"].(string); msg != "artifact file is missing" {
				t.Errorf("error = %q", msg)
			}
		})
	})
}

func TestArtifactStorageReadiness(t *testing.T) {
	t.Parallel()
	f := setupArtifacts(t)
	res := f.do(t, call{method: http.MethodGet, path: "/health/ready", token: "-"}).want(t, http.StatusOK)
	if res.json(t)["artifact_storage"] != "ok" {
		t.Errorf("body = %s", res.body)
	}
	// Tests may run as root, whom permissions do not stop; nothing can be
	// created under a regular file. ArtifactsDir stays fine, so this shows
	// that the store's own directory is what is checked.
	tmp := filepath.Join(f.dir, "tmp")
	if err := os.Remove(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	res = f.do(t, call{method: http.MethodGet, path: "/health/ready", token: "-"}).want(t, http.StatusServiceUnavailable)
	body := res.json(t)
	if s, _ := body["artifact_storage"].(string); !strings.HasPrefix(s, "not writable: ") || body["database"] != "ok" {
		t.Errorf("body = %s", res.body)
	}
}
