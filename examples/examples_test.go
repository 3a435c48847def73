// Package examples tests the example executors in this folder against a
// fake adb (fakeadb/adb), so that they run without a phone.
package examples

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const payload = `{"app":"com.example.notes","instructions":"Open \"Settings\" and check dark mode"}`

// run is one run of investigate.sh.
type run struct {
	cmd       *exec.Cmd
	artifacts string
	adbLog    string
	stdout    *bytes.Buffer
	stderr    *bytes.Buffer
}

// setup prepares a run of investigate.sh with the fake adb first on PATH
// and the given extra environment. The fake is copied so that its exec
// bit does not depend on how the repository was checked out.
func setup(t *testing.T, stdin string, env ...string) *run {
	t.Helper()
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"adb", "screen.png"} {
		b, err := os.ReadFile(filepath.Join("fakeadb", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script, err := filepath.Abs("investigate.sh")
	if err != nil {
		t.Fatal(err)
	}
	r := &run{
		cmd:       exec.Command("/bin/sh", script),
		artifacts: filepath.Join(dir, "artifacts"),
		adbLog:    filepath.Join(dir, "adb.log"),
		stdout:    new(bytes.Buffer),
		stderr:    new(bytes.Buffer),
	}
	r.cmd.Dir = dir
	r.cmd.Stdin = strings.NewReader(stdin)
	r.cmd.Stdout, r.cmd.Stderr = r.stdout, r.stderr
	r.cmd.Env = append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"FAKEADB_LOG="+r.adbLog,
		"LEASEHOLD_JOB_ID=42",
		"LEASEHOLD_JOB_KIND=app_investigation",
		"LEASEHOLD_ATTEMPT=1",
		"LEASEHOLD_ARTIFACT_DIR="+r.artifacts,
		"LEASEHOLD_EFFECTS_URL=http://127.0.0.1:9/effects",
		"INVESTIGATE_WAIT=0",
	)
	r.cmd.Env = append(r.cmd.Env, env...)
	// Never wait long for output pipes held open by a stray child.
	r.cmd.WaitDelay = 5 * time.Second
	return r
}

// exitCode runs the script to its end.
func (r *run) exitCode(t *testing.T) int {
	t.Helper()
	err := r.cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	default:
		t.Fatalf("running investigate.sh: %v", err)
		return -1
	}
}

func (r *run) adbCalls(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(r.adbLog)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}

