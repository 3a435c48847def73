//go:build unix

package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

type execRunResult struct {
	result json.RawMessage
	err    error
}

// setup returns an Exec running execHelperCommand(mode, args...), a job for
// it and a fake reporter.
func setupExec(t *testing.T, grace time.Duration, mode string, args ...string) (*Exec, queue.Job, *fakeReporter) {
	t.Helper()
	e, err := NewExec(execHelperCommand(mode, args...), grace, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	job := queue.Job{ID: 42, Kind: "app_investigation", Attempt: 3, LeaseToken: 77, Payload: json.RawMessage(`{"app":"com.example.notes"}`)}
	return e, job, newFakeReporter(job.ID, newFakeLedger())
}

func decodeExecResult(t *testing.T, raw json.RawMessage, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
}

func TestNewExec(t *testing.T) {
	t.Parallel()
	e, err := NewExec(`/opt/agent/run.sh --app "com.example notes" 'a b'`, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/opt/agent/run.sh", "--app", "com.example notes", "a b"}; !slices.Equal(e.args, want) {
		t.Errorf("args = %q, want %q", e.args, want)
	}
	if e.grace != 10*time.Second {
		t.Errorf("grace = %v, want the 10s default", e.grace)
	}
	for _, cmd := range []string{"", "   ", `"unterminated`} {
		if _, err := NewExec(cmd, 0, nil); err == nil {
			t.Errorf("NewExec(%q) succeeded", cmd)
		}
	}
}

func TestExecStdinAndEnv(t *testing.T) {
	t.Parallel()
	e, job, r := setupExec(t, 0, "env")
	raw, err := e.Run(t.Context(), job, r)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Stdin   string            `json:"stdin"`
		Env     map[string]string `json:"env"`
		DirMode string            `json:"dir_mode"`
	}
	decodeExecResult(t, raw, &got)
	if got.Stdin != string(job.Payload) {
		t.Errorf("stdin = %q, want the payload %s", got.Stdin, job.Payload)
	}
	want := map[string]string{"LEASEHOLD_JOB_ID": "42", "LEASEHOLD_JOB_KIND": "app_investigation",
		"LEASEHOLD_ATTEMPT": "3", "LEASEHOLD_LEASE_TOKEN": "77", "PATH": os.Getenv("PATH")}
	for k, v := range want {
		if got.Env[k] != v {
			t.Errorf("%s = %q, want %q", k, got.Env[k], v)
		}
	}
	if got.DirMode != "-rwx------" {
		t.Errorf("artifact dir mode = %q, want a private directory", got.DirMode)
	}
	if _, err := os.Stat(got.Env["LEASEHOLD_ARTIFACT_DIR"]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("artifact dir still there after Run: %v", err)
	}
	if !regexp.MustCompile(`^http://127\.0\.0\.1:\d+/[0-9a-f]{32}$`).MatchString(got.Env["LEASEHOLD_EFFECTS_URL"]) {
		t.Errorf("LEASEHOLD_EFFECTS_URL = %q", got.Env["LEASEHOLD_EFFECTS_URL"])
	}
}

func TestExecEvents(t *testing.T) {
	t.Parallel()
	e, job, r := setupExec(t, 0, "events")
	raw, err := e.Run(t.Context(), job, r)
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != `{"n":2}` {
		t.Errorf("result = %s, want the last result line", raw)
	}
	progress, _, _ := r.snapshot()
	want := []fakeProgress{{0.25, "opened settings"}, {0.25, "no fraction"}, {0.5, ""}}
	if !slices.Equal(progress, want) {
		t.Errorf("progress = %v, want %v", progress, want)
	}
	r.mu.Lock()
	steps := slices.Clone(r.steps)
	r.mu.Unlock()
	if !slices.Equal(steps, []int{1, 0, 0}) { // 2.5 names no step
		t.Errorf("progress steps = %v, want [1 0 0]", steps)
	}
	logFile, n := r.artifact("output.log")
	if n != 1 {
		t.Fatalf("output.log uploaded %d times", n)
	}
	log := string(logFile.data)
	for _, s := range []string{"plain log line", "warning: something", `{"not":"an event"}`, "[1,2]", "opened settings"} {
		if !strings.Contains(log, s) {
			t.Errorf("output.log lacks %q:\n%s", s, log)
		}
	}
	if strings.Contains(log, `"result"`) {
		t.Errorf("output.log holds the result lines:\n%s", log)
	}
}

