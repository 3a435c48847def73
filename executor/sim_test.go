package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image/png"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

func simJob(id int64, attempt int32, sim string) queue.Job {
	return queue.Job{
		ID: id, Attempt: attempt, Kind: "app_investigation",
		Payload: json.RawMessage(`{"app":"com.example.notes","sim":` + sim + `}`),
	}
}

func runSim(t *testing.T, job queue.Job, r *fakeReporter) (map[string]any, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := Sim{}.Run(ctx, job, r)
	if err != nil {
		return nil, err
	}
	var result map[string]any
	if err := json.Unmarshal(raw, &result); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	return result, nil
}

func TestSimScreenshots(t *testing.T) {
	t.Parallel()
	r := newFakeReporter(42, newFakeLedger())
	result, err := runSim(t, simJob(42, 1, `{"steps":3,"step_ms":0}`), r)
	if err != nil {
		t.Fatal(err)
	}
	names := r.artifactNames()
	if want := []string{"step-01.png", "step-02.png", "step-03.png"}; strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("artifacts %v, want %v", names, want)
	}
	if progress, _, _ := r.snapshot(); len(progress) != 3 {
		t.Fatalf("%d progress events, want 3", len(progress))
	}
	if result["screenshots"] != 3.0 || result["warnings"] != nil {
		t.Fatalf("result %v", result)
	}
	seen := map[string]string{}
	for _, name := range names {
		a, _ := r.artifact(name)
		b := a.data
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := img.Bounds().Size(); got.X != ScreenWidth || got.Y != ScreenHeight {
			t.Fatalf("%s is %v, want %dx%d", name, got, ScreenWidth, ScreenHeight)
		}
		if other, ok := seen[string(b)]; ok {
			t.Fatalf("%s is the same image as %s", name, other)
		}
		seen[string(b)] = name
	}

	again := newFakeReporter(42, newFakeLedger())
	if _, err := runSim(t, simJob(42, 1, `{"steps":3,"step_ms":0}`), again); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		first, _ := r.artifact(name)
		second, _ := again.artifact(name)
		if !bytes.Equal(first.data, second.data) {
			t.Fatalf("%s differs between two runs of the same job", name)
		}
	}
}

func TestScreenDiffers(t *testing.T) {
	t.Parallel()
	base := Screen{JobID: 7, Attempt: 1, App: "com.example.notes", Step: 2, Steps: 3}
	a, err := base.PNG()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []Screen{
		{JobID: 8, Attempt: 1, App: "com.example.notes", Step: 2, Steps: 3},
		{JobID: 7, Attempt: 2, App: "com.example.notes", Step: 2, Steps: 3},
		{JobID: 7, Attempt: 1, App: "com.example.mail", Step: 2, Steps: 3},
	} {
		b, err := s.PNG()
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(a, b) {
			t.Fatalf("%+v renders like %+v", s, base)
		}
	}
	if got, want := base.Label(), "job 7 · attempt 1 · step 2/3"; got != want {
		t.Fatalf("label %q, want %q", got, want)
	}
}

func TestSimFailAttempts(t *testing.T) {
	t.Parallel()
	l := newFakeLedger()
	_, err := runSim(t, simJob(1, 1, `{"steps":1,"step_ms":0,"fail_attempts":1}`), newFakeReporter(1, l))
	if err == nil || worker.IsPermanent(err) {
		t.Fatalf("attempt 1: %v, want a retryable failure", err)
	}
	if _, err := runSim(t, simJob(1, 2, `{"steps":1,"step_ms":0,"fail_attempts":1}`), newFakeReporter(1, l)); err != nil {
		t.Fatalf("attempt 2: %v", err)
	}
}

func TestSimPermanent(t *testing.T) {
	t.Parallel()
	_, err := runSim(t, simJob(1, 1, `{"steps":1,"step_ms":0,"permanent":true}`), newFakeReporter(1, newFakeLedger()))
	if !worker.IsPermanent(err) {
		t.Fatalf("%v, want a permanent failure", err)
	}
}

