package artifact_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/artifact"
	"github.com/leasehold/leasehold/artifact/artifacttest"
	"github.com/leasehold/leasehold/db/dbtest"
	"github.com/leasehold/leasehold/internal/s3test"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
)

type fixture struct {
	ctx   context.Context
	q     *queue.Client
	pool  *pgxpool.Pool
	store *artifact.Store
	kind  string
	// base holds the directory store (dir) or the S3 store's spool, and
	// nothing else, so that a file written outside the store shows up in
	// it.
	base, dir string
	// s3 is the S3 store's configuration (kind S3).
	s3  artifact.S3Config
	srv *s3test.Server
}

// The backends every storage test runs on.
const (
	kindDir = "Dir"
	kindS3  = "S3"
)

// eachBackend runs fn as a parallel subtest per backend: the directory
// and S3 (a real SeaweedFS).
func eachBackend(t *testing.T, fn func(t *testing.T, kind string)) {
	t.Helper()
	for _, kind := range []string{kindDir, kindS3} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			fn(t, kind)
		})
	}
}

// setup is a directory store.
func setup(t *testing.T, limits ...artifact.Limits) *fixture {
	t.Helper()
	return setupOn(t, kindDir, limits...)
}

// setupOn is a store on kind's backend; an S3 one has a bucket of its own
// on the package's SeaweedFS and a grace period of zero (objects cannot
// be aged by hand as files can).
func setupOn(t *testing.T, kind string, limits ...artifact.Limits) *fixture {
	t.Helper()
	pool := dbtest.NewPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	f := &fixture{ctx: ctx, q: queue.NewClient(pool, slog.New(slog.DiscardHandler)), pool: pool, base: t.TempDir(), kind: kind}
	f.dir = filepath.Join(f.base, "store")
	var l artifact.Limits
	if len(limits) > 0 {
		l = limits[0]
	}
	if kind == kindS3 {
		f.srv = sharedS3(t)
		var r [6]byte
		_, _ = rand.Read(r[:])
		cfg, err := artifact.S3ConfigFromEnv("s3://t-"+hex.EncodeToString(r[:])+"/pfx", f.srv.Getenv)
		if err != nil {
			t.Fatal(err)
		}
		cfg.SpoolDir = filepath.Join(f.base, "spool")
		f.s3 = cfg
	}
	f.store = f.newStore(t, l)
	if kind == kindS3 {
		f.store.SetGCHooks(0, nil)
	}
	return f
}

// newStore is another store on the same storage: another server's.
func (f *fixture) newStore(t *testing.T, l artifact.Limits) *artifact.Store {
	t.Helper()
	if f.kind == kindDir {
		s, err := artifact.New(f.dir, f.q, l)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	b, err := artifact.NewS3(f.ctx, f.s3)
	if err != nil {
		t.Fatal(err)
	}
	return artifact.NewStore(b, f.q, l)
}

// lease submits a job and claims it.
func (f *fixture) lease(t *testing.T) queue.Lease {
	t.Helper()
	return f.leaseOn(t, "default")
}

// leaseOn is lease on a queue of its own: goroutines that lease at once
// each use their own queue, so that none claims another's job.
func (f *fixture) leaseOn(t *testing.T, queueName string) queue.Lease {
	t.Helper()
	testutil.InsertJob(t, f.ctx, f.q, testutil.Job{Queue: queueName})
	j := testutil.ClaimJob(t, f.ctx, f.q, "w1", queueName, time.Minute)
	return queue.Lease{JobID: j.ID, Token: j.LeaseToken, WorkerID: "w1"}
}

// files lists what the store left anywhere: the regular files under base
// (relative to it) and, for S3, every key of the bucket as
// "bucket/KEY".
func (f *fixture) files(t *testing.T) []string {
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
		keys, err := s3test.Keys(f.ctx, f.srv, f.s3.Bucket)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			out = append(out, "bucket/"+k)
		}
	}
	return out
}