func TestExecProgressRefused(t *testing.T) {
	t.Parallel()
	e, job, r := setupExec(t, 0, "events")
	r.loseLease() // every Progress and upload answers ErrLeaseLost
	raw, err := e.Run(t.Context(), job, r)
	if err != nil {
		t.Fatal(err)
	}
	// The reader went on past the refusals to the last result line.
	if string(raw) != `{"n":2}` {
		t.Errorf("result = %s, want the last result line", raw)
	}
}

func TestExecLongLine(t *testing.T) {
	t.Parallel()
	e, job, r := setupExec(t, 0, "longline")
	raw, err := e.Run(t.Context(), job, r)
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != `{"ok":true}` {
		t.Errorf("result = %s, want the line after the long one", raw)
	}
	logFile, _ := r.artifact("output.log")
	if len(logFile.data) == 0 || len(logFile.data) > execMaxTail+100 {
		t.Errorf("output.log is %d bytes, want the last %d", len(logFile.data), execMaxTail)
	}
}

func TestExecExitStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code      string
		permanent bool
	}{{"100", true}, {"3", false}} {
		t.Run("Exit"+tc.code, func(t *testing.T) {
			t.Parallel()
			e, job, r := setupExec(t, 0, "exit", tc.code)
			_, err := e.Run(t.Context(), job, r)
			if err == nil {
				t.Fatal("Run succeeded")
			}
			if want := "exit status " + tc.code + ": last words"; err.Error() != want {
				t.Errorf("err = %q, want %q", err, want)
			}
			if worker.IsPermanent(err) != tc.permanent {
				t.Errorf("IsPermanent = %v, want %v", worker.IsPermanent(err), tc.permanent)
			}
		})
	}
}

