package e2e

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/artifact/artifacttest"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/s3test"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// multiStorage is the artifact storage of the servers of a multi-server
// test: one bucket on a real SeaweedFS (internal/s3test), reached
// through a counting proxy so that the test can say how many S3 requests
// a phase cost.
type multiStorage struct {
	// shared is the LEASEHOLD_ARTIFACTS of every server.
	shared string
	// env is what else a server needs to reach the bucket (endpoint,
	// region, credentials).
	env    []string
	srv    *s3test.Server
	bucket string
	// requests counts what the servers asked of the bucket.
	requests *s3Counter
}

// newMultiStorage starts SeaweedFS for t, with a bucket the servers
// create, and the counting proxy in front of it.
func newMultiStorage(t *testing.T) multiStorage {
	t.Helper()
	srv := s3test.Start(t)
	c := newS3Counter(t, srv.Endpoint)
	var env []string
	for _, kv := range srv.Env() {
		if strings.HasPrefix(kv, "AWS_ENDPOINT_URL=") {
			kv = "AWS_ENDPOINT_URL=" + c.url
		}
		env = append(env, kv)
	}
	var r [4]byte
	_, _ = rand.Read(r[:])
	bucket := "multi-" + hex.EncodeToString(r[:])
	return multiStorage{shared: "s3://" + bucket + "/lh", env: env, srv: srv, bucket: bucket, requests: c}
}

// serverEnv is the storage environment of a server whose working
// directory is dir (the same bucket for all).
func (s multiStorage) serverEnv(string) []string {
	return append([]string{"LEASEHOLD_ARTIFACTS=" + s.shared}, s.env...)
}

// objects lists the artifact objects in the bucket (their SHA-256).
func (s multiStorage) objects(t *testing.T, ctx context.Context) []string {
	t.Helper()
	keys, err := s3test.Keys(ctx, s.srv, s.bucket)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range keys {
		if strings.HasPrefix(k, "lh/objects/") {
			out = append(out, path.Base(k))
		}
	}
	return out
}

// s3Counter is a reverse proxy in front of an S3 server that counts the
// requests through it by kind: "PUT object", "GET object", "HEAD object",
// "DELETE object" (keys under objects/), "readiness" (the check that
// storage is writable, under tmp/) and "bucket" (listings, lookups).
// The Host header is passed on as it came, so signatures hold.
type s3Counter struct {
	url string
	mu  sync.Mutex
	n   map[string]int
}