// Under synctest: the sim's step timers are its own, and it does no I/O
// with a fake reporter, so a second of steps passes at once.
func TestSimHangStopsOnCancel(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := newFakeReporter(1, newFakeLedger())
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		stopped := errors.New("lease lost by heartbeat")
		done := make(chan error, 1)
		go func() {
			_, err := Sim{}.Run(ctx, simJob(1, 1, `{"steps":2,"step_ms":1,"hang":true}`), r)
			done <- err
		}()
		// Past its 2 nominal steps it keeps going, with a screenshot about
		// once a second (step 1000 at 1 ms a step).
		const wait = 10 * time.Second
		timeout := time.NewTimer(wait)
		defer timeout.Stop()
		for shots := 0; shots < 3; {
			select {
			case <-r.changed:
				if n := len(r.artifactNames()); n > shots {
					shots = n
					timeout.Reset(wait)
				}
			case err := <-done:
				t.Fatalf("hang returned %v before it was stopped", err)
			case <-timeout.C:
				t.Fatal("no screenshots from a hanging job")
			}
		}
		cancel(stopped)
		select {
		case err := <-done:
			if !errors.Is(err, stopped) {
				t.Fatalf("%v, want the cancel cause", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("hang did not stop on cancel")
		}
	})
}

// effectServer counts POSTs and records their Idempotency-Key headers.
type effectServer struct {
	*httptest.Server
	mu     sync.Mutex
	keys   []string
	bodies []map[string]any
	status int
}

func newEffectServer(t *testing.T) *effectServer {
	s := &effectServer{status: http.StatusCreated}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(req.Body).Decode(&body)
		s.mu.Lock()
		s.keys = append(s.keys, req.Header.Get("Idempotency-Key"))
		s.bodies = append(s.bodies, body)
		status := s.status
		s.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *effectServer) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...)
}

func TestSimEffectOnceAcrossAttempts(t *testing.T) {
	t.Parallel()
	srv := newEffectServer(t)
	l := newFakeLedger()
	sim := `{"steps":2,"step_ms":0,"fail_attempts":1,"effect_url":"` + srv.URL + `/notify"}`

	if _, err := runSim(t, simJob(42, 1, sim), newFakeReporter(42, l)); err == nil || worker.IsPermanent(err) {
		t.Fatalf("attempt 1: %v, want a retryable failure", err)
	}
	if got := srv.calls(); len(got) != 1 || got[0] != "42:sim-effect" {
		t.Fatalf("after attempt 1 the server saw %q, want one call with 42:sim-effect", got)
	}
	if body := srv.bodies[0]; body["job_id"] != 42.0 || body["attempt"] != 1.0 || body["app"] != "com.example.notes" {
		t.Fatalf("body %v", body)
	}

	result, err := runSim(t, simJob(42, 2, sim), newFakeReporter(42, l))
	if err != nil {
		t.Fatalf("attempt 2: %v", err)
	}
	if got := srv.calls(); len(got) != 1 {
		t.Fatalf("the server saw %d calls, want exactly 1", len(got))
	}
	effect, _ := result["effect"].(map[string]any)
	if effect["status"] != 201.0 {
		t.Fatalf("result %v, want the recorded effect", result)
	}
}

func TestSimEffectFailureRetries(t *testing.T) {
	t.Parallel()
	srv := newEffectServer(t)
	srv.status = http.StatusBadGateway
	l := newFakeLedger()
	sim := `{"steps":1,"step_ms":0,"effect_url":"` + srv.URL + `"}`
	_, err := runSim(t, simJob(5, 1, sim), newFakeReporter(5, l))
	if err == nil || worker.IsPermanent(err) || !strings.Contains(err.Error(), "502") {
		t.Fatalf("attempt 1: %v, want a retryable failure naming the status", err)
	}
	srv.mu.Lock()
	srv.status = http.StatusOK
	srv.mu.Unlock()
	if _, err := runSim(t, simJob(5, 2, sim), newFakeReporter(5, l)); err != nil {
		t.Fatalf("attempt 2: %v", err)
	}
	// A failed call is not done: the next attempt calls again, with the
	// same key for the receiver to recognise.
	if got := srv.calls(); len(got) != 2 || got[0] != got[1] || got[0] != "5:sim-effect" {
		t.Fatalf("calls %q", got)
	}
}

