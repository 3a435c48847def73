package queue_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// waitFixture is a database with queue "phones" and helpers to build each
// situation a pending job can wait in.
type waitFixture struct{ *fixture }

func setupWait(t *testing.T) waitFixture {
	t.Helper()
	return waitFixture{setup(t, 4)}
}

// waitJob is what a job of the waiting tests names.
type waitJob struct {
	device   string
	key      string
	runAt    *time.Time
	backoffH bool // a failed attempt's retry is an hour away
}

func (f waitFixture) submit(t *testing.T, o waitJob) queue.Job {
	t.Helper()
	nj := queue.NewJob{Kind: "test", Queue: "phones", Payload: json.RawMessage(`{}`), RunAt: o.runAt}
	if o.device != "" {
		nj.Payload = json.RawMessage(`{"device":"` + o.device + `"}`)
	}
	if o.key != "" {
		nj.ConcurrencyKey = &o.key
	}
	if o.backoffH {
		hour := int32(time.Hour.Milliseconds())
		nj.BackoffBaseMs, nj.BackoffMaxMs = &hour, &hour
	}
	j, _, err := f.client.Insert(f.ctx, nj)
	if err != nil {
		t.Fatalf("inserting job: %v", err)
	}
	return j
}

// seen records worker id as online, taking queues, with device labels
// and, when unfit is not "", a phone that holds back for that reason.
func (f waitFixture) seen(t *testing.T, id string, queues []string, devices []string, unfit string) {
	t.Helper()
	p := queue.Presence{ID: id, Queues: queues, Devices: devices}
	if unfit != "" {
		p.Device = &queue.DeviceReport{Claiming: false, Reason: unfit}
	}
	if err := f.client.WorkerSeen(f.ctx, p); err != nil {
		t.Fatalf("worker seen: %v", err)
	}
}

// gone makes worker id last seen a minute ago: past queue.OnlineWindow.
func (f waitFixture) gone(t *testing.T, id string) {
	t.Helper()
	if _, err := f.pool.Exec(f.ctx, "UPDATE workers SET last_seen = now() - interval '1 minute' WHERE id = $1", id); err != nil {
		t.Fatal(err)
	}
}

// claimAll claims for worker until want jobs are taken: a limited claim
// (cap, key) may need a second call to learn the limits apply.
func (f waitFixture) claimAll(t *testing.T, worker string, devices []string, want int) []queue.Job {
	t.Helper()
	var got []queue.Job
	for range 5 {
		jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: worker, Queues: []string{"phones"}, Devices: devices, Limit: want - len(got), Lease: time.Minute})
		if err != nil {
			t.Fatalf("claiming: %v", err)
		}
		if got = append(got, jobs...); len(got) == want {
			return got
		}
	}
	t.Fatalf("claimed %d jobs, want %d", len(got), want)
	return nil
}

func (f waitFixture) patch(t *testing.T, p queue.QueuePatch) {
	t.Helper()
	if _, err := f.client.PatchQueue(f.ctx, "phones", p, "user:admin"); err != nil {
		t.Fatalf("patching queue: %v", err)
	}
}

func (f waitFixture) why(t *testing.T, id int64) queue.Waiting {
	t.Helper()
	got, err := f.client.WhyWaiting(f.ctx, id)
	if err != nil {
		t.Fatalf("WhyWaiting: %v", err)
	}
	w, ok := got[id]
	if !ok {
		t.Fatalf("WhyWaiting(%d): no answer, want one for a pending job", id)
	}
	if w.JobID != id || w.Queue != "phones" {
		t.Errorf("WhyWaiting(%d) = job %d queue %q", id, w.JobID, w.Queue)
	}
	return w
}

func wantKind(t *testing.T, w queue.Waiting, kind queue.WaitKind) {
	t.Helper()
	if w.Kind != kind {
		t.Fatalf("kind = %q, want %q (%+v)", w.Kind, kind, w)
	}
}

func TestWhyWaitingReady(t *testing.T) {
	t.Parallel()
	f := setupWait(t)
	f.seen(t, "w1", []string{"phones"}, nil, "")
	j := f.submit(t, waitJob{})
	wantKind(t, f.why(t, j.ID), queue.WaitReady)
}