// objectName is how files lists the object of sum.
func (f *fixture) objectName(sum string) string {
	if f.kind == kindS3 {
		return "bucket/pfx/objects/" + sum[:2] + "/" + sum
	}
	return filepath.Join("store", "objects", sum[:2], sum)
}

// object reads the stored bytes of sum, bypassing the rows.
func (f *fixture) object(t *testing.T, sum string) ([]byte, error) {
	t.Helper()
	r, err := f.store.Backend().Open(f.ctx, sum)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestPutImages(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, kind string) {
		f := setupOn(t, kind)
		l := f.lease(t)
		for _, tc := range []struct {
			name, file, contentType string
			data                    []byte
			w, h                    int32
		}{
			{"PNG", "screen.png", "image/png", artifacttest.PNG(t, 37, 23), 37, 23},
			{"JPEG", "screen.jpg", "image/jpeg", artifacttest.JPEG(t, 41, 19), 41, 19},
			// The name's extension does not decide the type; the content does.
			{"JPEGNamedPNG", "screen.png", "image/jpeg", artifacttest.JPEG(t, 8, 9), 8, 9},
			{"NoName", "", "image/png", artifacttest.PNG(t, 2, 3), 2, 3},
			{"WebPLossless", "a.webp", "image/webp", artifacttest.WebPLossless, 3, 2},
			{"WebPLossy", "a.webp", "image/webp", artifacttest.WebPLossy, 1, 1},
			{"WebPExtended", "a.webp", "image/webp", artifacttest.WebPAlpha, 1, 1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a, err := f.store.Put(f.ctx, l, tc.file, bytes.NewReader(tc.data))
				if err != nil {
					t.Fatal(err)
				}
				if a.ID == 0 || a.Kind != queue.ArtifactScreenshot || a.ContentType != tc.contentType ||
					a.Size != int64(len(tc.data)) || a.SHA256 != sum(tc.data) || a.Name != cmpOr(tc.file, "artifact") {
					t.Errorf("artifact = %+v", a)
				}
				if a.Width == nil || a.Height == nil || *a.Width != tc.w || *a.Height != tc.h {
					t.Errorf("size = %v×%v, want %d×%d", a.Width, a.Height, tc.w, tc.h)
				}
				got, err := f.object(t, a.SHA256)
				if err != nil || !bytes.Equal(got, tc.data) {
					t.Errorf("stored file: %v, equal %v", err, bytes.Equal(got, tc.data))
				}
				meta, file, err := f.store.Open(f.ctx, a.ID)
				if err != nil {
					t.Fatal(err)
				}
				defer file.Close()
				if got, _ := io.ReadAll(file); meta.SHA256 != a.SHA256 || !bytes.Equal(got, tc.data) {
					t.Errorf("Open: %+v", meta)
				}
			})
		}
		if files := f.files(t); len(files) != 7 {
			t.Errorf("files = %v, want the 7 objects and nothing in progress", files)
		}
	})
}

func TestPutText(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, kind string) {
		f := setupOn(t, kind)
		l := f.lease(t)
		text := []byte(strings.Repeat("logcat: écran ✓ 𝄞 ok\n", 100))
		for _, tc := range []struct {
			name string
			r    io.Reader
		}{
			// Runes split across reads must not look invalid.
			{"OneByteReads", iotest.OneByteReader(bytes.NewReader(text))},
			{"HalfReads", iotest.HalfReader(bytes.NewReader(text))},
			{"Whole", bytes.NewReader(text)},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a, err := f.store.Put(f.ctx, l, "logcat.LOG", tc.r)
				if err != nil {
					t.Fatal(err)
				}
				if a.Kind != queue.ArtifactText || a.ContentType != "text/plain; charset=utf-8" || a.Size != int64(len(text)) ||
					a.SHA256 != sum(text) || a.Width != nil || a.Height != nil {
					t.Errorf("artifact = %+v", a)
				}
			})
		}
		if _, err := f.store.Put(f.ctx, l, "empty.txt", strings.NewReader("")); err != nil {
			t.Errorf("empty text: %v", err)
		}
	})
}