func TestSimEffectLeaseLost(t *testing.T) {
	t.Parallel()
	srv := newEffectServer(t)
	r := newFakeReporter(5, newFakeLedger())
	r.loseLease()
	if _, err := runSim(t, simJob(5, 1, `{"steps":1,"step_ms":0,"effect_url":"`+srv.URL+`"}`), r); err != nil {
		t.Fatalf("%v: a lost lease is the heartbeat's to act on", err)
	}
	if got := srv.calls(); len(got) != 0 {
		t.Fatalf("calls %q without a lease", got)
	}
}

func TestSimEffectURLInvalid(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"ftp://example.com/x", "http://", "example.com/hook", "://"} {
		t.Run(u, func(t *testing.T) {
			t.Parallel()
			_, err := runSim(t, simJob(1, 1, `{"steps":1,"step_ms":0,"effect_url":"`+u+`"}`), newFakeReporter(1, newFakeLedger()))
			if !worker.IsPermanent(err) {
				t.Fatalf("%v, want a permanent failure", err)
			}
		})
	}
}

// A misspelt sim option fails the run at once, naming it, instead of
// running something other than what was asked; the rest of the payload
// is the submitter's own and may hold anything.
func TestSimUnknownOption(t *testing.T) {
	t.Parallel()
	for sim, field := range map[string]string{
		`{"steps":1,"step_ms":0,"stepms":5}`:                                      `"stepms"`,
		`{"steps":1,"step_ms":0,"usage":{"model":"m","cost_micros":500}}`:         `"cost_micros"`,
		`{"steps":1,"step_ms":0,"usage":{"cost_micros_per_step":1},"extra":true}`: `"extra"`,
	} {
		r := newFakeReporter(1, newFakeLedger())
		_, err := runSim(t, simJob(1, 1, sim), r)
		if !worker.IsPermanent(err) || !strings.Contains(err.Error(), field) {
			t.Errorf("sim %s: %v, want a permanent failure naming %s", sim, err, field)
		}
		if len(r.steps) != 0 || len(r.usage) != 0 {
			t.Errorf("sim %s: ran %d steps, %d usage reports, want none", sim, len(r.steps), len(r.usage))
		}
	}
	job := simJob(2, 1, `{"steps":1,"step_ms":0}`)
	job.Payload = json.RawMessage(`{"app":"com.example.notes","notes":"anything","sim":{"steps":1,"step_ms":0}}`)
	if _, err := runSim(t, job, newFakeReporter(2, newFakeLedger())); err != nil {
		t.Fatalf("payload with a key of its own: %v", err)
	}
	job.Payload = json.RawMessage(`{"app":"com.example.notes","sim":null}`)
	if _, err := runSim(t, job, newFakeReporter(2, newFakeLedger())); err != nil {
		t.Fatalf("payload with sim null: %v", err)
	}
}

func TestSimUploadFailure(t *testing.T) {
	t.Parallel()
	t.Run("Warns", func(t *testing.T) {
		t.Parallel()
		r := newFakeReporter(1, newFakeLedger())
		r.artifactErr = errors.New("disk full")
		result, err := runSim(t, simJob(1, 1, `{"steps":3,"step_ms":0}`), r)
		if err != nil {
			t.Fatal(err)
		}
		warnings, _ := result["warnings"].([]any)
		if len(warnings) != 1 || !strings.Contains(warnings[0].(string), "disk full") || result["screenshots_failed"] != 3.0 {
			t.Fatalf("result %v, want one warning about 3 failed uploads", result)
		}
	})
	t.Run("LeaseLost", func(t *testing.T) {
		t.Parallel()
		r := newFakeReporter(1, newFakeLedger())
		r.artifactErr = queue.ErrLeaseLost
		result, err := runSim(t, simJob(1, 1, `{"steps":2,"step_ms":0}`), r)
		if err != nil || result["warnings"] != nil {
			t.Fatalf("result %v, err %v", result, err)
		}
	})
}

func TestShootsAt(t *testing.T) {
	t.Parallel()
	shots := 0
	for step := 1; step <= 200; step++ {
		if shootsAt(step, 3, 50, true) {
			shots++
		}
	}
	// 3 nominal steps, then every 20th of 50 ms: one a second.
	if shots != 3+10 {
		t.Fatalf("%d screenshots in 200 hanging steps, want 13", shots)
	}
	for step := 1; step <= 100; step++ {
		if !shootsAt(step, 100, 0, false) {
			t.Fatalf("finite step %d took no screenshot", step)
		}
	}
}

