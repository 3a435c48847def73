package worker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/executor"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// phone is a device-info command whose answer the test sets.
type phone struct {
	out  atomic.Value // string: the JSON it prints
	runs atomic.Int64
	slow atomic.Bool // later runs take 3 s
}

func newPhone(out string) *phone {
	p := &phone{}
	p.out.Store(out)
	return p
}

func (p *phone) run(ctx context.Context) (queue.DeviceInfo, error) {
	if p.runs.Add(1) > 1 && p.slow.Load() {
		select {
		case <-ctx.Done():
		case <-time.After(3 * time.Second):
		}
	}
	out := p.out.Load().(string)
	if out == "fail" {
		return queue.DeviceInfo{}, errors.New("device-info: exit status 1")
	}
	return queue.ParseDeviceInfo([]byte(out))
}

// status is the worker's row as the workers page reads it.
func (f *fixture) status(t *testing.T, id string) queue.WorkerStatus {
	t.Helper()
	ws, err := f.client.WorkerStatuses(f.ctx, time.Hour, 30*time.Second, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.ID == id {
			return w
		}
	}
	return queue.WorkerStatus{}
}

// waitStatus waits until the worker's row satisfies ok.
func (f *fixture) waitStatus(t *testing.T, id string, ok func(queue.WorkerStatus) bool) queue.WorkerStatus {
	t.Helper()
	return testutil.Await(t, 10*time.Second, func() (queue.WorkerStatus, bool) {
		w := f.status(t, id)
		return w, ok(w)
	}, func(w queue.WorkerStatus) string { return fmt.Sprintf("worker %s: %+v", id, w) })
}

func notClaiming(reason string) func(queue.WorkerStatus) bool {
	return func(w queue.WorkerStatus) bool {
		return w.ID != "" && !w.Claiming && w.NotClaiming != nil && *w.NotClaiming == reason
	}
}

// A worker whose phone is unfit claims nothing, says why with presence
// at once, and claims again once a later run shows the phone recovered.
// Direct and remote workers alike; the remote one's long poll is cut when
// the phone goes unfit while it waits.
func TestUnfitPhoneClaimsNothing(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"Direct", "Remote"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			p := newPhone(`{"adb":"offline","model":"Pixel 7"}`)
			cfg := worker.Config{ID: "remote-worker", Lease: 5 * time.Second, Backend: worker.Direct{Client: f.client}, Pool: f.pool,
				DeviceInfo: p.run, DeviceInfoEvery: 100 * time.Millisecond}
			if kind == "Remote" {
				cfg.Backend, cfg.Pool = f.remote(t), nil
			}
			f.run(t, cfg)
			f.waitStatus(t, "remote-worker", notClaiming("adb offline"))
			job := f.submit(t, `{"steps":1,"step_ms":10}`, 1)
			time.Sleep(500 * time.Millisecond) // five device-info runs, and a claim would have come at once
			if d, err := f.client.Detail(f.ctx, job.ID); err != nil || d.Job.State != queue.StatePending {
				t.Fatalf("an unfit phone took job: %v %v", d.Job.State, err)
			}

			p.out.Store(`{"adb":"device","battery":9,"charging":true}`)
			f.waitState(t, job.ID, queue.StateSucceeded)
			if w := f.status(t, "remote-worker"); !w.Claiming || w.NotClaiming != nil {
				t.Errorf("recovered worker: %+v", w)
			}

			// Gone unfit while waiting for work (the remote one in its
			// long poll): a job that comes then stays pending.
			p.out.Store(`{"adb":"device","battery":9,"charging":false}`)
			f.waitStatus(t, "remote-worker", notClaiming("battery 9% (under 15%) and not charging"))
			job = f.submit(t, `{"steps":1,"step_ms":10}`, 1)
			time.Sleep(500 * time.Millisecond)
			if d, err := f.client.Detail(f.ctx, job.ID); err != nil || d.Job.State != queue.StatePending {
				t.Fatalf("a phone at 9%% took job: %v %v", d.Job.State, err)
			}
		})
	}
}

// Device-info runs never hold up claims: with every run after the first
// taking 3 s (after each job too), jobs keep being claimed. A failing run
// is reported and changes nothing: the last facts decide.
func TestDeviceInfoNeverBlocksClaims(t *testing.T) {
	t.Parallel()
	f := setup(t)
	p := newPhone(`{"adb":"device","battery":80}`)
	p.slow.Store(true)
	f.run(t, worker.Config{ID: "w", Lease: 5 * time.Second, Backend: worker.Direct{Client: f.client}, Pool: f.pool,
		DeviceInfo: p.run, DeviceInfoEvery: time.Hour})
	f.waitStatus(t, "w", func(w queue.WorkerStatus) bool { return w.Claiming && w.Info != nil })
	start := time.Now()
	for range 3 {
		job := f.submit(t, `{"steps":1,"step_ms":10}`, 1)
		f.waitState(t, job.ID, queue.StateSucceeded)
	}
	// Held up by the 3 s run after each job, the second and third jobs
	// would wait 6 s between them; a loaded CI took 3.1 s without it.
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("three short jobs took %v behind slow device-info runs", took)
	}

	// A worker whose first run fails claims (there is nothing known
	// against its phone) and says why its facts are missing.
	g := setup(t)
	fail := newPhone("fail")
	g.run(t, worker.Config{ID: "w2", Lease: 5 * time.Second, Backend: worker.Direct{Client: g.client}, Pool: g.pool,
		DeviceInfo: fail.run, DeviceInfoEvery: time.Hour})
	w := g.waitStatus(t, "w2", func(w queue.WorkerStatus) bool { return w.InfoError != nil })
	if !w.Claiming || w.Info != nil || *w.InfoError != "device-info: exit status 1" {
		t.Errorf("after a failed first run: %+v", w)
	}
	job := g.submit(t, `{"steps":1,"step_ms":10}`, 1)
	g.waitState(t, job.ID, queue.StateSucceeded)
}

// A device-info command whose stderr holds a NUL byte (and invalid UTF-8)
// fails its run, and the worker says so with presence, cleaned: it stays
// online and claiming instead of every presence being refused, which
// showed the running worker offline. Direct and remote workers alike.
func TestDeviceInfoStderrWithNULKeepsPresence(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "device-info")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nprintf 'adb: \\000\\377 broken\\n' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	info, err := executor.NewDeviceInfo(script, 5*time.Second, quiet)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"Direct", "Remote"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			cfg := worker.Config{ID: "remote-worker", Lease: 5 * time.Second, Backend: worker.Direct{Client: f.client}, Pool: f.pool,
				DeviceInfo: info.Run, DeviceInfoEvery: 200 * time.Millisecond}
			if kind == "Remote" {
				cfg.Backend, cfg.Pool = f.remote(t), nil
			}
			f.run(t, cfg)
			w := f.waitStatus(t, "remote-worker", func(w queue.WorkerStatus) bool {
				return w.Online && w.Claiming && w.InfoError != nil && strings.Contains(*w.InfoError, "broken")
			})
			if strings.ContainsRune(*w.InfoError, 0) || !utf8.ValidString(*w.InfoError) {
				t.Fatalf("info_error %q", *w.InfoError)
			}
			job := f.submit(t, `{"steps":1,"step_ms":10}`, 1)
			f.waitState(t, job.ID, queue.StateSucceeded)
		})
	}
}