func TestPutRejects(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, kind string) {
		f := setupOn(t, kind)
		l := f.lease(t)
		png := artifacttest.PNG(t, 20, 20)
		jpg := artifacttest.JPEG(t, 20, 20)
		badCRC := bytes.Clone(png)
		badCRC[len(badCRC)-20] ^= 0xff // inside the IDAT data
		hugeJPEG := bytes.Clone(jpg)
		i := bytes.Index(hugeJPEG, []byte{0xff, 0xc0})
		copy(hugeJPEG[i+5:], []byte{0xea, 0x60, 0xea, 0x60}) // 60000×60000
		bigCanvas := bytes.Clone(artifacttest.WebPAlpha)
		copy(bigCanvas[24:], []byte{0x1f, 0x4e, 0x00, 0x1f, 0x4e, 0x00}) // 20000×20000
		for _, tc := range []struct {
			name, file string
			data       []byte
			reason     string
		}{
			{"HTMLNamedPNG", "x.png", []byte(artifacttest.HTML), "HTML"},
			{"SVG", "x.svg", []byte(artifacttest.SVG), "SVG"},
			{"SVGNamedPNG", "x.png", []byte(" \n<svg xmlns='http://www.w3.org/2000/svg'/>"), "SVG"},
			{"GIF", "x.gif", artifacttest.GIF(t, 4, 4), "image/gif"},
			{"BMP", "x.png", []byte(artifacttest.BMP), "image/bmp"},
			{"Empty", "x.png", nil, "empty"},
			{"Unknown", "x.png", []byte{1, 2, 3, 4, 5}, "not a PNG, JPEG or WebP"},
			{"PasswdNotText", "../../etc/passwd", []byte("root:x:0:0:root:/root:/bin/bash\n"), "text"},
			{"PNGTruncated", "x.png", png[:len(png)/2], "truncated"},
			{"PNGWithoutIEND", "x.png", png[:len(png)-12], "truncated"},
			{"PNGBadCRC", "x.png", badCRC, "CRC"},
			{"PNGTrailingData", "x.png", append(bytes.Clone(png), "<html>"...), "after its end"},
			{"PNGHuge", "x.png", artifacttest.PNGDeclaring(50000, 50000), "50000×50000"},
			{"PNGTooWide", "x.png", artifacttest.PNGDeclaring(10001, 1), "10001×1"},
			{"PNGZero", "x.png", artifacttest.PNGDeclaring(0, 10), "empty image"},
			{"PNGSignatureOnly", "x.png", png[:8], "truncated"},
			{"JPEGTruncated", "x.jpg", jpg[:len(jpg)-2], "truncated"},
			{"JPEGHalf", "x.jpg", jpg[:len(jpg)/2], "truncated"},
			{"JPEGTrailingData", "x.jpg", append(bytes.Clone(jpg), "PK\x03\x04"...), "after its end"},
			{"JPEGHuge", "x.jpg", hugeJPEG, "60000×60000"},
			{"WebPTruncated", "x.webp", artifacttest.WebPLossy[:30], "RIFF size"},
			{"WebPTrailingData", "x.webp", append(bytes.Clone(artifacttest.WebPLossy), 0, 0), "RIFF size"},
			{"WebPHugeCanvas", "x.webp", bigCanvas, "20000×20000"},
			{"WebPNoImage", "x.webp", []byte("RIFF\x16\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"), "no image data"},
			{"TextInvalidUTF8", "a.txt", []byte("ok\xff\xfe"), "UTF-8 (at byte 2)"},
			{"TextCutRune", "a.log", []byte("ok \xe2\x9c"), "UTF-8 (at byte 3)"},
			{"TextNUL", "a.xml", []byte("<a>\x00</a>"), "NUL byte at byte 3"},
			{"BinaryNamedText", "a.txt", png, "UTF-8"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				start := time.Now()
				_, err := f.store.Put(f.ctx, l, tc.file, bytes.NewReader(tc.data))
				var rejected *artifact.RejectedError
				if !errors.As(err, &rejected) {
					t.Fatalf("err = %v, want a RejectedError", err)
				}
				if !strings.Contains(rejected.Reason, tc.reason) {
					t.Errorf("reason = %q, want it to mention %q", rejected.Reason, tc.reason)
				}
				if d := time.Since(start); d > time.Second {
					t.Errorf("refusing took %v", d)
				}
			})
		}
		if files := f.files(t); len(files) != 0 {
			t.Errorf("refused uploads left files: %v", files)
		}
	})
}

