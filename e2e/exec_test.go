package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The exec contract with a real worker process: the command gets the
// payload and the LEASEHOLD_* variables, its JSON lines become events and
// the result, its screenshots are uploaded. When the lease is lost, a
// command that ignores SIGTERM is killed with its grandchild after the
// grace period: nothing of it is left on the phone's host.
func TestExecLeaseLossKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sh")
	pids := filepath.Join(dir, "pids")
	png, err := os.ReadFile("../examples/fakeadb/screen.png")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "screen.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte(`#!/bin/sh
payload=$(cat)
cp "`+dir+`/screen.png" "$LEASEHOLD_ARTIFACT_DIR/first.png"
echo '{"progress":0.5,"message":"started '"$LEASEHOLD_JOB_KIND"' attempt '"$LEASEHOLD_ATTEMPT"'"}'
case "$payload" in
*'"finish"'*)
  echo "plain log line"
  echo '{"result":{"echo":'"$payload"',"token":'"$LEASEHOLD_LEASE_TOKEN"'}}'
  exit 0 ;;
esac
trap '' TERM
sh -c 'trap "" TERM; while :; do sleep 1; done' &
echo "$$ $!" > "`+pids+`"
while :; do sleep 1; done
`), 0o755); err != nil {
		t.Fatal(err)
	}
	e.startServer()
	e.startWorker("exec-w", "--executor", "exec", "--exec", script, "--artifacts", e.artifacts,
		"--lease", "3s", "--heartbeat", "200ms", "--kill-grace", "500ms")

	done := e.submit(map[string]any{"app": "com.example.notes", "mode": "finish"})
	e.eventually("the finishing command succeeds", 30*time.Second, func() bool {
		return e.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'succeeded'", done) == 1
	})
	var result string
	if err := e.pool.QueryRow(e.ctx, "SELECT result::text FROM jobs WHERE id = $1", done).Scan(&result); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(result, `"app": "com.example.notes"`) || !strings.Contains(result, `"token"`) {
		t.Fatalf("result %s: want the payload echoed from stdin and the lease token", result)
	}
	if n := e.count("SELECT count(*) FROM job_timeline WHERE job_id = $1 AND type = 'progress' AND detail->>'message' = 'started app_investigation attempt 1'", done); n != 1 {
		t.Fatal("the JSON progress line did not become an event")
	}
	if n := e.count("SELECT count(*) FROM artifacts WHERE job_id = $1 AND content_type = 'image/png'", done); n != 1 {
		t.Fatalf("%d screenshots uploaded, want 1", n)
	}

	hang := e.submit(map[string]any{"app": "com.example.notes", "mode": "hang"})
	var leader, grandchild int
	e.eventually("the command and its grandchild run", 30*time.Second, func() bool {
		b, err := os.ReadFile(pids)
		if err != nil {
			return false
		}
		f := strings.Fields(string(b))
		if len(f) != 2 {
			return false
		}
		leader, _ = strconv.Atoi(f[0])
		grandchild, _ = strconv.Atoi(f[1])
		return leader > 0 && grandchild > 0
	})
	// Another holder takes the job over, as after a reclaim: the worker's
	// next heartbeat is refused.
	if _, err := e.pool.Exec(e.ctx, "UPDATE jobs SET lease_token = nextval('lease_token_seq') WHERE id = $1", hang); err != nil {
		t.Fatal(err)
	}
	e.eventually("the command and its grandchild are gone", 10*time.Second, func() bool {
		return gone(leader) && gone(grandchild)
	})
}

// gone reports whether no process has pid (a zombie not yet reaped by
// its parent counts as gone: it runs nothing).
func gone(pid int) bool {
	if syscall.Kill(pid, 0) == syscall.ESRCH {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err != nil || strings.Contains(string(stat), ") Z ")
}