func TestExecArtifacts(t *testing.T) {
	t.Parallel()
	gate := t.TempDir()
	e, job, r := setupExec(t, 0, "screens", gate)
	done := make(chan execRunResult, 1)
	go func() {
		raw, err := e.Run(t.Context(), job, r)
		done <- execRunResult{raw, err}
	}()

	// The child waits for the gate, so this upload happened while it ran.
	r.waitFor(t, "shot1.png uploaded", func() bool { _, n := r.artifact("shot1.png"); return n > 0 })
	if err := os.WriteFile(filepath.Join(gate, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.err != nil {
		t.Fatal(res.err)
	}

	shot, n := r.artifact("shot1.png")
	if n != 1 || !bytes.Equal(shot.data, execTestPNG(1)) {
		t.Errorf("shot1.png uploaded %d times, bytes match: %v", n, bytes.Equal(shot.data, execTestPNG(1)))
	}
	if late, n := r.artifact("late.PNG"); n != 1 || !bytes.Equal(late.data, execTestPNG(2)) {
		t.Errorf("late.PNG, written just before exit, uploaded %d times", n)
	}
	if notes, _ := r.artifact("notes.txt"); string(notes.data) != "found a crash\n" {
		t.Errorf("notes.txt = %q", notes.data)
	}
	if _, n := r.artifact("ui.XML"); n != 1 {
		t.Errorf("ui.XML uploaded %d times", n)
	}
	_, _, refused := r.snapshot()
	names := r.artifactNames()
	for _, name := range []string{"other.bin", ".hidden.png", "nested.png", "sub/nested.png", "sub"} {
		if slices.Contains(names, name) {
			t.Errorf("%s uploaded; want it ignored (uploads: %q)", name, names)
		}
	}
	if !slices.Equal(refused, []string{"bad.png"}) {
		t.Errorf("refused uploads = %q, want bad.png refused without failing the job", refused)
	}
}

func TestExecEffects(t *testing.T) {
	t.Parallel()
	e, job, r := setupExec(t, 0, "effects")
	job.Payload = json.RawMessage(`{"requests":[
		{"path":"/start","body":"{\"key\":\"post-article\"}"},
		{"path":"/finish","body":"{\"key\":\"post-article\",\"result\":{\"url\":\"https://example.com/1\"}}"},
		{"path":"/start","body":"{\"key\":\"post-article\"}"},
		{"path":"/start","body":"{not json"},
		{"path":"/start","body":"{}"},
		{"path":"/start","body":"{\"key\":\"no spaces please\"}"},
		{"path":"//guessed/start","body":"{\"key\":\"post-article\"}"}
	]}`)
	raw, err := e.Run(t.Context(), job, r)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Answers []struct {
			Status int    `json:"status"`
			Body   string `json:"body"`
		} `json:"answers"`
	}
	decodeExecResult(t, raw, &got)
	want := []struct {
		status int
		body   string // a regexp
	}{
		{200, `^\{"done":false,"idempotency_key":"42:post-article"\}$`},
		{200, `^\{\}$`},
		{200, `^\{"done":true,"result":\{"url":"https://example.com/1"\},"idempotency_key":"42:post-article"\}$`},
		{400, `not valid JSON`},
		{400, `"field":"key"`},
		{400, `"field":"key"`},
		{404, ``},
	}
	if len(got.Answers) != len(want) {
		t.Fatalf("answers = %+v", got.Answers)
	}
	for i, w := range want {
		a := got.Answers[i]
		if a.Status != w.status || !regexp.MustCompile(w.body).MatchString(a.Body) {
			t.Errorf("request %d: %d %s, want %d matching %s", i, a.Status, a.Body, w.status, w.body)
		}
	}
}

func TestExecEffectsLeaseLost(t *testing.T) {
	t.Parallel()
	e, job, r := setupExec(t, 0, "effects")
	job.Payload = json.RawMessage(`{"requests":[{"path":"/start","body":"{\"key\":\"post-article\"}"}]}`)
	r.loseLease()
	raw, err := e.Run(t.Context(), job, r)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"answers":[{"status":409,"body":"{\"error\":\"lease lost\"}"}]}`; string(raw) != want {
		t.Errorf("result = %s, want %s", raw, want)
	}
}

// alive reports whether pid is a live process. A killed grandchild is
// reparented to whatever reaps orphans here, which may leave it a zombie
// for a while (or for good, in a container whose init does not reap): a
// zombie runs nothing, so it counts as gone.
func processAlive(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

func waitProcessesGone(t *testing.T, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for _, pid := range pids {
		for processAlive(pid) {
			if time.Now().After(deadline) {
				t.Errorf("pid %d still alive", pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func TestExecStopKillsGroup(t *testing.T) {
	t.Parallel()
	const grace = 300 * time.Millisecond
	e, job, r := setupExec(t, grace, "stubborn")
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	done := make(chan execRunResult, 1)
	go func() {
		raw, err := e.Run(ctx, job, r)
		done <- execRunResult{raw, err}
	}()

	var child, grandchild int
	r.waitFor(t, "the child's pids", func() bool {
		progress, _, _ := r.snapshot()
		return len(progress) > 0 && progress[0].message != ""
	})
	progress, _, _ := r.snapshot()
	if _, err := fmt.Sscanf(progress[0].message, "pids %d %d", &child, &grandchild); err != nil {
		t.Fatalf("progress %q: %v", progress[0].message, err)
	}
	if !processAlive(child) || !processAlive(grandchild) {
		t.Fatalf("child %d or grandchild %d not running", child, grandchild)
	}

	cause := errors.New("lease lost (test)")
	stopped := time.Now()
	cancel(cause)
	var res execRunResult
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	took := time.Since(stopped)
	if !errors.Is(res.err, cause) {
		t.Errorf("err = %v, want the cause %v", res.err, cause)
	}
	if took < grace || took > grace+3*time.Second {
		t.Errorf("Run returned %v after the stop, want about the grace period %v", took, grace)
	}
	waitProcessesGone(t, child, grandchild)
}

func TestExecStopWithinGrace(t *testing.T) {
	t.Parallel()
	e, job, r := setupExec(t, time.Minute, "sleep")
	ctx, cancel := context.WithCancelCause(t.Context())
	time.AfterFunc(300*time.Millisecond, func() { cancel(context.Canceled) })
	start := time.Now()
	if _, err := e.Run(ctx, job, r); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	// A command that exits on SIGTERM does not wait out the grace period.
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Run took %v", took)
	}
}

func TestExecKillsBackgroundGrandchild(t *testing.T) {
	t.Parallel()
	e, job, r := setupExec(t, 0, "background")
	start := time.Now()
	raw, err := e.Run(t.Context(), job, r)
	if err != nil {
		t.Fatal(err)
	}
	// The grandchild holds stdout: Run must not wait for it to let go.
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Run took %v", took)
	}
	var got struct {
		Grandchild int `json:"grandchild"`
	}
	decodeExecResult(t, raw, &got)
	if got.Grandchild == 0 {
		t.Fatalf("result %s names no grandchild", raw)
	}
	waitProcessesGone(t, got.Grandchild)
}

// A stdout line {"checkpoint":{...}} saves the attempt's checkpoint (a
// line may carry progress too); one the queue would refuse is dropped,
// the attempt going on. A job with a checkpoint gives its command
// LEASEHOLD_CHECKPOINT, {"step":n,"state":...}; one without gives none,
// even when the worker itself has the variable.
func TestExecCheckpoint(t *testing.T) {
	t.Setenv("LEASEHOLD_CHECKPOINT", `{"step":99,"state":{"from":"the worker's own env"}}`)
	type out struct {
		Given bool   `json:"given"`
		Raw   string `json:"raw"`
		Ran   []int  `json:"ran"`
	}
	e, job, r := setupExec(t, 0, "checkpoint")
	raw, err := e.Run(t.Context(), job, r)
	if err != nil {
		t.Fatal(err)
	}
	var fresh out
	decodeExecResult(t, raw, &fresh)
	if fresh.Given || !slices.Equal(fresh.Ran, []int{1, 2, 3, 4, 5}) {
		t.Fatalf("a job without a checkpoint: LEASEHOLD_CHECKPOINT given %v (%q), ran %v; want none and steps 1-5", fresh.Given, fresh.Raw, fresh.Ran)
	}
	saved := r.savedCheckpoints()
	if len(saved) != 5 || saved[4].step != 5 || string(saved[4].state) != `{"done":5}` {
		t.Fatalf("checkpoints saved %+v, want steps 1-5 and none of the malformed lines", saved)
	}
	if progress, _, _ := r.snapshot(); len(progress) != 5 {
		t.Errorf("progress of the checkpoint lines: %+v, want 5", progress)
	}

	job.Checkpoint = &queue.Checkpoint{Step: 3, State: json.RawMessage(`{"done": 3}`), Attempt: 2}
	r2 := newFakeReporter(job.ID, newFakeLedger())
	raw, err = e.Run(t.Context(), job, r2)
	if err != nil {
		t.Fatal(err)
	}
	var resumed out
	decodeExecResult(t, raw, &resumed)
	if !resumed.Given || resumed.Raw != `{"step":3,"state":{"done":3}}` || !slices.Equal(resumed.Ran, []int{4, 5}) {
		t.Fatalf("resumed after step 3: LEASEHOLD_CHECKPOINT %q, ran %v; want step 3's and steps 4-5", resumed.Raw, resumed.Ran)
	}
	if saved := r2.savedCheckpoints(); len(saved) != 2 || saved[0].step != 4 {
		t.Fatalf("resumed run saved %+v, want steps 4 and 5", saved)
	}
}

// A usage line is reported; one that does not fit is logged and dropped
// while the other lines still count; a line may carry progress too.
func TestExecUsage(t *testing.T) {
	t.Parallel()
	e, job, r := setupExec(t, 0, "usage")
	if _, err := e.Run(t.Context(), job, r); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	usage := slices.Clone(r.usage)
	r.mu.Unlock()
	if len(usage) != 2 {
		t.Fatalf("usage = %+v, want the two valid reports", usage)
	}
	first := usage[0]
	if first.Model != "gpt-x" || first.InputTokens != 1200 || first.OutputTokens != 300 || first.CostMicros != 4500 || first.Currency != "USD" || first.Counters["screens"] != 3 {
		t.Errorf("first report %+v", first)
	}
	if usage[1].Model != "unknown" || usage[1].Currency != "EUR" || usage[1].CostMicros != 7 {
		t.Errorf("second report %+v", usage[1])
	}
	if progress, _, _ := r.snapshot(); len(progress) != 1 || progress[0].fraction != 0.5 {
		t.Errorf("progress %+v, want the one on the usage line", progress)
	}
}
