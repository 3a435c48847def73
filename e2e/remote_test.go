package e2e

import (
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
)

// workerToken creates a worker token with the server's own command and
// returns the secret, which it prints alone on its last line.
func (e *env) workerToken(name string) string {
	e.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "server"), "token", "create", "--role", "worker", "--name", name)
	cmd.Env = append(cmd.Environ(), "DATABASE_URL="+e.dbURL)
	out, err := cmd.Output()
	if err != nil {
		e.t.Fatalf("server token create: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func (e *env) startRemoteWorker(name, token string, args ...string) *proc {
	e.t.Helper()
	return e.spawn("worker "+name, append([]string{"--server-url", e.apiURL, "--token", token}, args...))
}

// A worker at home reaches only the server. The server dies and comes
// back within the lease: the job goes on and succeeds in its one attempt.
// The server stays away longer than the lease: the worker stops the job
// before its lease could have run out, and writes nothing stale after.
func TestRemoteWorkerRidesOutServerRestarts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	server := e.startServer()
	token := e.workerToken("home-1")
	// The first outage must stay shorter than the lease: a restart of the
	// server took more than the 3 s a 4 s lease leaves under CI's load.
	w := e.startRemoteWorker("home-1", token, "--lease", "8s", "--heartbeat", "500ms")

	short := e.submit(map[string]any{"app": "com.example.short", "sim": map[string]any{"steps": 6, "step_ms": 500}})
	e.eventually("the worker runs the job", 20*time.Second, func() bool {
		return e.count("SELECT count(*) FROM job_timeline WHERE job_id = $1 AND type = 'progress'", short) > 0
	})
	server.signal(t, syscall.SIGKILL)
	_ = server.wait(t, 10*time.Second)
	time.Sleep(time.Second)
	server = e.startServer()
	e.eventually("the job succeeds after the restart", 30*time.Second, func() bool {
		return e.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'succeeded'", short) == 1
	})
	if n := e.count("SELECT count(*) FROM job_attempts WHERE job_id = $1", short); n != 1 {
		t.Fatalf("%d attempts, want the one that rode out the restart", n)
	}

	long := e.submit(map[string]any{"app": "com.example.long", "sim": map[string]any{"steps": 40, "step_ms": 250}})
	// Its first progress event: the worker has the job, not just the
	// database (a claim whose answer a dying server never sent is a job
	// the worker does not know it holds; the reaper takes that one back).
	e.eventually("the worker runs the long job", 20*time.Second, func() bool {
		return e.count("SELECT count(*) FROM job_timeline WHERE job_id = $1 AND type = 'progress'", long) > 0
	})
	server.signal(t, syscall.SIGKILL)
	_ = server.wait(t, 10*time.Second)
	e.eventually("the worker fences itself", 15*time.Second, func() bool {
		return strings.Contains(w.out.String(), "fencing: lease could not be renewed in time")
	})
	var fencedBefore bool
	if err := e.pool.QueryRow(e.ctx, "SELECT lease_until > now() FROM jobs WHERE id = $1", long).Scan(&fencedBefore); err != nil {
		t.Fatal(err)
	}
	if !fencedBefore {
		t.Fatal("the worker stopped the job only after its lease had run out")
	}
	e.startServer()
	e.eventually("the long job is reclaimed", 20*time.Second, func() bool {
		return e.count("SELECT count(*) FROM job_attempts WHERE job_id = $1 AND number = 1 AND outcome = 'lease_expired'", long) == 1
	})
	if n := e.count("SELECT count(*) FROM job_timeline WHERE job_id = $1 AND type = 'stale_write_refused'", long); n != 0 {
		t.Fatalf("the fenced worker still tried %d stale writes", n)
	}
	if !w.alive() {
		t.Fatal("the worker exited during the outage")
	}
}

// A worker at home runs the sim: each step's screenshot reaches the
// server and is served as a PNG. The job's first attempt performs its
// external effect and then fails; the second succeeds without performing
// it again: the receiver sees one call, carrying the job's key.
func TestRemoteSimScreenshotsAndEffectOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startServer()
	var mu sync.Mutex
	var keys []string
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	defer receiver.Close()
	e.startRemoteWorker("home-2", e.workerToken("home-2"), "--lease", "5s")
	id := e.submit(map[string]any{"app": "com.example.notes", "sim": map[string]any{
		"steps": 3, "step_ms": 100, "fail_attempts": 1, "effect_url": receiver.URL,
	}})
	if d := e.waitFor(id, 30*time.Second, client.StateSucceeded, client.StateDead); d.State != client.StateSucceeded || d.Attempt != 2 {
		t.Fatalf("the job ended %s on attempt %d, want succeeded on its second", d.State, d.Attempt)
	}
	mu.Lock()
	got := append([]string(nil), keys...)
	mu.Unlock()
	if want := fmt.Sprintf("%d:sim-effect", id); len(got) != 1 || got[0] != want {
		t.Fatalf("the receiver saw %q, want one call with %q", got, want)
	}

	detail, err := e.client().Get(e.ctx, id)
	if err != nil {
		t.Fatalf("job detail: %v", err)
	}
	perAttempt := map[int32]int{}
	for _, a := range detail.Artifacts {
		if a.ContentType == "image/png" {
			perAttempt[a.Attempt]++
		}
	}
	if perAttempt[1] != 3 || perAttempt[2] != 3 {
		t.Fatalf("screenshots per attempt %v, want 3 each (one per step)", perAttempt)
	}
	if len(detail.Effects) != 1 || detail.Effects[0].State != "done" {
		t.Fatalf("effects %+v", detail.Effects)
	}
	req, _ := http.NewRequest("GET", e.apiURL+detail.Artifacts[0].URL, nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	img, err := png.Decode(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" ||
		resp.Header.Get("X-Content-Type-Options") != "nosniff" || err != nil {
		t.Fatalf("screenshot served %d %q nosniff=%q, decodes: %v", resp.StatusCode,
			resp.Header.Get("Content-Type"), resp.Header.Get("X-Content-Type-Options"), err)
	}
	if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
		t.Fatalf("screenshot is %v", b)
	}
	req.Header.Del("Authorization")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("screenshot without a token: %v %v", resp.StatusCode, err)
	}
}