func BenchmarkScreenPNG(b *testing.B) {
	s := Screen{JobID: 42, Attempt: 2, App: "com.example.notes", Step: 2, Steps: 3}
	for b.Loop() {
		if _, err := s.PNG(); err != nil {
			b.Fatal(err)
		}
	}
}

// With checkpoint true the sim saves one after each step, and an attempt
// that receives one starts at the step after it: a 5-step run resumed
// after step 3 runs exactly 4 and 5, and counts every screenshot. (The
// e2e test measures the 10-step run with real processes.)
func TestSimCheckpointResumes(t *testing.T) {
	t.Parallel()
	r := newFakeReporter(42, newFakeLedger())
	res, err := runSim(t, simJob(42, 1, `{"steps":5,"step_ms":0,"checkpoint":true}`), r)
	if err != nil {
		t.Fatal(err)
	}
	saved := r.savedCheckpoints()
	if len(saved) != 5 || saved[2].step != 3 || res["steps_run"] != nil {
		t.Fatalf("first run: checkpoints %+v, result %v; want one per step", saved, res)
	}

	job := simJob(42, 2, `{"steps":5,"step_ms":0,"checkpoint":true}`)
	job.Checkpoint = &queue.Checkpoint{Step: 3, State: saved[2].state, Attempt: 1}
	r2 := newFakeReporter(42, newFakeLedger())
	res, err = runSim(t, job, r2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r2.steps, []int{4, 5}) {
		t.Fatalf("resumed after step 3, progress of steps %v, want 4, 5", r2.steps)
	}
	if res["resumed_after_step"] != float64(3) || res["steps_run"] != float64(2) || res["screenshots"] != float64(5) {
		t.Fatalf("resumed result %v, want resumed_after_step 3, steps_run 2, screenshots 5", res)
	}
	if names := r2.artifactNames(); !slices.Equal(names, []string{"step-04.png", "step-05.png"}) {
		t.Fatalf("resumed run's screenshots %v", names)
	}

	// Without checkpoint true a checkpoint given is not used, and none saved.
	plain := simJob(42, 2, `{"steps":2,"step_ms":0}`)
	plain.Checkpoint = &queue.Checkpoint{Step: 1, State: json.RawMessage(`{}`)}
	r3 := newFakeReporter(42, newFakeLedger())
	if _, err := runSim(t, plain, r3); err != nil {
		t.Fatal(err)
	}
	if len(r3.savedCheckpoints()) != 0 || len(r3.steps) != 2 {
		t.Fatalf("sim without checkpoint: saved %+v, steps %v", r3.savedCheckpoints(), r3.steps)
	}
}

// payload.sim.usage is reported after every step's progress; the report
// that spends the budget ends the run at once, its screenshots taken.
func TestSimUsage(t *testing.T) {
	t.Parallel()
	sim := `{"steps":3,"step_ms":0,"usage":{"model":"gpt-x","cost_micros_per_step":1000,"input_tokens_per_step":50,"counters_per_step":{"screens":1}}}`
	r := newFakeReporter(7, newFakeLedger())
	if _, err := runSim(t, simJob(7, 1, sim), r); err != nil {
		t.Fatal(err)
	}
	if len(r.usage) != 3 || r.usage[2].Model != "gpt-x" || r.usage[2].CostMicros != 1000 || r.usage[2].InputTokens != 50 || r.usage[2].Counters["screens"] != 1 {
		t.Fatalf("usage %+v, want one report a step", r.usage)
	}

	spent := newFakeReporter(8, newFakeLedger())
	spent.budget = 2
	if _, err := runSim(t, simJob(8, 1, sim), spent); !errors.Is(err, queue.ErrBudgetSpent) {
		t.Fatalf("run with a budget of two reports: %v, want ErrBudgetSpent", err)
	}
	if names := spent.artifactNames(); len(names) != 2 || len(spent.usage) != 2 {
		t.Fatalf("screenshots %v and %d reports, want two of each: the run stops at the report that spends the budget", names, len(spent.usage))
	}

	bad := newFakeReporter(9, newFakeLedger())
	if _, err := runSim(t, simJob(9, 1, `{"steps":1,"usage":{"cost_micros_per_step":-1}}`), bad); err == nil || !worker.IsPermanent(err) {
		t.Fatalf("a negative cost: %v, want a permanent failure", err)
	}
}
