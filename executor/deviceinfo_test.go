package executor_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/executor"
)

// probe returns a DeviceInfo running the shell script body.
func probe(t *testing.T, body string, timeout time.Duration) *executor.DeviceInfo {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("shell scripts")
	}
	script := filepath.Join(t.TempDir(), "info.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := executor.NewDeviceInfo("/bin/sh "+script+" 'an arg'", timeout, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDeviceInfoRun(t *testing.T) { // not parallel: Setenv
	d := probe(t, `[ "$1" = "an arg" ] || exit 3
echo '{"adb":"device","battery":55,"charging":false,"model":"Pixel 7","secret":"'"${DATABASE_URL:-}${LEASEHOLD_TOKEN:-}"'"}'`, 0)
	t.Setenv("DATABASE_URL", "postgres://secret")
	t.Setenv("LEASEHOLD_TOKEN", "lh_secret")
	info, err := d.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Adb != "device" || *info.Battery != 55 || info.Model != "Pixel 7" {
		t.Errorf("%+v", info)
	}
	if strings.Contains(string(info.Raw), "secret:") || !strings.Contains(string(info.Raw), `"secret":""`) {
		t.Errorf("the command saw the worker's secrets: %s", info.Raw)
	}
}

func TestDeviceInfoRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, body, want string }{
		{"NotJSON", `echo battery=80`, "not a JSON object"},
		{"WrongType", `echo '{"battery":"80"}'`, `"battery" must be an integer`},
		{"Nothing", `true`, "empty"},
		{"Fails", `echo '{"adb":"device"}'; echo "adb: no permissions" >&2; exit 2`, "exit status 2: adb: no permissions"},
		{"TooMuch", `yes '{"model":"x"}'`, "output over 8192 bytes"},
		{"NoSuchCommand", `exec /nonexistent/adb-info`, "exit status 127"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := probe(t, tc.body, 5*time.Second).Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want an error saying %q", err, tc.want)
			}
		})
	}
	if _, err := executor.NewDeviceInfo("  ", 0, nil); err == nil {
		t.Error("an empty command was accepted")
	}
	if _, err := executor.NewDeviceInfo(`"unclosed`, 0, nil); err == nil {
		t.Error("an unbalanced quote was accepted")
	}
	d, err := executor.NewDeviceInfo("/nonexistent/device-info", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "starting") {
		t.Errorf("a missing command: %v", err)
	}
}

// A command that does not answer in time is killed with everything it
// started, and the run ends soon after the timeout.
func TestDeviceInfoTimeout(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pids")
	for _, tc := range []struct{ name, body string }{
		{"Silent", `sleep 30 & echo $! > ` + pidFile + `; echo $$ >> ` + pidFile + `; wait`},
		// The answer is out, but a child keeps the output open.
		{"ChildHoldsOutput", `echo '{"adb":"device"}'; sleep 30 & echo $! > ` + pidFile + `.2; echo $$ >> ` + pidFile + `.2; wait`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := probe(t, tc.body, 300*time.Millisecond).Run(context.Background())
			took := time.Since(start)
			t.Logf("took %v", took)
			if err == nil || !strings.Contains(err.Error(), "within 300ms: killed") {
				t.Fatalf("%v, want a timeout", err)
			}
			if took > 3*time.Second {
				t.Errorf("took %v with a 300ms timeout", took)
			}
			name := pidFile
			if tc.name == "ChildHoldsOutput" {
				name += ".2"
			}
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range strings.Fields(string(b)) {
				pid, err := strconv.Atoi(f)
				if err != nil {
					t.Fatal(err)
				}
				// Killed: gone, or a zombie waiting for init to reap it.
				deadline := time.Now().Add(2 * time.Second)
				for alive(pid) && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
				}
				if alive(pid) {
					t.Errorf("process %d outlived the run", pid)
				}
			}
		})
	}
}

func TestDeviceInfoCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := probe(t, `sleep 30`, 10*time.Second).Run(ctx); err == nil || time.Since(start) > 3*time.Second {
		t.Errorf("%v after %v", err, time.Since(start))
	}
}

// alive reports whether process pid runs (a zombie does not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return runtime.GOOS != "linux"
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z")
}