func TestWhyWaitingQueuePaused(t *testing.T) {
	t.Parallel()
	f := setupWait(t)
	f.seen(t, "w1", []string{"phones"}, nil, "")
	j := f.submit(t, waitJob{})
	before := time.Now()
	f.patch(t, queue.QueuePatch{Paused: ptr(true)})
	w := f.why(t, j.ID)
	wantKind(t, w, queue.WaitQueuePaused)
	if w.PausedBy == nil || *w.PausedBy != "user:admin" {
		t.Errorf("paused by %v, want user:admin", w.PausedBy)
	}
	if w.PausedAt == nil || w.PausedAt.Before(before.Add(-5*time.Second)) || w.PausedAt.After(time.Now().Add(5*time.Second)) {
		t.Errorf("paused at %v, want about %v", w.PausedAt, before)
	}
	f.patch(t, queue.QueuePatch{Paused: ptr(false)})
	wantKind(t, f.why(t, j.ID), queue.WaitReady)
}

func TestWhyWaitingNoWorker(t *testing.T) {
	t.Parallel()
	f := setupWait(t)
	j := f.submit(t, waitJob{})
	wantKind(t, f.why(t, j.ID), queue.WaitNoWorker)
	// A worker of another queue does not serve it; one of this queue
	// that stopped reporting no longer does.
	f.seen(t, "other", []string{"default"}, nil, "")
	wantKind(t, f.why(t, j.ID), queue.WaitNoWorker)
	f.seen(t, "w1", []string{"default", "phones"}, nil, "")
	wantKind(t, f.why(t, j.ID), queue.WaitReady)
	f.gone(t, "w1")
	wantKind(t, f.why(t, j.ID), queue.WaitNoWorker)
}

func TestWhyWaitingNoMatchingDevice(t *testing.T) {
	t.Parallel()
	f := setupWait(t)
	f.seen(t, "moto", []string{"phones"}, []string{"moto-g"}, "")
	f.seen(t, "pixel-elsewhere", []string{"default"}, []string{"pixel-7"}, "")
	j := f.submit(t, waitJob{device: "pixel-7"})
	w := f.why(t, j.ID)
	wantKind(t, w, queue.WaitNoDevice)
	if w.Device != "pixel-7" {
		t.Errorf("device %q, want pixel-7", w.Device)
	}
	f.seen(t, "pixel", []string{"phones"}, []string{"usb", "pixel-7"}, "")
	wantKind(t, f.why(t, j.ID), queue.WaitReady)
}

func TestWhyWaitingDevicesUnfit(t *testing.T) {
	t.Parallel()
	f := setupWait(t)
	f.seen(t, "pixel-b", []string{"phones"}, []string{"pixel-7"}, "battery 9% (under 15%) and not charging")
	f.seen(t, "pixel-a", []string{"phones"}, []string{"pixel-7"}, "adb offline")
	f.seen(t, "moto", []string{"phones"}, []string{"moto-g"}, "")
	j := f.submit(t, waitJob{device: "pixel-7"})
	w := f.why(t, j.ID)
	wantKind(t, w, queue.WaitDevicesUnfit)
	want := []string{"pixel-a: adb offline", "pixel-b: battery 9% (under 15%) and not charging"}
	if w.Online != 2 || !slices.Equal(w.Unfit, want) {
		t.Errorf("online %d unfit %q, want 2 %q", w.Online, w.Unfit, want)
	}
	// A job naming no device waits the same way when every worker of its
	// queue holds back; one fit worker is enough for it (moto here).
	free := f.submit(t, waitJob{})
	wantKind(t, f.why(t, free.ID), queue.WaitReady)
	f.seen(t, "moto", []string{"phones"}, []string{"moto-g"}, "adb unauthorized")
	w = f.why(t, free.ID)
	wantKind(t, w, queue.WaitDevicesUnfit)
	if w.Online != 3 || len(w.Unfit) != 3 {
		t.Errorf("online %d unfit %q, want 3 workers", w.Online, w.Unfit)
	}
	f.seen(t, "pixel-a", []string{"phones"}, []string{"pixel-7"}, "")
	wantKind(t, f.why(t, j.ID), queue.WaitReady)
}