func TestPutTooLarge(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, kind string) {
		f := setupOn(t, kind, artifact.Limits{MaxImageBytes: 4096, MaxTextBytes: 100})
		l := f.lease(t)
		big := artifacttest.JPEG(t, 300, 300)
		if _, err := f.store.Put(f.ctx, l, "big.jpg", bytes.NewReader(big)); !errors.Is(err, artifact.ErrTooLarge) {
			t.Errorf("%d-byte JPEG: %v", len(big), err)
		}
		if _, err := f.store.Put(f.ctx, l, "a.txt", strings.NewReader(strings.Repeat("x", 101))); !errors.Is(err, artifact.ErrTooLarge) {
			t.Errorf("101-byte text: %v", err)
		}
		if _, err := f.store.Put(f.ctx, l, "a.txt", strings.NewReader(strings.Repeat("x", 100))); err != nil {
			t.Errorf("100-byte text: %v", err)
		}
		// A huge body is read no further than the limit (and one buffer).
		s := &artifacttest.Stream{Prefix: artifacttest.PNGDeclaring(10, 10)[:33], Size: 1 << 30}
		if _, err := f.store.Put(f.ctx, l, "big.png", s); !errors.Is(err, artifact.ErrTooLarge) {
			t.Errorf("endless PNG: %v", err)
		}
		if s.Pulled() > 4096+64<<10 {
			t.Errorf("read %d bytes of an endless body with a 4096-byte limit", s.Pulled())
		}
		if files := f.files(t); len(files) != 1 {
			t.Errorf("files = %v, want only the 100-byte text", files)
		}
	})
}

func TestPutNameNeverAPath(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, kind string) {
		f := setupOn(t, kind)
		l := f.lease(t)
		png := artifacttest.PNG(t, 3, 3)
		for _, tc := range []struct{ name, want string }{
			{"../../../../etc/passwd.png", "passwd.png"},
			{`..\..\windows\evil.png`, "evil.png"},
			{"/abs/x.png", "x.png"},
			{"..", "artifact"},
			{"dir/", "artifact"},
		} {
			a, err := f.store.Put(f.ctx, l, tc.name, bytes.NewReader(png))
			if err != nil {
				t.Fatalf("%q: %v", tc.name, err)
			}
			if a.Name != tc.want {
				t.Errorf("%q stored as %q, want %q", tc.name, a.Name, tc.want)
			}
		}
		want := f.objectName(sum(png))
		if files := f.files(t); len(files) != 1 || files[0] != want {
			t.Errorf("files = %v, want only %s", files, want)
		}
	})
}

