package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/leasehold/leasehold/client"
)

// fakeADB puts examples/fakeadb/adb in a folder of its own (copied, so its
// exec bit does not depend on the checkout) and returns PATH with it first.
func fakeADB(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../examples/fakeadb/adb")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "adb"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	return "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")
}

// Three phones, each with examples/device-info.sh reading a fake adb: one
// whose adb is offline (a remote worker), one at 4 % and not charging (a
// direct worker), one fit (remote). Only the fit one claims while jobs
// wait; the API, the workers page and a waiting job's page say why the
// others do not; the low one recovers once its battery reads 80 % and
// takes the job meant for it.
func TestDeviceHealthGatesClaims(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t)
	script, err := filepath.Abs("../examples/device-info.sh")
	if err != nil {
		t.Fatal(err)
	}
	path := fakeADB(t)
	level := filepath.Join(t.TempDir(), "battery")
	if err := os.WriteFile(level, []byte("4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	info := []string{"--executor", "sim", "--lease", "5s", "--device-info", "/bin/sh " + script, "--device-info-every", "1s"}
	b.spawn("worker phone-offline", append([]string{"--server-url", b.apiURL, "--token", b.workerToken("phone-offline"),
		"--device", "pixel7,spare"}, info...), path, "FAKEADB_STATE=offline", "FAKEADB_MODEL=Pixel 6")
	b.spawn("worker phone-low", append([]string{"--id", "phone-low", "--artifacts", b.artifacts, "--device", "pixel7,spare"}, info...),
		path, "FAKEADB_BATTERY_FILE="+level, "FAKEADB_MODEL=Pixel 7a", "FAKEADB_ANDROID=13")
	b.spawn("worker phone-ok", append([]string{"--server-url", b.apiURL, "--token", b.workerToken("phone-ok"),
		"--device", "pixel7"}, info...), path, "FAKEADB_MODEL=Pixel 7", "FAKEADB_ANDROID=14", "FAKEADB_BATTERY=91")

	c := b.client()
	workers := func() map[string]client.WorkerStatus {
		t.Helper()
		ws, err := c.Workers(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]client.WorkerStatus{}
		for _, w := range ws {
			out[w.ID] = w
		}
		return out
	}
	reason := func(w client.WorkerStatus) string {
		if w.Reason == nil {
			return ""
		}
		return *w.Reason
	}
	b.eventually("three phones described", 30*time.Second, func() bool {
		ws := workers()
		return len(ws["phone-ok"].Info) > 4 && ws["phone-ok"].Claiming &&
			reason(ws["phone-offline"]) == "adb offline" &&
			reason(ws["phone-low"]) == "battery 4% (under 15%) and not charging"
	})
	ws := workers()
	for id, want := range map[string]map[string]any{
		"phone-ok":      {"adb": "device", "model": "Pixel 7", "android": "14", "battery": 91.0, "charging": false, "serial": "fake0", "screen": "on"},
		"phone-low":     {"adb": "device", "model": "Pixel 7a", "android": "13", "battery": 4.0, "charging": false},
		"phone-offline": {"adb": "offline", "serial": "fake0"},
	} {
		var got map[string]any
		if err := json.Unmarshal(ws[id].Info, &got); err != nil {
			t.Fatalf("%s: info %s: %v", id, ws[id].Info, err)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: info[%q] = %v, want %v (%s)", id, k, got[k], v, ws[id].Info)
			}
		}
		if !ws[id].Online || ws[id].InfoAt == nil || ws[id].InfoError != nil {
			t.Errorf("%s: %+v", id, ws[id])
		}
	}

	// Jobs for pixel7: all three carry the label, only the fit one claims.
	var ids []int64
	for range 6 {
		j, err := c.Submit(b.ctx, client.NewJob{Kind: "app_investigation",
			Payload: json.RawMessage(`{"app":"com.example.notes","device":"pixel7","sim":{"steps":2,"step_ms":100}}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	for _, id := range ids {
		d := b.waitFor(id, 60*time.Second, client.StateSucceeded)
		for _, a := range d.Attempts {
			if a.WorkerID != "phone-ok" {
				t.Errorf("job %d attempt %d ran on %s", id, a.Number, a.WorkerID)
			}
		}
	}
	ws = workers()
	if ws["phone-ok"].Succeeded24h != 6 || ws["phone-low"].Succeeded24h != 0 || ws["phone-offline"].Succeeded24h != 0 ||
		ws["phone-ok"].LastJobID == nil {
		t.Errorf("outcomes: ok %+v, low %+v, offline %+v", ws["phone-ok"], ws["phone-low"], ws["phone-offline"])
	}

	// A job only the two unfit phones could run waits, and says why.
	spare, err := c.Submit(b.ctx, client.NewJob{Kind: "app_investigation",
		Payload: json.RawMessage(`{"app":"com.example.notes","device":"spare","sim":{"steps":1,"step_ms":100}}`)})
	if err != nil {
		t.Fatal(err)
	}
	b.signIn()
	b.do(chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", b.apiURL, spare.ID)))
	b.waitJS("the job page saying why it waits", `document.querySelector("[data-testid=job-waiting]")?.textContent ===
		"waiting for spare: all 2 such phones online are not claiming (phone-low: battery 4% (under 15%) and not charging; phone-offline: adb offline)"`)
	time.Sleep(2500 * time.Millisecond) // two more device-info runs of each
	if d, err := c.Get(b.ctx, spare.ID); err != nil || d.State != client.StatePending {
		t.Fatalf("the spare job: %v %v", d.State, err)
	}

	// The workers page, in Chromium, shows each phone and why it holds back.
	b.do(chromedp.Navigate(b.apiURL + "/workers"))
	row := func(id string) string {
		return `document.querySelector("[data-testid=worker-row][data-worker-id=` + id + `]")`
	}
	b.waitJS("the fit phone's facts", row("phone-ok")+`?.innerText.includes("Pixel 7") && `+row("phone-ok")+`.innerText.includes("Android 14") && `+
		row("phone-ok")+`.innerText.includes("91%") && `+row("phone-ok")+`.querySelector("[data-testid=claiming]") !== null && `+
		row("phone-ok")+`.querySelector("[data-testid=succeeded-24h]").innerText === "6 succeeded"`)
	b.waitJS("the low phone's reason", row("phone-low")+`?.querySelector("[data-testid=reason]")?.innerText === "battery 4% (under 15%) and not charging" && `+
		row("phone-low")+`.querySelector("[data-testid=battery]").innerText === "4%" && `+row("phone-low")+`.innerText.includes("not charging")`)
	b.waitJS("the offline phone's reason", row("phone-offline")+`?.querySelector("[data-testid=reason]")?.innerText === "adb offline" && `+
		row("phone-offline")+`.querySelector("[data-testid=adb]").innerText === "adb offline"`)

	// Plugged in and charged: the next run shows it recovered, and it
	// takes the job.
	if err := os.WriteFile(level, []byte("80\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := b.waitFor(spare.ID, 30*time.Second, client.StateSucceeded)
	if len(d.Attempts) != 1 || d.Attempts[0].WorkerID != "phone-low" {
		t.Errorf("the spare job's attempts: %+v", d.Attempts)
	}
	if w := workers()["phone-low"]; !w.Claiming || w.Reason != nil || !strings.Contains(string(w.Info), `"battery":80`) {
		t.Errorf("recovered phone: %+v %s", w, w.Info)
	}
	b.waitJS("the page showing the recovery", row("phone-low")+`?.querySelector("[data-testid=claiming]") !== null`)
}