func TestWhyWaitingBackoff(t *testing.T) {
	t.Parallel()
	f := setupWait(t)
	f.seen(t, "w1", []string{"phones"}, nil, "")
	j := f.submit(t, waitJob{backoffH: true})
	claimed := f.claimAll(t, "w1", nil, 1)[0]
	failed, err := f.client.Fail(f.ctx, queue.Lease{JobID: j.ID, Token: claimed.LeaseToken, WorkerID: "w1"}, "boom", true)
	if err != nil || failed.State != queue.StatePending {
		t.Fatalf("fail: %v, state %s", err, failed.State)
	}
	w := f.why(t, j.ID)
	wantKind(t, w, queue.WaitBackoff)
	// An hour's backoff with its jitter of +-20%: 48 to 72 minutes away.
	if w.Until == nil || !w.Until.Equal(failed.RunAt) || time.Until(*w.Until) < 45*time.Minute {
		t.Errorf("until %v, want the retry's run_at %v, about an hour away", w.Until, failed.RunAt)
	}
}

func TestWhyWaitingScheduled(t *testing.T) {
	t.Parallel()
	f := setupWait(t)
	f.seen(t, "w1", []string{"phones"}, nil, "")
	at := time.Now().Add(3 * time.Hour).UTC().Truncate(time.Microsecond)
	j := f.submit(t, waitJob{runAt: &at})
	w := f.why(t, j.ID)
	wantKind(t, w, queue.WaitScheduled)
	if w.Until == nil || !w.Until.Equal(at) {
		t.Errorf("until %v, want %v", w.Until, at)
	}
	// The statement reads the clock a test gives it: at that time the
	// job is due.
	got, err := f.client.At(at.Add(time.Second)).WhyWaiting(f.ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Three hours on, the worker has not reported since: it is gone.
	wantKind(t, got[j.ID], queue.WaitNoWorker)
}

func TestWhyWaitingQueueAtCap(t *testing.T) {
	t.Parallel()
	f := setupWait(t)
	f.seen(t, "w1", []string{"phones"}, nil, "")
	f.patch(t, queue.QueuePatch{MaxRunning: ptr(int32(2))})
	for range 2 {
		f.submit(t, waitJob{})
	}
	f.claimAll(t, "w1", nil, 2)
	j := f.submit(t, waitJob{})
	w := f.why(t, j.ID)
	wantKind(t, w, queue.WaitQueueAtCap)
	if w.Running != 2 || w.Limit != 2 {
		t.Errorf("%d of %d running, want 2 of 2", w.Running, w.Limit)
	}
	f.patch(t, queue.QueuePatch{MaxRunning: ptr(int32(3))})
	wantKind(t, f.why(t, j.ID), queue.WaitReady)
}

func TestWhyWaitingConcurrencyKeyHeld(t *testing.T) {
	t.Parallel()
	f := setupWait(t)
	f.seen(t, "w1", []string{"phones"}, nil, "")
	holder := f.submit(t, waitJob{key: "account-7"})
	claimed := f.claimAll(t, "w1", nil, 1)[0]
	if claimed.ID != holder.ID {
		t.Fatalf("claimed %d, want %d", claimed.ID, holder.ID)
	}
	j := f.submit(t, waitJob{key: "account-7"})
	other := f.submit(t, waitJob{key: "account-8"})
	w := f.why(t, j.ID)
	wantKind(t, w, queue.WaitKeyHeld)
	if w.Key != "account-7" || w.HeldBy != holder.ID || w.Running != 1 || w.Limit != 1 {
		t.Errorf("key %q held by %d, %d of %d running; want account-7 by %d, 1 of 1", w.Key, w.HeldBy, w.Running, w.Limit, holder.ID)
	}
	wantKind(t, f.why(t, other.ID), queue.WaitReady)
	if _, err := f.client.Complete(f.ctx, queue.Lease{JobID: holder.ID, Token: claimed.LeaseToken, WorkerID: "w1"}, nil); err != nil {
		t.Fatal(err)
	}
	wantKind(t, f.why(t, j.ID), queue.WaitReady)
}

// TestWhyWaitingNotPending: a job that is running, finished or missing
// has no reason.
func TestWhyWaitingNotPending(t *testing.T) {
	t.Parallel()
	f := setupWait(t)
	f.seen(t, "w1", []string{"phones"}, nil, "")
	running := f.submit(t, waitJob{})
	f.claimAll(t, "w1", nil, 1)
	got, err := f.client.WhyWaiting(f.ctx, running.ID, running.ID+1000)
	if err != nil || len(got) != 0 {
		t.Fatalf("WhyWaiting = %v, %v; want no entries", got, err)
	}
	if got, err := f.client.WhyWaiting(f.ctx); err != nil || len(got) != 0 {
		t.Fatalf("WhyWaiting() = %v, %v", got, err)
	}
}

// TestWhyWaitingOrder builds one job that every reason applies to, and
// takes them away one at a time, in the documented order: each time the
// next one is the answer.
func TestWhyWaitingOrder(t *testing.T) {
	t.Parallel()
	f := setupWait(t)
	phone := []string{"pixel-7"}
	f.seen(t, "w1", []string{"phones"}, phone, "")
	j := f.submit(t, waitJob{device: "pixel-7", key: "account-7", backoffH: true})
	first := f.claimAll(t, "w1", phone, 1)[0]
	if _, err := f.client.Fail(f.ctx, queue.Lease{JobID: j.ID, Token: first.LeaseToken, WorkerID: "w1"}, "boom", true); err != nil {
		t.Fatal(err)
	}
	keyHolder := f.submit(t, waitJob{key: "account-7"})
	f.submit(t, waitJob{})
	running := f.claimAll(t, "w1", phone, 2)
	var keyLease queue.Job
	for _, r := range running {
		if r.ID == keyHolder.ID {
			keyLease = r
		}
	}
	if keyLease.ID == 0 {
		t.Fatalf("claimed %v, want the key's holder %d among them", running, keyHolder.ID)
	}
	f.patch(t, queue.QueuePatch{MaxRunning: ptr(int32(2))})
	f.patch(t, queue.QueuePatch{Paused: ptr(true)})
	f.gone(t, "w1")

	steps := []struct {
		want queue.WaitKind
		next func()
	}{
		{queue.WaitQueuePaused, func() { f.patch(t, queue.QueuePatch{Paused: ptr(false)}) }},
		{queue.WaitNoWorker, func() { f.seen(t, "moto", []string{"phones"}, []string{"moto-g"}, "") }},
		{queue.WaitNoDevice, func() { f.seen(t, "w1", []string{"phones"}, phone, "adb offline") }},
		{queue.WaitDevicesUnfit, func() { f.seen(t, "w1", []string{"phones"}, phone, "") }},
		{queue.WaitBackoff, func() {
			if _, err := f.pool.Exec(f.ctx, "UPDATE jobs SET run_at = now() WHERE id = $1", j.ID); err != nil {
				t.Fatal(err)
			}
		}},
		{queue.WaitQueueAtCap, func() { f.patch(t, queue.QueuePatch{ClearMaxRunning: true}) }},
		{queue.WaitKeyHeld, func() {
			if _, err := f.client.Complete(f.ctx, queue.Lease{JobID: keyLease.ID, Token: keyLease.LeaseToken, WorkerID: "w1"}, nil); err != nil {
				t.Fatal(err)
			}
		}},
		{queue.WaitReady, nil},
	}
	for _, s := range steps {
		wantKind(t, f.why(t, j.ID), s.want)
		if s.next != nil {
			s.next()
		}
	}
}

// TestWhyWaitingBatch: one call answers a page of jobs in different
// situations, each its own reason.
func TestWhyWaitingBatch(t *testing.T) {
	t.Parallel()
	f := setupWait(t)
	f.seen(t, "w1", []string{"phones"}, nil, "")
	later := time.Now().Add(time.Hour)
	var ids []int64
	want := map[int64]queue.WaitKind{}
	for i := range 50 {
		o, kind := waitJob{}, queue.WaitReady
		switch i % 3 {
		case 1:
			o, kind = waitJob{runAt: &later}, queue.WaitScheduled
		case 2:
			o, kind = waitJob{device: "pixel-7"}, queue.WaitNoDevice
		}
		j := f.submit(t, o)
		ids, want[j.ID] = append(ids, j.ID), kind
	}
	got, err := f.client.WhyWaiting(f.ctx, ids...)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ids) {
		t.Fatalf("%d answers for %d jobs", len(got), len(ids))
	}
	for id, kind := range want {
		if got[id].Kind != kind {
			t.Errorf("job %d: %q, want %q", id, got[id].Kind, kind)
		}
	}
}

