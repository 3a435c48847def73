package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// memoryKiB reads a "VmRSS"-style line of /proc/PID/status, in KiB.
func memoryKiB(t *testing.T, pid int, field string) int {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				t.Fatalf("%s: %q", field, sc.Text())
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// 150 people (or one script) sign in at once, each with a name that is
// no account: the server hashes a bounded number at a time, answers the
// rest 503 or 429, stays under 400 MiB and keeps answering /health/live.
func TestSignInFloodKeepsTheServerSmallAndAlive(t *testing.T) {
	e := newEnv(t)
	srv := e.startServerWith("LEASEHOLD_ADMIN_PASSWORD=correct-horse-battery")
	pid := srv.cmd.Process.Pid
	before := memoryKiB(t, pid, "VmRSS")

	stop := make(chan struct{})
	var probes sync.WaitGroup
	var slowest atomic.Int64
	var probeErr atomic.Value
	probes.Go(func() {
		client := &http.Client{Timeout: 2 * time.Second}
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			start := time.Now()
			resp, err := client.Get(e.apiURL + "/health/live")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
			if err != nil {
				probeErr.CompareAndSwap(nil, err.Error())
			}
			if d := int64(time.Since(start)); d > slowest.Load() {
				slowest.Store(d)
			}
		}
	})

	const signIns = 150
	client := &http.Client{
		Timeout:       30 * time.Second,
		Transport:     &http.Transport{MaxIdleConnsPerHost: signIns},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	var mu sync.Mutex
	statuses := map[int]int{}
	start := time.Now()
	var flood sync.WaitGroup
	for i := range signIns {
		flood.Go(func() {
			form := url.Values{"username": {fmt.Sprintf("nobody%d", i)}, "password": {"not-the-password"}}
			req, _ := http.NewRequestWithContext(e.ctx, http.MethodPost, e.apiURL+"/login", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			status := 0
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
				status = resp.StatusCode
				if (status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests) && resp.Header.Get("Retry-After") == "" {
					status = -status
				}
			}
			mu.Lock()
			statuses[status]++
			mu.Unlock()
		})
	}
	flood.Wait()
	took := time.Since(start)
	close(stop)
	probes.Wait()

	peak := memoryKiB(t, pid, "VmHWM")
	t.Logf("%d concurrent sign-ins in %v: statuses %v; RSS %d KiB before, peak %d KiB (%.1f MiB); slowest /health/live %v",
		signIns, took.Round(time.Millisecond), statuses, before, peak, float64(peak)/1024, time.Duration(slowest.Load()).Round(time.Millisecond))
	for status, n := range statuses {
		switch status {
		case http.StatusUnauthorized, http.StatusTooManyRequests, http.StatusServiceUnavailable:
		default:
			t.Errorf("%d sign-ins answered %d (negative: without Retry-After; 0: no answer)", n, status)
		}
	}
	if peak > 400*1024 {
		t.Errorf("peak RSS %d KiB, want under 400 MiB", peak)
	}
	if err := probeErr.Load(); err != nil {
		t.Errorf("/health/live during the flood: %v", err)
	}
	if d := time.Duration(slowest.Load()); d >= 2*time.Second {
		t.Errorf("/health/live took %v during the flood, want under 2 s", d)
	}
}

// A bad LEASEHOLD_TRUSTED_PROXIES (or --trusted-proxies) stops the server
// at once, naming the value.
func TestServerRefusesBadTrustedProxies(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		args []string
		env  string
	}{
		{env: "LEASEHOLD_TRUSTED_PROXIES=10.0.0.1, 10.0.0.0/33"},
		{args: []string{"--trusted-proxies", "proxy.internal"}},
	} {
		p := e.spawn("server", tc.args, tc.env)
		err := p.wait(t, 30*time.Second)
		bad := "10.0.0.0/33"
		if tc.args != nil {
			bad = "proxy.internal"
		}
		if err == nil || !strings.Contains(p.out.String(), `"`+bad+`"`) {
			t.Errorf("server %v %s: exit %v, output %q; want a failure naming %q", tc.args, tc.env, err, p.out.String(), bad)
		}
	}
}