func newS3Counter(t *testing.T, endpoint string) *s3Counter {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	c := &s3Counter{n: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := "bucket"
		switch {
		case strings.Contains(r.URL.Path, "/objects/"):
			kind = r.Method + " object"
		case strings.Contains(r.URL.Path, "/tmp/"):
			kind = "readiness"
		}
		c.mu.Lock()
		c.n[kind]++
		c.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

// snapshot returns the counts so far.
func (c *s3Counter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// since is what was counted after before, by kind, and in all; objects
// is the part that touched artifact objects.
func (c *s3Counter) since(before map[string]int) (diff map[string]int, total, objects int) {
	diff = map[string]int{}
	for k, v := range c.snapshot() {
		if d := v - before[k]; d > 0 {
			diff[k] = d
			total += d
			if strings.HasSuffix(k, " object") {
				objects += d
			}
		}
	}
	return diff, total, objects
}

// requestsServed counts the requests for path in a server's log.
func requestsServed(p *proc, path string) int {
	return strings.Count(p.out.String(), "path="+path+" ")
}

// Three servers with working directories of their own, one primary and
// its streaming standby as their read replica, one bucket on a real
// SeaweedFS, behind one Caddy running deploy/multi/Caddyfile. Remote
// workers claim through Caddy, and the claims reach every server; a drain
// of jobs without artifacts asks nothing of the bucket; the dashboard
// through Caddy is read from the replica with its lag shown, and a
// browser's submit is on the page it is sent to, whichever server
// answers. A screenshot uploaded through A is served by B and C (Range,
// ETag) and is in C's bundle. kill -9 of C: pages keep answering 200
// through Caddy and the workers finish every job. Then the same content
// uploaded through A and B at once, round after round, while retention
// on B runs over and over: every artifact is served whole, and the last
// pass leaves the bucket without objects.
//
// The replica's kill is TestReadReplicaServesPagesAndFallsBack's.
func TestThreeServersBehindCaddyShareOnlyTheDatabase(t *testing.T) {
	pair := newPGPair(t, pgPairOptions{})
	e := newEnvOn(t, pair.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e.ctx = ctx
	storage := newMultiStorage(t)
	const password = "correct-horse-battery"
	start := func(name string) *replica {
		dir := t.TempDir()
		env := append([]string{
			"LEASEHOLD_READ_DATABASE_URL=" + pair.readURL(), "LEASEHOLD_ADMIN_PASSWORD=" + password,
			"LEASEHOLD_TRUSTED_PROXIES=127.0.0.1", "LEASEHOLD_LOG_FORMAT=text",
		}, storage.serverEnv(dir)...)
		return e.startReplicaIn(dir, name, env...)
	}
	// The first migrates the database and creates the bucket; the others
	// start together.
	servers := []*replica{start("a")}
	started := make(chan *replica, 2)
	for _, name := range []string{"b", "c"} {
		go func() { started <- start(name) }()
	}
	servers = append(servers, <-started, <-started)
	slices.SortFunc(servers, func(x, y *replica) int { return strings.Compare(x.name, y.name) })
	var addrs []string
	for _, s := range servers {
		addrs = append(addrs, strings.TrimPrefix(s.url, "http://"))
		// Nothing of the artifacts on a server's disk.
		if _, err := os.Stat(filepath.Join(s.cmd.Dir, "artifacts")); err == nil {
			t.Errorf("%s made an artifact directory in its working directory", s.name)
		}
	}
	caddyfile, err := os.ReadFile("../deploy/multi/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	c := e.startCaddyBefore(string(caddyfile), addrs)
	front := c.url()
	api := client.New(front, e.token)

	// Workers know only Caddy.
	e.apiURL = front
	for _, name := range []string{"phone-1", "phone-2"} {
		e.startRemoteWorker(name, e.workerToken(name), "--id", name, "--executor", "noop", "--concurrency", "2", "--spool-dir", t.TempDir())
	}
	// Submits as a careful client does: each with its idempotency key,
	// sent again when the proxy answers 502. A POST Caddy had written to
	// a pooled connection of the server just killed ends in 502 (broken
	// pipe: seen on CI), and Caddy rightly never sends a POST twice; the
	// key makes the client's second send safe. Checked below: each key
	// made one job.
	submitted, resent := 0, 0
	submit := func(n int) []int64 {
		var ids []int64
		for range n {
			submitted++
			key := fmt.Sprintf("multi-%d", submitted)
			for try := 1; ; try++ {
				j, err := api.Submit(e.ctx, client.NewJob{Kind: "noop", IdempotencyKey: &key})
				var ce *client.Error
				if errors.As(err, &ce) && ce.Status == http.StatusBadGateway && try < 5 {
					resent++
					time.Sleep(200 * time.Millisecond)
					continue
				}
				if err != nil {
					t.Fatalf("submitting through Caddy: %v", err)
				}
				ids = append(ids, j.ID)
				break
			}
		}
		return ids
	}
	checkSubmits := func() {
		var jobs int
		if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM jobs WHERE idempotency_key LIKE 'multi-%'`).Scan(&jobs); err != nil {
			t.Error(err)
		} else if jobs != submitted {
			t.Errorf("%d jobs for %d idempotency keys (%d sent again after a 502)", jobs, submitted, resent)
		}
		t.Logf("%d submits through Caddy, %d sent again after a 502", submitted, resent)
	}
	before, drainStart := storage.requests.snapshot(), time.Now()
	const drained = 200
	for _, id := range submit(drained) {
		e.waitFor(id, 60*time.Second, client.StateSucceeded)
	}
	// The drain's cost on S3: jobs without artifacts touch no object.
	// What the bucket saw meanwhile is the readiness probes (Caddy's,
	// every 5 s per server) and listings, by the clock, not by the job.
	byKind, total, objects := storage.requests.since(before)
	took := time.Since(drainStart)
	t.Logf("drain of %d jobs in %v: %d S3 requests (%v), %d on objects: %.3f object requests a job",
		drained, took.Round(time.Millisecond), total, byKind, objects, float64(objects)/drained)
	if objects != 0 {
		t.Errorf("a drain of jobs without artifacts made %d requests on objects: %v", objects, byKind)
	}
	for _, s := range servers {
		if n := requestsServed(s.proc, "/api/v1/worker/claim"); n == 0 {
			t.Errorf("%s served no claim: Caddy does not spread them", s.name)
		} else {
			t.Logf("%s served %d claims, %d page loads", s.name, n, requestsServed(s.proc, "/"))
		}
	}

	// The dashboard through Caddy, from the replica.
	b := e.signInPages(front, password)
	e.eventually("the overview through Caddy read from the replica", 10*time.Second, func() bool {
		return b.readFrom() == "replica, lag 0s"
	})
	// A submit, then its page and the list, from whichever server.
	loc := b.submitForm("com.example.multi")
	for range 6 {
		if status, body := b.get(loc); status != http.StatusOK || !strings.Contains(body, "com.example.multi") {
			t.Errorf("the job page after a submit, through Caddy: %d", status)
		}
		if _, body := b.get("/jobs"); !strings.Contains(body, "com.example.multi") {
			t.Error("/jobs after a submit, through Caddy, does not show it")
		}
	}

	t.Run("ScreenshotThroughAServedByBAndC", func(t *testing.T) { screenshotServedByOthers(t, e, servers) })

	// kill -9 of one server.
	probe := probePages(b, api, "/", "/jobs", "/workers", "/queues", loc)
	time.Sleep(500 * time.Millisecond)
	victim := servers[2]
	victim.signal(t, syscall.SIGKILL)
	_ = victim.wait(t, 5*time.Second)
	ids := submit(20)
	for _, id := range ids {
		e.waitFor(id, 60*time.Second, client.StateSucceeded)
	}
	rounds, refused := probe.end()
	if len(refused) > 0 {
		t.Errorf("%d of %d page rounds through Caddy failed after %s was killed:\n%s", len(refused), rounds, victim.name, strings.Join(refused, "\n"))
	}
	t.Logf("%s killed: %d jobs submitted after it succeeded, %d page+stats rounds through Caddy, none failed", victim.name, len(ids), rounds)
	// Back on the replica once this browser's pin (its submit) is over.
	e.eventually("the overview after the kill read from the replica", 15*time.Second, func() bool {
		return b.readFrom() == "replica, lag 0s"
	})

	checkSubmits()
	// Retention deletes every finished job from here on: the pages
	// above are done with.
	t.Run("SameContentThroughAAndBWhileBPrunes", func(t *testing.T) { sameContentWhilePruning(t, e, storage, servers[0], servers[1]) })
}

// prune runs `server prune` as server on would (its working directory and
// storage), removing every finished job and every object no row names,
// however young; it returns how many objects it removed.
func prune(t *testing.T, e *env, storage multiStorage, on *replica) (int, error) {
	p := e.spawnIn(on.cmd.Dir, "server prune", []string{"prune", "--retention", "succeeded=1s,cancelled=1s,dead=1s", "--file-grace", "0s"},
		storage.serverEnv(on.cmd.Dir)...)
	if err := p.wait(t, 60*time.Second); err != nil {
		return 0, fmt.Errorf("server prune: %v\n%s", err, p.out.String())
	}
	m := regexp.MustCompile(`removed (\d+) artifact files`).FindStringSubmatch(p.out.String())
	if m == nil {
		return 0, fmt.Errorf("server prune printed:\n%s", p.out.String())
	}
	n, _ := strconv.Atoi(m[1])
	return n, nil
}

// sameContentWhilePruning uploads one screenshot through a and through b
// at once, for a job each, round after round, while `server prune` runs
// on b's configuration in a loop, removing the object whenever no row
// names it (between rounds, once the jobs are done and deleted; and
// racing the uploads). An upload whose object a pass removed under it
// writes it again (the content's lock, see artifact/gc.go): every
// artifact is served whole through the third server. The last pass,
// with nothing running, leaves no object in the bucket.
func sameContentWhilePruning(t *testing.T, e *env, storage multiStorage, a, b *replica) {
	shot := artifacttest.PNG(t, 64, 48)
	want := sha256.Sum256(shot)
	uploaders := []*worker.Remote{}
	for i, s := range []*replica{a, b} {
		r, err := worker.NewRemote(s.url, e.workerToken(fmt.Sprintf("racer-%d", i)), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		uploaders = append(uploaders, r)
	}
	api := client.New(a.url, e.token)

	stop := make(chan struct{})
	var passes, removed atomic.Int64
	var pruning sync.WaitGroup
	pruning.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, err := prune(t, e, storage, b)
			if err != nil {
				t.Error(err)
				return
			}
			removed.Add(int64(n))
			passes.Add(1)
			// A pass every few hundred milliseconds, not back to back:
			// the machine is shared.
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(100+mrand.IntN(300)) * time.Millisecond):
			}
		}
	})
	before := storage.requests.snapshot()
	// Until the passes have removed the object a few times (at least a
	// dozen rounds, at most 60).
	var served, rounds int
	var lastDone time.Time
	for round := 0; round < 12 || removed.Load() < 3; round++ {
		if round == 60 {
			t.Errorf("60 rounds and the passes removed the object %d times", removed.Load())
			break
		}
		rounds++
		var leases []queue.Lease
		for _, u := range uploaders {
			j, err := api.Submit(e.ctx, client.NewJob{Kind: "shot", Queue: "race"})
			if err != nil {
				t.Fatal(err)
			}
			claim, err := u.Claim(e.ctx, queue.ClaimParams{Queues: []string{"race"}, Limit: 1})
			if err != nil || len(claim.Jobs) != 1 || claim.Jobs[0].ID != j.ID {
				t.Fatalf("round %d: claiming job %d: %v %+v", round, j.ID, err, claim.Jobs)
			}
			l := queue.Lease{JobID: j.ID, Token: claim.Jobs[0].LeaseToken}
			if _, err := u.Heartbeat(e.ctx, l); err != nil {
				t.Fatalf("confirming the hand-over: %v", err)
			}
			leases = append(leases, l)
		}
		var uploads sync.WaitGroup
		errs := make([]error, len(uploaders))
		for i, u := range uploaders {
			uploads.Go(func() {
				_, errs[i] = u.UploadArtifact(e.ctx, leases[i], "screen.png", 0, bytes.NewReader(shot))
			})
		}
		uploads.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: upload through %s: %v", round, []string{a.name, b.name}[i], err)
			}
		}
		// Each artifact of the round, whole, from the server that did not
		// take its upload.
		for i, l := range leases {
			d, err := api.Get(e.ctx, l.JobID)
			if err != nil || len(d.Artifacts) != 1 {
				t.Fatalf("round %d: job %d: %v, %d artifacts", round, l.JobID, err, len(d.Artifacts))
			}
			from := []*replica{b, a}[i]
			body := fetchArtifact(t, e, from.url, d.Artifacts[0].ID)
			if sha256.Sum256(body) != want {
				t.Fatalf("round %d: artifact %d from %s: %d bytes, not the upload", round, d.Artifacts[0].ID, from.name, len(body))
			}
			served++
		}
		for i, u := range uploaders {
			if _, err := u.Complete(e.ctx, leases[i], json.RawMessage(`{}`)); err != nil {
				t.Fatal(err)
			}
		}
		lastDone = time.Now()
		// Not a wait for a condition: the next uploads are meant to land
		// at any moment of a pass, and the jobs just finished become
		// removable one second (the retention) from now.
		time.Sleep(time.Duration(800+mrand.IntN(800)) * time.Millisecond)
	}
	close(stop)
	pruning.Wait()
	byKind, _, _ := storage.requests.since(before)
	t.Logf("%d rounds of two uploads of one content through %s and %s, %d prune passes on %s meanwhile removed the object %d times; %d PUTs of it (%v); %d artifacts served whole",
		rounds, a.name, b.name, passes.Load(), b.name, removed.Load(), byKind["PUT object"], byKind, served)
	// The last round's jobs go only once their one second of retention
	// is over: a pass before that (the loop's last sleep may be 0.8 s)
	// rightly keeps their object (seen on CI).
	time.Sleep(time.Until(lastDone.Add(1500 * time.Millisecond)))
	last, err := prune(t, e, storage, b)
	if err != nil {
		t.Fatal(err)
	}
	if left := storage.objects(t, e.ctx); len(left) != 0 {
		t.Errorf("after retention on %s (%d removed by its last pass) the bucket still has %d objects: %v", b.name, last, len(left), left)
	}
}

// fetchArtifact is GET /artifacts/ID of base, whole, as the admin.
func fetchArtifact(t *testing.T, e *env, base string, id int64) []byte {
	t.Helper()
	req, _ := http.NewRequestWithContext(e.ctx, http.MethodGet, base+"/artifacts/"+strconv.FormatInt(id, 10), nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/artifacts/%d: %d %v %.200s", base, id, res.StatusCode, err, body)
	}
	return body
}

// screenshotServedByOthers runs a sim job on a worker that reaches
// server A alone, then fetches one of its screenshots from B and C:
// whole, by Range, and revalidated by ETag; and C's bundle of the
// attempt holds it.
func screenshotServedByOthers(t *testing.T, e *env, servers []*replica) {
	a := servers[0]
	saved := e.apiURL
	e.apiURL = a.url
	e.startRemoteWorker("phone-a", e.workerToken("phone-a"), "--id", "phone-a", "--queues", "shots", "--spool-dir", t.TempDir())
	e.apiURL = saved
	job, err := client.New(a.url, e.token).Submit(e.ctx, client.NewJob{Kind: "app_investigation", Queue: "shots",
		Payload: []byte(`{"app":"com.example.shots","instructions":"look","steps":2,"step_ms":50}`)})
	if err != nil {
		t.Fatal(err)
	}
	d := e.waitFor(job.ID, 30*time.Second, client.StateSucceeded)
	if len(d.Artifacts) == 0 {
		t.Fatal("the job has no screenshot")
	}
	shot := d.Artifacts[0]
	if uploads := requestsServed(a.proc, "/api/v1/worker/jobs/"+strconv.FormatInt(job.ID, 10)+"/artifacts"); uploads == 0 {
		t.Fatalf("%s took none of the job's uploads", a.name)
	}
	path := "/artifacts/" + strconv.FormatInt(shot.ID, 10)
	for _, s := range servers[1:] {
		get := func(h map[string]string) (*http.Response, []byte) {
			req, _ := http.NewRequestWithContext(e.ctx, http.MethodGet, s.url+path, nil)
			req.Header.Set("Authorization", "Bearer "+e.token)
			for k, v := range h {
				req.Header.Set(k, v)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, err := io.ReadAll(res.Body)
			if err != nil {
				t.Fatal(err)
			}
			return res, body
		}
		whole, body := get(nil)
		if sum := sha256.Sum256(body); whole.StatusCode != http.StatusOK || whole.Header.Get("ETag") == "" || hex.EncodeToString(sum[:]) != shot.SHA256 {
			t.Errorf("%s: GET %s: %d, ETag %q, %d bytes (want %d hashing to its sha256)", s.name, path, whole.StatusCode, whole.Header.Get("ETag"), len(body), shot.Size)
			continue
		}
		if r, part := get(map[string]string{"Range": "bytes=8-23"}); r.StatusCode != http.StatusPartialContent || !bytes.Equal(part, body[8:24]) {
			t.Errorf("%s: Range bytes=8-23: %d, %d bytes, same as the whole's: %v", s.name, r.StatusCode, len(part), bytes.Equal(part, body[8:24]))
		}
		if r, _ := get(map[string]string{"If-None-Match": whole.Header.Get("ETag")}); r.StatusCode != http.StatusNotModified {
			t.Errorf("%s: If-None-Match: %d", s.name, r.StatusCode)
		}
		t.Logf("%s served artifact %d (%d bytes) uploaded through %s: 200, 206, 304 (ETag %s)", s.name, shot.ID, len(body), a.name, whole.Header.Get("ETag"))
	}

	// The attempt's bundle from C.
	c := servers[2]
	req, _ := http.NewRequestWithContext(e.ctx, http.MethodGet, fmt.Sprintf("%s/api/v1/jobs/%d/attempts/%d/bundle", c.url, job.ID, shot.Attempt), nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	zipped, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("the bundle from %s: %d %v", c.name, res.StatusCode, err)
	}
	zr, err := zip.NewReader(bytes.NewReader(zipped), int64(len(zipped)))
	if err != nil {
		t.Fatalf("the bundle from %s is no zip: %v", c.name, err)
	}
	inBundle := map[string]bool{}
	for _, zf := range zr.File {
		rc, err := zf.Open()
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		_, err = io.Copy(h, rc)
		rc.Close()
		if err != nil {
			t.Fatalf("bundle entry %s: %v", zf.Name, err)
		}
		inBundle[hex.EncodeToString(h.Sum(nil))] = true
	}
	for _, art := range d.Artifacts {
		if art.Attempt == shot.Attempt && !inBundle[art.SHA256] {
			t.Errorf("the bundle from %s (%d entries) lacks artifact %d (%s)", c.name, len(zr.File), art.ID, art.Name)
		}
	}
	t.Logf("the bundle from %s: %d entries, every artifact of attempt %d among them", c.name, len(zr.File), shot.Attempt)
}
