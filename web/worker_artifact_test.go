package web_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/artifact"
	"github.com/leasehold/leasehold/artifact/artifacttest"
	"github.com/leasehold/leasehold/internal/s3test"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web"
)

// artifactFixture is a server with artifact storage on one backend: a
// directory (dir, alone under base, so that a file written outside the
// store shows up there) or a bucket of its own on the package's
// SeaweedFS (its uploads spooled under base).
type artifactFixture struct {
	*fixture
	store     *artifact.Store
	base, dir string
	kind      string
	s3        *s3test.Server
	bucket    string
}

// The artifact backends the web tests run on.
const (
	kindDir = "Dir"
	kindS3  = "S3"
)

// eachArtifactBackend runs fn as a parallel subtest per backend.
func eachArtifactBackend(t *testing.T, fn func(t *testing.T, kind string)) {
	t.Helper()
	for _, kind := range []string{kindDir, kindS3} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			fn(t, kind)
		})
	}
}

func setupArtifacts(t *testing.T) *artifactFixture {
	t.Helper()
	return setupArtifactsOn(t, kindDir)
}

// setupArtifactsOn is an artifact fixture on kind's backend.
func setupArtifactsOn(t *testing.T, kind string) *artifactFixture {
	t.Helper()
	f := &artifactFixture{fixture: setup(t), base: t.TempDir(), kind: kind}
	f.dir = filepath.Join(f.base, "store")
	var err error
	switch kind {
	case kindDir:
		if f.store, err = artifact.New(f.dir, f.queue, artifact.Limits{}); err != nil {
			t.Fatal(err)
		}
	case kindS3:
		f.s3 = s3test.Shared(t)
		var r [6]byte
		_, _ = rand.Read(r[:])
		f.bucket = "w-" + hex.EncodeToString(r[:])
		cfg, err := artifact.S3ConfigFromEnv("s3://"+f.bucket+"/pfx", f.s3.Getenv)
		if err != nil {
			t.Fatal(err)
		}
		cfg.SpoolDir = filepath.Join(f.base, "spool")
		b, err := artifact.NewS3(f.ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		f.store = artifact.NewStore(b, f.queue, artifact.Limits{})
	default:
		t.Fatalf("unknown backend %q", kind)
	}
	f.srv = httptest.NewServer(web.New(web.Config{
		Pool: f.pool, Queue: f.queue, Tokens: f.tokens, Logger: testLogger(f.logs),
		ArtifactsDir: t.TempDir(), Metrics: f.metrics, Artifacts: f.store,
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// objectsPrefix is how files names the stored objects.
func (f *artifactFixture) objectsPrefix() string {
	if f.kind == kindS3 {
		return "bucket/pfx/objects/"
	}
	return filepath.Join("store", "objects") + "/"
}

// removeObject removes the stored bytes of sum, leaving its rows.
func (f *artifactFixture) removeObject(t *testing.T, sum string) {
	t.Helper()
	if err := f.store.Backend().Delete(f.ctx, sum); err != nil {
		t.Fatal(err)
	}
}

// claim submits a job and claims it as the worker named "worker", whose
// token the fixture holds.
func (f *artifactFixture) claim(t *testing.T) queue.Lease {
	t.Helper()
	if _, _, err := f.queue.Insert(f.ctx, queue.NewJob{Kind: "shot"}); err != nil {
		t.Fatal(err)
	}
	jobs, err := f.queue.Claim(f.ctx, queue.ClaimParams{WorkerID: "worker", Queues: []string{"default"}, Limit: 1, Lease: time.Minute})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claiming: %v, %d jobs", err, len(jobs))
	}
	return queue.Lease{JobID: jobs[0].ID, Token: jobs[0].LeaseToken, WorkerID: "worker"}
}

// files lists what the store left anywhere: the regular files under
// base (relative to it) and, on S3, every key of the bucket as
// "bucket/KEY".
func (f *artifactFixture) files(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(f.base, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(f.base, path)
			out = append(out, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if f.kind == kindS3 {
		keys, err := s3test.Keys(f.ctx, f.s3, f.bucket)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			out = append(out, "bucket/"+k)
		}
	}
	return out
}

// part is one part of a multipart body; contentType is what the client
// claims, which the server ignores.
type part struct {
	field, filename, contentType string
	data                         []byte
}

func tokenPart(tok int64) part {
	return part{field: "lease_token", data: []byte(strconv.FormatInt(tok, 10))}
}

func filePart(name string, data []byte) part {
	return part{field: "file", filename: name, contentType: "application/octet-stream", data: data}
}

func multipartBody(t *testing.T, parts ...part) (body []byte, contentType string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		quote := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace
		cd := `form-data; name="` + quote(p.field) + `"`
		if p.filename != "" {
			cd += `; filename="` + quote(p.filename) + `"`
		}
		h.Set("Content-Disposition", cd)
		if p.contentType != "" {
			h.Set("Content-Type", p.contentType)
		}
		pw, err := w.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		pw.Write(p.data)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), w.FormDataContentType()
}

func uploadPath(id int64) string { return fmt.Sprintf("/api/v1/worker/jobs/%d/artifacts", id) }

// upload posts parts as the worker, or with token ("-" for none).
func (f *artifactFixture) upload(t *testing.T, id int64, token string, header map[string]string, parts ...part) *response {
	t.Helper()
	body, ct := multipartBody(t, parts...)
	h := map[string]string{"Content-Type": ct}
	maps.Copy(h, header)
	return f.do(t, call{method: http.MethodPost, path: uploadPath(id), body: body, token: orDefault(token, f.worker), header: h})
}

func orDefault(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// artifactJSON is an artifact as the API returns it.
type artifactJSON struct {
	ID          int64  `json:"id"`
	Attempt     int32  `json:"attempt"`
	Kind        string `json:"kind"`
	Name        string `json:"name"`
	ContentType string `json:"content_type"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
	Width       *int32 `json:"width"`
	Height      *int32 `json:"height"`
	URL         string `json:"url"`
	CreatedAt   string `json:"created_at"`
}

func TestArtifactUpload(t *testing.T) {
	t.Parallel()
	eachArtifactBackend(t, func(t *testing.T, kind string) {
		f := setupArtifactsOn(t, kind)
		l := f.claim(t)
		png := artifacttest.PNG(t, 64, 48)

		var a artifactJSON
		f.upload(t, l.JobID, "", nil, tokenPart(l.Token), filePart("screen.png", png)).want(t, http.StatusCreated).decode(t, &a)
		if a.ID == 0 || a.Attempt != 1 || a.Kind != "screenshot" || a.Name != "screen.png" || a.ContentType != "image/png" ||
			a.Size != int64(len(png)) || len(a.SHA256) != 64 || a.Width == nil || *a.Width != 64 || *a.Height != 48 ||
			a.URL != "/artifacts/"+itoa(a.ID) || a.CreatedAt == "" {
			t.Errorf("artifact = %+v", a)
		}
		got := f.get(t, a.URL).want(t, http.StatusOK)
		if !bytes.Equal(got.body, png) {
			t.Error("served bytes differ from the upload")
		}

		// With the token in a header, the file may come first.
		jpg := artifacttest.JPEG(t, 10, 20)
		f.upload(t, l.JobID, "", map[string]string{"X-Lease-Token": itoa(l.Token)},
			filePart("shot.jpg", jpg), part{field: "note", data: []byte("ignored")}).want(t, http.StatusCreated).decode(t, &a)
		if a.ContentType != "image/jpeg" || *a.Width != 10 || *a.Height != 20 {
			t.Errorf("JPEG artifact = %+v", a)
		}
		f.upload(t, l.JobID, "", nil, tokenPart(l.Token), filePart("a.webp", artifacttest.WebPLossless)).want(t, http.StatusCreated).decode(t, &a)
		if a.ContentType != "image/webp" || *a.Width != 3 || *a.Height != 2 {
			t.Errorf("WebP artifact = %+v", a)
		}
		a = artifactJSON{}
		f.upload(t, l.JobID, "", nil, tokenPart(l.Token), filePart("logcat.txt", []byte("I/am: ✓\n"))).want(t, http.StatusCreated).decode(t, &a)
		if a.Kind != "text" || a.ContentType != "text/plain; charset=utf-8" || a.Width != nil {
			t.Errorf("text artifact = %+v", a)
		}

		var job struct {
			Artifacts []artifactJSON `json:"artifacts"`
		}
		f.get(t, "/api/v1/jobs/"+itoa(l.JobID)).want(t, http.StatusOK).decode(t, &job)
		if len(job.Artifacts) != 4 {
			t.Errorf("job lists %d artifacts, want 4", len(job.Artifacts))
		}
	})
}

// TestArtifactUploadHostile sends what a broken or malicious worker might:
// each gets a precise 4xx JSON error, never a 500, and nothing is stored.
func TestArtifactUploadHostile(t *testing.T) {
	t.Parallel()
	eachArtifactBackend(t, func(t *testing.T, kind string) {
		f := setupArtifactsOn(t, kind)
		l := f.claim(t)
		tok := tokenPart(l.Token)
		png := artifacttest.PNG(t, 100, 100)
		cutBody, cutType := multipartBody(t, tok, filePart("x.png", png))
		cutBody = cutBody[:len(cutBody)-len(png)/2]
		oversized := append(bytes.Clone(artifacttest.PNGDeclaring(10, 10)[:33]), make([]byte, 11<<20)...)
		for _, tc := range []struct {
			name   string
			path   string // default: the job's upload path
			token  string // default: the worker's; "-" for none
			parts  []part
			raw    []byte // instead of parts
			ctype  string // Content-Type of raw
			status int
			field  string
			errHas string
		}{
			{name: "HTMLLabelledPNG", parts: []part{tok, {field: "file", filename: "x.png", contentType: "image/png", data: []byte(artifacttest.HTML)}},
				status: 415, field: "file", errHas: "HTML"},
			{name: "SVG", parts: []part{tok, {field: "file", filename: "x.svg", contentType: "image/svg+xml", data: []byte(artifacttest.SVG)}},
				status: 415, errHas: "SVG"},
			{name: "GIF", parts: []part{tok, filePart("x.gif", artifacttest.GIF(t, 4, 4))}, status: 415, errHas: "image/gif"},
			{name: "TruncatedPNG", parts: []part{tok, filePart("x.png", png[:len(png)-30])}, status: 415, errHas: "truncated"},
			{name: "HugeDimensions", parts: []part{tok, filePart("x.png", artifacttest.PNGDeclaring(50000, 50000))},
				status: 415, errHas: "50000×50000 pixels"},
			{name: "Oversized", parts: []part{tok, filePart("x.png", oversized)}, status: 413, errHas: "limit"},
			{name: "PasswdNotAnImage", parts: []part{tok, filePart("../../etc/passwd", []byte("root:x:0:0:root:/root:/bin/bash\n"))},
				status: 415, errHas: "text"},
			{name: "NotMultipart", raw: []byte(`{"lease_token":1}`), ctype: "application/json", status: 400, errHas: "multipart"},
			{name: "NoBoundary", raw: []byte("--x\r\n"), ctype: "multipart/form-data", status: 400, errHas: "multipart"},
			{name: "CutOff", raw: cutBody, ctype: cutType, status: 400, errHas: "malformed multipart"},
			{name: "NoParts", raw: []byte("garbage"), ctype: "multipart/form-data; boundary=x", status: 400, field: "file"},
			{name: "BadPartHeader", raw: []byte("--x\r\nno colon here\r\n\r\ndata\r\n--x--\r\n"), ctype: "multipart/form-data; boundary=x",
				status: 400, errHas: "malformed multipart"},
			{name: "TokenNotANumber", parts: []part{{field: "lease_token", data: []byte("12abc")}, filePart("x.png", png)},
				status: 400, field: "lease_token", errHas: "integer"},
			{name: "TokenEmpty", parts: []part{{field: "lease_token"}, filePart("x.png", png)}, status: 400, field: "lease_token"},
			{name: "TokenMissing", parts: []part{filePart("x.png", png)}, status: 400, field: "lease_token", errHas: "before the file"},
			{name: "FileBeforeToken", parts: []part{filePart("x.png", png), tok}, status: 400, field: "lease_token"},
			{name: "FileMissing", parts: []part{tok}, status: 400, field: "file"},
			{name: "BadJobID", path: "/api/v1/worker/jobs/abc/artifacts", parts: []part{tok, filePart("x.png", png)}, status: 400, field: "id"},
			{name: "UnknownJob", path: uploadPath(1 << 40), parts: []part{tok, filePart("x.png", png)}, status: 404, errHas: "not found"},
			{name: "AdminToken", token: f.admin, parts: []part{tok, filePart("x.png", png)}, status: 403},
			{name: "NoToken", token: "-", parts: []part{tok, filePart("x.png", png)}, status: 401},
		} {
			t.Run(tc.name, func(t *testing.T) {
				body, ct := tc.raw, tc.ctype
				if tc.raw == nil {
					body, ct = multipartBody(t, tc.parts...)
				}
				start := time.Now()
				res := f.do(t, call{
					method: http.MethodPost, path: orDefault(tc.path, uploadPath(l.JobID)), body: body,
					token: orDefault(tc.token, f.worker), header: map[string]string{"Content-Type": ct},
				}).want(t, tc.status)
				if d := time.Since(start); d > 2*time.Second {
					t.Errorf("took %v", d)
				}
				e := res.json(t)
				if msg, _ := e["error"].(string); !strings.Contains(msg, tc.errHas) {
					t.Errorf("error = %q, want it to mention %q", msg, tc.errHas)
				}
				if tc.field != "" && e["field"] != tc.field {
					t.Errorf("field = %v, want %q", e["field"], tc.field)
				}
			})
		}
		if files := f.files(t); len(files) != 0 {
			t.Errorf("refused uploads left files: %v", files)
		}
		d, err := f.queue.Detail(f.ctx, l.JobID)
		if err != nil || len(d.Artifacts) != 0 {
			t.Errorf("job has %d artifacts (%v), want none", len(d.Artifacts), err)
		}
	})
}

func TestArtifactUploadNameIsNotAPath(t *testing.T) {
	t.Parallel()
	eachArtifactBackend(t, func(t *testing.T, kind string) {
		f := setupArtifactsOn(t, kind)
		l := f.claim(t)
		png := artifacttest.PNG(t, 3, 3)
		for _, tc := range []struct{ name, want string }{
			{"../../etc/passwd", "passwd"},
			{"../../../../tmp/evil.png", "evil.png"},
			{`..\..\windows\evil.png`, "evil.png"},
			{"..", "artifact"},
			{"b\u202egnp.exe", "bgnp.exe"}, // a right-to-left override
		} {
			var a artifactJSON
			f.upload(t, l.JobID, "", nil, tokenPart(l.Token), filePart(tc.name, png)).want(t, http.StatusCreated).decode(t, &a)
			if a.Name != tc.want {
				t.Errorf("%q stored as %q, want %q", tc.name, a.Name, tc.want)
			}
		}
		for _, file := range f.files(t) {
			if !strings.HasPrefix(file, f.objectsPrefix()) {
				t.Errorf("file %s is outside the store's objects", file)
			}
		}
	})
}

func TestArtifactUploadStaleLease(t *testing.T) {
	t.Parallel()
	eachArtifactBackend(t, func(t *testing.T, kind string) {
		f := setupArtifactsOn(t, kind)
		stale := f.claim(t)
		if _, err := f.queue.Release(f.ctx, stale); err != nil {
			t.Fatal(err)
		}
		current := f.claim(t)
		if current.JobID != stale.JobID || current.Token == stale.Token {
			t.Fatalf("reclaimed %+v after %+v", current, stale)
		}
		res := f.upload(t, stale.JobID, "", nil, tokenPart(stale.Token), filePart("x.png", artifacttest.PNG(t, 8, 8))).want(t, http.StatusConflict)
		if string(res.body) != "{\"error\":\"lease lost\",\"code\":\"lease_lost\"}\n" {
			t.Errorf("body = %s", res.body)
		}
		d, err := f.queue.Detail(f.ctx, stale.JobID)
		if err != nil {
			t.Fatal(err)
		}
		var refused int
		for _, e := range d.Events {
			var detail struct {
				Op         string `json:"op"`
				LeaseToken int64  `json:"lease_token"`
			}
			if e.Type == "stale_write_refused" && json.Unmarshal(e.Detail, &detail) == nil &&
				detail.Op == "artifact" && detail.LeaseToken == stale.Token {
				refused++
			}
		}
		if refused != 1 || len(d.Artifacts) != 0 {
			t.Errorf("%d stale_write_refused events, %d artifacts; events: %+v", refused, len(d.Artifacts), d.Events)
		}
		if files := f.files(t); len(files) != 0 {
			t.Errorf("a refused upload left files: %v", files)
		}
	})
}
