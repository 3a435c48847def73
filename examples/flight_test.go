package examples

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/executor"
	"github.com/leasehold/leasehold/queue"
)

// fakeAdbPath is a PATH with the fake adb first.
func fakeAdbPath(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	bin := t.TempDir()
	b, err := os.ReadFile(filepath.Join("fakeadb", "adb"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "adb"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin + string(os.PathListSeparator) + "/usr/bin:/bin"
}

// flight runs script with the fake adb and env; it returns stdout,
// stderr, the adb calls made, and whether it passed.
func flight(t *testing.T, script string, env ...string) (stdout, stderr string, calls []string, ok bool) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "adb.log")
	abs, err := filepath.Abs(script)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", abs)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.Env = append([]string{"PATH=" + fakeAdbPath(t), "ANDROID_SERIAL=", "FAKEADB_LOG=" + log}, env...)
	err = cmd.Run()
	b, _ := os.ReadFile(log)
	return out.String(), errOut.String(), strings.Split(strings.TrimSpace(string(b)), "\n"), err == nil
}

func TestPreflight(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  []string
		ok   bool
		want string // in stdout when ok, in stderr otherwise
	}{
		{"Fit", []string{"LEASEHOLD_APP=com.example.notes"}, true, "app: com.example.notes installed"},
		{"NoJob", nil, true, "home screen"},
		{"NoPhone", []string{"FAKEADB_STATE=none"}, false, "adb cannot drive the phone: error: no devices/emulators found"},
		{"Unauthorized", []string{"FAKEADB_STATE=unauthorized"}, false, "unauthorized"},
		{"ScreenOff", []string{"FAKEADB_SCREEN=off"}, false, "screen is off (mWakefulness=Asleep)"},
		{"AppMissing", []string{"LEASEHOLD_APP=com.example.notes", "FAKEADB_MISSING=com.example.notes"}, false,
			"app com.example.notes is not installed, and there is no com.example.notes.apk in PREFLIGHT_APK_DIR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, calls, ok := flight(t, "preflight.sh", tc.env...)
			if ok != tc.ok {
				t.Fatalf("passed %v, want %v\nstdout %s\nstderr %s", ok, tc.ok, stdout, stderr)
			}
			got := stdout
			if !ok {
				got = stderr
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("output %q, want it to say %q", got, tc.want)
			}
			if ok && calls[len(calls)-1] != "shell input keyevent KEYCODE_HOME" {
				t.Errorf("last adb call %q, want going home", calls[len(calls)-1])
			}
		})
	}
}

func TestPostflight(t *testing.T) {
	t.Parallel()
	stdout, stderr, calls, ok := flight(t, "postflight.sh", "LEASEHOLD_APP=com.example.notes", "LEASEHOLD_OUTCOME=failed")
	if !ok {
		t.Fatalf("failed: %s", stderr)
	}
	want := []string{"get-state", "shell am force-stop com.example.notes", "shell pm clear com.example.notes", "shell input keyevent KEYCODE_HOME"}
	if strings.Join(calls, "|") != strings.Join(want, "|") {
		t.Errorf("adb calls %q, want %q", calls, want)
	}
	if !strings.Contains(stdout, "after a job that failed") {
		t.Errorf("stdout %q", stdout)
	}
	if _, stderr, _, ok := flight(t, "postflight.sh", "FAKEADB_STATE=none"); ok || !strings.Contains(stderr, "adb cannot drive the phone after the job") {
		t.Errorf("without a phone: passed %v, stderr %q", ok, stderr)
	}
	if _, stderr, _, ok := flight(t, "postflight.sh", "LEASEHOLD_APP=com.example.gone", "FAKEADB_MISSING=com.example.gone"); ok || !strings.Contains(stderr, "clearing the data of com.example.gone failed") {
		t.Errorf("app gone: passed %v, stderr %q", ok, stderr)
	}
}

// TestFlightThroughTheWorkersRunner runs both scripts as the worker does
// (executor.Check: the job in the environment, output bounded and
// cleaned, the failure quoting stderr). Not parallel: it sets PATH.
func TestFlightThroughTheWorkersRunner(t *testing.T) {
	t.Setenv("PATH", fakeAdbPath(t))
	t.Setenv("FAKEADB_MISSING", "com.example.gone")
	pre, err := executor.NewCheck("preflight", "/bin/sh preflight.sh", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	job := &queue.Job{ID: 7, Kind: "app_investigation", Attempt: 1, Payload: []byte(`{"app":"com.example.notes"}`)}
	out, err := pre.Run(context.Background(), job, "")
	if err != nil || !strings.Contains(out, "app: com.example.notes installed") {
		t.Fatalf("preflight: %q, %v", out, err)
	}
	job.Payload = []byte(`{"app":"com.example.gone"}`)
	out, err = pre.Run(context.Background(), job, "")
	if err == nil || !strings.Contains(err.Error(), "preflight: /bin/sh: exit status 1: app com.example.gone is not installed") || !strings.Contains(out, "adb: device") {
		t.Fatalf("preflight of a missing app: %q, %v", out, err)
	}
	post, err := executor.NewCheck("postflight", "/bin/sh postflight.sh", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	job.Payload = []byte(`{"app":"com.example.notes"}`)
	if out, err := post.Run(context.Background(), job, "succeeded"); err != nil || !strings.Contains(out, "after a job that succeeded") {
		t.Fatalf("postflight: %q, %v", out, err)
	}
}