// windowOpeningIn is a window of one hour a week in UTC that opens d
// after now (to the minute), and when that is.
func windowOpeningIn(now time.Time, d time.Duration) (string, time.Time) {
	opens := now.UTC().Truncate(time.Minute).Add(d)
	day := strings.ToLower(opens.Weekday().String()[:3])
	return day + " " + opens.Format("15:04") + "-" + opens.Add(time.Hour).Format("15:04") + " UTC", opens
}

func TestWhyWaitingOutsideWindow(t *testing.T) {
	t.Parallel()
	f := setupWait(t)
	f.seen(t, "w-pixel", []string{"phones"}, []string{"pixel7"}, "")
	j := f.submit(t, waitJob{device: "pixel7"})
	wantKind(t, f.why(t, j.ID), queue.WaitReady)

	now := time.Now()
	text, opens := windowOpeningIn(now, 3*time.Hour+10*time.Minute)
	if _, err := f.client.SetAvailability(f.ctx, queue.ScopeDevice, "pixel7", text, "user:admin"); err != nil {
		t.Fatal(err)
	}
	got, err := f.client.At(now).WhyWaiting(f.ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	w := got[j.ID]
	wantKind(t, w, queue.WaitOutsideWindow)
	if w.Until == nil || !w.Until.Equal(opens) || w.WindowOf != "pixel7" || w.Window == nil || w.Window.Text != text {
		t.Fatalf("outside window until %v of %q (%v), want %s of pixel7", w.Until, w.WindowOf, w.Window, opens)
	}
	// A job naming no device waits for the worker that drives pixel7 too.
	free := f.submit(t, waitJob{})
	wantKind(t, f.why(t, free.ID), queue.WaitOutsideWindow)

	// Unfit comes first: the phone could not claim even inside its window.
	f.seen(t, "w-pixel", []string{"phones"}, []string{"pixel7"}, "adb offline")
	wantKind(t, f.why(t, j.ID), queue.WaitDevicesUnfit)
	f.seen(t, "w-pixel", []string{"phones"}, []string{"pixel7"}, "")
	if err := f.client.ClearAvailability(f.ctx, queue.ScopeDevice, "pixel7"); err != nil {
		t.Fatal(err)
	}
	wantKind(t, f.why(t, j.ID), queue.WaitReady)
}

// TestWhyWaitingWindowTooShort: open now, but not for the job's timeout:
// the job waits for an opening long enough, here the worker's own window
// next week.
func TestWhyWaitingWindowTooShort(t *testing.T) {
	t.Parallel()
	f := setupWait(t)
	f.seen(t, "w1", []string{"phones"}, nil, "")
	now := time.Now()
	// Open from a minute ago for an hour, in this week and no other.
	text, _ := windowOpeningIn(now, -time.Minute)
	if _, err := f.client.SetAvailability(f.ctx, queue.ScopeWorker, "w1", text, ""); err != nil {
		t.Fatal(err)
	}
	timeout := int32((2 * time.Hour).Milliseconds())
	j, _, err := f.client.Insert(f.ctx, queue.NewJob{Kind: "test", Queue: "phones", Payload: json.RawMessage(`{}`), TimeoutMs: &timeout})
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.client.At(now).WhyWaiting(f.ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	w := got[j.ID]
	wantKind(t, w, queue.WaitOutsideWindow)
	// Never long enough: an hour-long window cannot fit a two-hour job.
	if w.Until != nil {
		t.Errorf("until %v, want none: the window is never open for 2 h", w.Until)
	}
	short := int32((30 * time.Minute).Milliseconds())
	j2, _, err := f.client.Insert(f.ctx, queue.NewJob{Kind: "test", Queue: "phones", Payload: json.RawMessage(`{}`), TimeoutMs: &short})
	if err != nil {
		t.Fatal(err)
	}
	got, err = f.client.At(time.Now()).WhyWaiting(f.ctx, j2.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantKind(t, got[j2.ID], queue.WaitReady)
}