func TestInvestigate(t *testing.T) {
	t.Parallel()
	r := setup(t, payload)
	if code := r.exitCode(t); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, r.stderr)
	}

	shots, _ := filepath.Glob(filepath.Join(r.artifacts, "step-*.png"))
	if len(shots) < 3 {
		t.Fatalf("%d screenshots, want at least 3", len(shots))
	}
	for _, shot := range shots {
		f, err := os.Open(shot)
		if err != nil {
			t.Fatal(err)
		}
		_, err = png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", shot, err)
		}
	}
	for _, name := range []string{"ui.xml", "logcat.txt"} {
		if fi, err := os.Stat(filepath.Join(r.artifacts, name)); err != nil || fi.Size() == 0 {
			t.Fatalf("%s: %v (want a non-empty file)", name, err)
		}
	}
	if leftovers, _ := filepath.Glob(filepath.Join(r.artifacts, ".*")); len(leftovers) > 0 {
		t.Fatalf("partial files left behind: %v", leftovers)
	}

	var progress int
	var result map[string]any
	for _, line := range strings.Split(strings.TrimSpace(r.stdout.String()), "\n") {
		var event struct {
			Progress *float64       `json:"progress"`
			Message  string         `json:"message"`
			Result   map[string]any `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &event); err != nil {
			t.Fatalf("stdout line %q is not a JSON event: %v", line, err)
		}
		if result != nil {
			t.Fatalf("%q after the result", line)
		}
		switch {
		case event.Progress != nil:
			if *event.Progress < 0 || *event.Progress > 1 || event.Message == "" {
				t.Fatalf("progress event %q", line)
			}
			progress++
		case event.Result != nil:
			result = event.Result
		}
	}
	if progress < 3 || result == nil {
		t.Fatalf("%d progress events and result %v in:\n%s", progress, result, r.stdout)
	}
	if result["app"] != "com.example.notes" || result["screenshots"] != float64(len(shots)) ||
		result["instructions"] != `Open "Settings" and check dark mode` || result["ui_dump"] != true {
		t.Fatalf("result %v", result)
	}

	calls := r.adbCalls(t)
	for _, want := range []string{
		"get-state\n",
		"shell pm path com.example.notes\n",
		"shell monkey -p com.example.notes -c android.intent.category.LAUNCHER 1\n",
		"shell input tap ",
		"shell input keyevent KEYCODE_BACK\n",
		"exec-out screencap -p\n",
		"shell uiautomator dump /sdcard/leasehold-ui.xml\n",
		"logcat -d -t 500\n",
	} {
		if !strings.Contains(calls, want) {
			t.Fatalf("no %q among the adb calls:\n%s", want, calls)
		}
	}
	if !strings.HasSuffix(calls, "shell am force-stop com.example.notes\n") {
		t.Fatalf("the app was not force-stopped at the end:\n%s", calls)
	}
}

func TestInvestigateMissingApp(t *testing.T) {
	t.Parallel()
	r := setup(t, payload, "FAKEADB_MISSING=com.example.notes")
	if code := r.exitCode(t); code != 100 {
		t.Fatalf("exit %d, want 100 (permanent); stderr:\n%s", code, r.stderr)
	}
	if calls := r.adbCalls(t); strings.Contains(calls, "monkey") {
		t.Fatalf("launched a missing app:\n%s", calls)
	}
	if !strings.Contains(r.stderr.String(), "not installed") {
		t.Fatalf("stderr does not say why:\n%s", r.stderr)
	}
}

func TestInvestigateBadPackageName(t *testing.T) {
	t.Parallel()
	// Anything but a package name would reach the phone's shell.
	r := setup(t, `{"app":"com.example.notes; reboot"}`)
	if code := r.exitCode(t); code != 100 {
		t.Fatalf("exit %d, want 100; stderr:\n%s", code, r.stderr)
	}
	if calls := r.adbCalls(t); calls != "" {
		t.Fatalf("called adb with a bad package name:\n%s", calls)
	}
}

func TestInvestigateNoPhone(t *testing.T) {
	t.Parallel()
	r := setup(t, payload, "FAKEADB_STATE=none")
	// A phone that is away may be back later: retry, not dead.
	if code := r.exitCode(t); code == 0 || code == 100 {
		t.Fatalf("exit %d, want a retryable failure; stderr:\n%s", code, r.stderr)
	}
	if calls := r.adbCalls(t); strings.Contains(calls, "monkey") {
		t.Fatalf("launched without a phone:\n%s", calls)
	}
}

func TestInvestigateSIGTERM(t *testing.T) {
	t.Parallel()
	// A long settle time keeps the script waiting after the launch.
	r := setup(t, payload, "INVESTIGATE_WAIT=30")
	r.cmd.Stdout = nil
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// The script is mid-run once it sleeps after the launch: the moment a
	// trap that waited for its command would be late by the whole sleep.
	deadline := time.Now().Add(10 * time.Second)
	for !r.sleeping(t) {
		select {
		case _, ok := <-lines:
			if !ok {
				t.Fatalf("the script ended before it slept; stderr:\n%s", r.stderr)
			}
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the script did not reach its pause within 10 s")
		}
	}
	// Signal the script alone, not its group: the harder case, where it
	// must not sit out its own sleep.
	start := time.Now()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for range lines {
		// Drained so that the script never blocks on a full pipe.
	}
	err = r.cmd.Wait()
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("took %v to stop after SIGTERM", elapsed)
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 || exit.ExitCode() == 100 {
		t.Fatalf("exit %v, want a retryable failure", err)
	}
	if calls := r.adbCalls(t); !strings.Contains(calls, "shell am force-stop com.example.notes\n") {
		t.Fatalf("the app was not force-stopped:\n%s", calls)
	}
}

// sleeping reports whether r's script has a sleep child. Without /proc
// (not Linux) it cannot tell, and says yes once the app was launched.
func (r *run) sleeping(t *testing.T) bool {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	if len(stats) == 0 {
		return strings.Contains(r.adbCalls(t), "monkey")
	}
	pid := r.cmd.Process.Pid
	for _, stat := range stats {
		b, err := os.ReadFile(stat)
		if err != nil {
			continue // the process has ended
		}
		// pid (comm) state ppid …; comm has no spaces for sleep.
		fields := strings.Fields(string(b))
		if len(fields) > 3 && fields[1] == "(sleep)" && fields[3] == strconv.Itoa(pid) {
			return true
		}
	}
	return false
}
