package examples

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/queue"
)

// deviceInfo runs device-info.sh with the fake adb first on PATH (unless
// noAdb) and the given environment, and returns its stdout, checked as a
// worker checks it.
func deviceInfo(t *testing.T, noAdb bool, env ...string) (queue.DeviceInfo, string, error) {
	t.Helper()
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	bin := t.TempDir()
	if !noAdb {
		b, err := os.ReadFile(filepath.Join("fakeadb", "adb"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, "adb"), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script, err := filepath.Abs("device-info.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", script)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	path := bin + string(os.PathListSeparator) + "/usr/bin:/bin"
	cmd.Env = append([]string{"PATH=" + path, "ANDROID_SERIAL="}, env...)
	if err := cmd.Run(); err != nil {
		return queue.DeviceInfo{}, stderr.String(), err
	}
	info, err := queue.ParseDeviceInfo(stdout.Bytes())
	if err != nil {
		t.Fatalf("output refused: %v\n%s", err, stdout.String())
	}
	return info, stdout.String(), nil
}

func TestDeviceInfo(t *testing.T) {
	t.Parallel()
	info, out, err := deviceInfo(t, false)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"adb":"device","serial":"fake0","model":"Pixel 7","android":"14","battery":87,"charging":false,"screen":"on"}`
	if strings.TrimSpace(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
	if ok, reason := queue.DeviceHealth(info, queue.DefaultMinBattery); !ok {
		t.Errorf("a healthy phone is unfit: %s", reason)
	}
}

func TestDeviceInfoStates(t *testing.T) {
	t.Parallel()
	low := filepath.Join(t.TempDir(), "level")
	if err := os.WriteFile(low, []byte("4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		env     []string
		adb     string
		battery int // -1: not reported
		fit     bool
		reason  string
	}{
		{"NoPhone", []string{"FAKEADB_STATE=none"}, "offline", -1, false, "adb offline"},
		{"Offline", []string{"FAKEADB_STATE=offline"}, "offline", -1, false, "adb offline"},
		{"Unauthorized", []string{"FAKEADB_STATE=unauthorized"}, "unauthorized", -1, false, "adb unauthorized"},
		{"LowBattery", []string{"FAKEADB_BATTERY_FILE=" + low}, "device", 4, false, "battery 4% (under 15%) and not charging"},
		{"LowBatteryCharging", []string{"FAKEADB_BATTERY=4", "FAKEADB_CHARGING=true"}, "device", 4, true, ""},
		{"ScreenOffQuotedModel", []string{"FAKEADB_SCREEN=off", `FAKEADB_MODEL=Pixel "7" \ Pro`}, "device", 87, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			info, out, err := deviceInfo(t, false, tc.env...)
			if err != nil {
				t.Fatal(err)
			}
			if info.Adb != tc.adb {
				t.Errorf("adb %q, want %q: %s", info.Adb, tc.adb, out)
			}
			if (info.Battery == nil) != (tc.battery < 0) || (info.Battery != nil && *info.Battery != tc.battery) {
				t.Errorf("battery: %s", out)
			}
			if fit, reason := queue.DeviceHealth(info, queue.DefaultMinBattery); fit != tc.fit || reason != tc.reason {
				t.Errorf("health %v %q, want %v %q", fit, reason, tc.fit, tc.reason)
			}
			if tc.name == "ScreenOffQuotedModel" && (info.Model != `Pixel "7" \ Pro` || !strings.Contains(out, `"screen":"off"`)) {
				t.Errorf("model %q: %s", info.Model, out)
			}
		})
	}
}

func TestDeviceInfoWithoutAdb(t *testing.T) {
	t.Parallel()
	_, stderr, err := deviceInfo(t, true)
	if err == nil || !strings.Contains(stderr, "adb is not on PATH") {
		t.Fatalf("err %v, stderr %q", err, stderr)
	}
}