func TestCleanName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"screen.png":             "screen.png",
		"a/b/c.txt":              "c.txt",
		"  spaced .log ":         "spaced .log",
		"bell\a\r\n\x00.txt":     "bell.txt",
		"gnp\u202e.exe":          "gnp.exe", // right-to-left override
		"bad\xffutf8.png":        "badutf8.png",
		"":                       "artifact",
		"/":                      "artifact",
		"quote\"and;.png":        "quote\"and;.png", // the web layer quotes it
		strings.Repeat("é", 200): strings.Repeat("é", 127),
	} {
		if got := artifact.CleanName(in); got != want {
			t.Errorf("CleanName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPutStaleLease(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, kind string) {
		f := setupOn(t, kind)
		stale := f.lease(t)
		if _, err := f.q.Release(f.ctx, stale); err != nil {
			t.Fatal(err)
		}
		jobs, err := f.q.Claim(f.ctx, queue.ClaimParams{WorkerID: "w2", Queues: []string{"default"}, Limit: 1, Lease: time.Minute})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("reclaiming: %v", err)
		}
		current := queue.Lease{JobID: jobs[0].ID, Token: jobs[0].LeaseToken, WorkerID: "w2"}
		png := artifacttest.PNG(t, 5, 5)

		if _, err := f.store.Put(f.ctx, stale, "x.png", bytes.NewReader(png)); !errors.Is(err, queue.ErrLeaseLost) {
			t.Fatalf("stale Put: %v, want ErrLeaseLost", err)
		}
		if files := f.files(t); len(files) != 0 {
			t.Errorf("a refused upload left %v", files)
		}
		// A file that another artifact names stays when a stale upload of the
		// same content is refused.
		if _, err := f.store.Put(f.ctx, current, "x.png", bytes.NewReader(png)); err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.Put(f.ctx, stale, "x.png", bytes.NewReader(png)); !errors.Is(err, queue.ErrLeaseLost) {
			t.Fatalf("stale Put: %v, want ErrLeaseLost", err)
		}
		if files := f.files(t); len(files) != 1 {
			t.Errorf("files = %v, want the one artifact's", files)
		}
		gone := queue.Lease{JobID: 1 << 40, Token: 1, WorkerID: "w2"}
		if _, err := f.store.Put(f.ctx, gone, "x.png", bytes.NewReader(png)); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("unknown job: %v, want ErrNotFound", err)
		}
	})
}

func TestPutSharesContent(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, kind string) {
		f := setupOn(t, kind)
		l := f.lease(t)
		png := artifacttest.PNG(t, 4, 4)
		a1, err1 := f.store.Put(f.ctx, l, "one.png", bytes.NewReader(png))
		a2, err2 := f.store.Put(f.ctx, l, "two.png", bytes.NewReader(png))
		if err1 != nil || err2 != nil || a1.ID == a2.ID || a1.SHA256 != a2.SHA256 || a2.Name != "two.png" {
			t.Fatalf("%+v %v; %+v %v", a1, err1, a2, err2)
		}
		if files := f.files(t); len(files) != 1 {
			t.Errorf("files = %v, want one shared file", files)
		}
	})
}

func TestOpenUnknown(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, kind string) {
		f := setupOn(t, kind)
		if _, _, err := f.store.Open(f.ctx, 12345); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("Open: %v, want ErrNotFound", err)
		}
	})
}

func TestStorage(t *testing.T) {
	t.Parallel()
	f := setup(t)
	want := artifact.Limits{MaxImageBytes: 10 << 20, MaxWidth: 10000, MaxHeight: 10000, MaxTextBytes: 5 << 20}
	if got := f.store.Limits(); got != want {
		t.Errorf("default limits = %+v", got)
	}
	for _, d := range []string{"objects", "tmp"} {
		if fi, err := os.Stat(filepath.Join(f.dir, d)); err != nil || fi.Mode().Perm() != 0o750 {
			t.Errorf("%s: %v %v", d, fi.Mode(), err)
		}
	}
	if err := f.store.CheckWritable(f.ctx); err != nil {
		t.Errorf("CheckWritable: %v", err)
	}
	if files := f.files(t); len(files) != 0 {
		t.Errorf("CheckWritable left %v", files)
	}
	// Permissions do not stop root; nothing can be created under a file.
	if err := os.Remove(filepath.Join(f.dir, "tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "tmp"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := f.store.CheckWritable(f.ctx); err == nil {
		t.Error("CheckWritable succeeded with tmp a regular file")
	}
	if _, err := artifact.New(filepath.Join(f.dir, "tmp", "store"), f.q, artifact.Limits{}); err == nil {
		t.Error("New succeeded under a regular file")
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
