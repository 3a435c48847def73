package live_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasehold/leasehold/live"
	"github.com/leasehold/leasehold/queue"
)

// next waits for s's next event.
func next(t *testing.T, s *live.Stream, within time.Duration) live.Event {
	t.Helper()
	select {
	case ev := <-s.Events():
		return ev
	case <-s.Done():
		t.Fatal("stream was dropped")
	case <-time.After(within):
		t.Fatalf("no event within %s", within)
	}
	return live.Event{}
}

func noEvent(t *testing.T, s *live.Stream, within time.Duration) {
	t.Helper()
	select {
	case ev := <-s.Events():
		t.Fatalf("unexpected event %+v", ev)
	case <-time.After(within):
	}
}

func subscribe(t *testing.T, h *live.Hub, lastID string, job int64) (*live.Stream, []live.Event) {
	t.Helper()
	s, replay, err := h.Subscribe(lastID, job)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, replay
}

func jobsChanged(ids ...int64) queue.Change {
	return queue.Change{Kind: queue.ChangeJobs, JobIDs: ids, States: []queue.State{queue.StatePending, queue.StateRunning}}
}

func TestHubFansOutToEveryStream(t *testing.T) {
	t.Parallel()
	h := live.NewHub(live.Config{Coalesce: -1})
	var streams []*live.Stream
	for range 50 {
		s, _ := subscribe(t, h, "", 0)
		streams = append(streams, s)
	}
	h.Notify(jobsChanged(7))
	var first string
	for _, s := range streams {
		ev := next(t, s, time.Second)
		if ev.Name != live.EventJobs || ev.Data != `{"ids":[7],"states":["pending","running"]}` {
			t.Fatalf("event %+v", ev)
		}
		if first == "" {
			first = ev.ID
		} else if ev.ID != first {
			t.Fatalf("ids differ between streams: %s, %s", first, ev.ID)
		}
	}
}

func TestHubJobStreamHearsOnlyItsJob(t *testing.T) {
	t.Parallel()
	h := live.NewHub(live.Config{Coalesce: -1})
	page, _ := subscribe(t, h, "", 42)
	list, _ := subscribe(t, h, "", 0)

	h.Notify(queue.Change{Kind: queue.ChangeJobActivity, JobIDs: []int64{41}})
	h.Notify(queue.Change{Kind: queue.ChangeJobActivity, JobIDs: []int64{42}})
	if ev := next(t, page, time.Second); ev.Name != live.EventJob || ev.Data != `{"ids":[42]}` {
		t.Fatalf("job page got %+v", ev)
	}
	h.Notify(jobsChanged(1, 42))
	if ev := next(t, page, time.Second); ev.Name != live.EventJob {
		t.Fatalf("job page got %+v for a transition of its job", ev)
	}
	// A statement too big to name its jobs may concern this one.
	h.Notify(queue.Change{Kind: queue.ChangeJobs})
	if ev := next(t, page, time.Second); ev.Name != live.EventJob || ev.Data != `{"ids":null}` {
		t.Fatalf("job page got %+v for an unnamed change", ev)
	}
	h.Notify(queue.Change{Kind: queue.ChangeWorker, WorkerID: "w1", WorkerChanged: true})
	noEvent(t, page, 50*time.Millisecond)

	// The list page hears transitions and workers, never job activity.
	for _, want := range []string{live.EventJobs, live.EventJobs, live.EventWorkers} {
		if ev := next(t, list, time.Second); ev.Name != want {
			t.Fatalf("list page got %+v, want %s", ev, want)
		}
	}
	noEvent(t, list, 50*time.Millisecond)
}

// A browser that stops reading fills its buffer and is dropped; the
// others keep hearing every event at once.
func TestHubDropsStalledReaderWithoutSlowingOthers(t *testing.T) {
	t.Parallel()
	h := live.NewHub(live.Config{Coalesce: -1, Buffer: 8})
	stalled, _ := subscribe(t, h, "", 0)
	reader, _ := subscribe(t, h, "", 0)

	for i := range 100 {
		start := time.Now()
		h.Notify(jobsChanged(int64(i + 1)))
		ev := next(t, reader, time.Second)
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Fatalf("event %d took %s to reach the reader", i, d)
		}
		if want := fmt.Sprintf(`{"ids":[%d],`, i+1); !strings.HasPrefix(ev.Data, want) {
			t.Fatalf("event %d: %+v", i, ev)
		}
	}
	select {
	case <-stalled.Done():
	default:
		t.Fatal("a reader 100 events behind, with a buffer of 8, was not dropped")
	}
	select {
	case <-reader.Done():
		t.Fatal("the reader that kept up was dropped")
	default:
	}
	if n := h.Streams(); n != 1 {
		t.Fatalf("%d streams open, want 1", n)
	}
}

func TestHubReplaysFromLastEventID(t *testing.T) {
	t.Parallel()
	h := live.NewHub(live.Config{Coalesce: -1, Ring: 16})
	s, _ := subscribe(t, h, "", 0)
	var ids []string
	for i := range 5 {
		h.Notify(jobsChanged(int64(i + 1)))
		ids = append(ids, next(t, s, time.Second).ID)
	}
	s.Close()

	_, replay := subscribe(t, h, ids[1], 0)
	if len(replay) != 3 {
		t.Fatalf("replay after %s: %+v, want the 3 events after it", ids[1], replay)
	}
	for i, ev := range replay {
		if ev.ID != ids[i+2] || ev.Name != live.EventJobs {
			t.Fatalf("replay[%d] = %+v, want id %s", i, ev, ids[i+2])
		}
	}
	// Up to date: nothing to replay.
	if _, replay := subscribe(t, h, ids[4], 0); len(replay) != 0 {
		t.Fatalf("replay after the latest event: %+v", replay)
	}
	// A job page's replay holds only its job's events.
	_, replay = subscribe(t, h, ids[0], 3)
	if len(replay) != 1 || replay[0].Name != live.EventJob || replay[0].ID != ids[2] {
		t.Fatalf("job 3's replay: %+v", replay)
	}
	// The id a page is rendered with replays what came after it.
	before := h.LastID()
	h.Notify(jobsChanged(99))
	if _, replay := subscribe(t, h, before, 0); len(replay) != 1 || !strings.Contains(replay[0].Data, "99") {
		t.Fatalf("replay after LastID: %+v", replay)
	}
}

func TestHubResetsUnknownOrTooOldID(t *testing.T) {
	t.Parallel()
	h := live.NewHub(live.Config{Coalesce: -1, Ring: 4})
	s, _ := subscribe(t, h, "", 0)
	h.Notify(jobsChanged(1))
	oldest := next(t, s, time.Second).ID
	for i := range 10 {
		h.Notify(jobsChanged(int64(i + 2)))
		next(t, s, time.Second)
	}
	other := live.NewHub(live.Config{})
	for name, id := range map[string]string{
		"TooOld":        oldest,
		"OtherServer":   other.LastID(),
		"Garbage":       "not-an-id",
		"NoSeparator":   "12345",
		"FromTheFuture": strings.Split(h.LastID(), "-")[0] + "-999999",
	} {
		t.Run(name, func(t *testing.T) {
			_, replay := subscribe(t, h, id, 0)
			if len(replay) != 1 || replay[0].Name != live.EventReset || replay[0].ID != h.LastID() {
				t.Fatalf("replay after %q: %+v, want one reset with the latest id %s", id, replay, h.LastID())
			}
		})
	}
}

// Changes within the coalescing window make one more event, which names
// all of them, and the last change always gets out.
func TestHubCoalesces(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := live.NewHub(live.Config{Coalesce: 200 * time.Millisecond})
		s, _ := subscribe(t, h, "", 0)
		h.Notify(jobsChanged(1))
		if ev := next(t, s, 50*time.Millisecond); !strings.Contains(ev.Data, "[1]") {
			t.Fatalf("first event %+v: the first change goes out at once", ev)
		}
		for i := range 500 {
			h.Notify(jobsChanged(int64(i + 2)))
		}
		ev := next(t, s, time.Second)
		if ev.Name != live.EventJobs || ev.Data != `{"ids":null,"states":["pending","running"]}` {
			t.Fatalf("coalesced event %+v: 500 jobs are too many to name", ev)
		}
		noEvent(t, s, 300*time.Millisecond)

		h.Notify(jobsChanged(600))
		h.Notify(jobsChanged(601))
		a := next(t, s, 50*time.Millisecond)
		b := next(t, s, time.Second)
		if !strings.Contains(a.Data, "[600]") || !strings.Contains(b.Data, "[601]") {
			t.Fatalf("after a quiet window: %+v then %+v", a, b)
		}
	})
}

func TestHubDeadAndWorkers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := live.NewHub(live.Config{Coalesce: -1, WorkerOnline: 300 * time.Millisecond})
		s, _ := subscribe(t, h, "", 0)

		h.Notify(queue.Change{Kind: queue.ChangeJobs, JobIDs: []int64{1}, States: []queue.State{queue.StateRunning, queue.StateDead}})
		if a, b := next(t, s, time.Second), next(t, s, time.Second); a.Name != live.EventJobs || b.Name != live.EventDead {
			t.Fatalf("a job going dead: %+v, %+v", a, b)
		}

		h.Notify(queue.Change{Kind: queue.ChangeWorker, WorkerID: "w1"})
		if ev := next(t, s, time.Second); ev.Name != live.EventWorkers {
			t.Fatalf("a worker's first report: %+v", ev)
		}
		// Reports that change nothing are quiet while they keep coming…
		for range 5 {
			time.Sleep(50 * time.Millisecond)
			h.Notify(queue.Change{Kind: queue.ChangeWorker, WorkerID: "w1"})
		}
		select {
		case ev := <-s.Events():
			t.Fatalf("a report that changed nothing: %+v", ev)
		default:
		}
		h.Notify(queue.Change{Kind: queue.ChangeWorker, WorkerID: "w1", WorkerChanged: true})
		if ev := next(t, s, time.Second); ev.Name != live.EventWorkers {
			t.Fatalf("a changed report: %+v", ev)
		}
		// …and when they stop, the worker is announced gone.
		start := time.Now()
		if ev := next(t, s, 2*time.Second); ev.Name != live.EventWorkers {
			t.Fatalf("a silent worker: %+v", ev)
		}
		if d := time.Since(start); d < 200*time.Millisecond {
			t.Fatalf("announced gone after %s, before its online window", d)
		}
	})
}

func TestHubMissedChangesReset(t *testing.T) {
	t.Parallel()
	h := live.NewHub(live.Config{Coalesce: -1})
	page, _ := subscribe(t, h, "", 5)
	list, _ := subscribe(t, h, "", 0)
	h.Notify(queue.Change{Kind: queue.ChangesMissed})
	for _, s := range []*live.Stream{page, list} {
		if ev := next(t, s, time.Second); ev.Name != live.EventReset {
			t.Fatalf("after the listener reconnected: %+v", ev)
		}
	}
}

func TestHubLimitsAndClose(t *testing.T) {
	t.Parallel()
	h := live.NewHub(live.Config{MaxStreams: 3})
	var streams []*live.Stream
	for range 3 {
		s, _ := subscribe(t, h, "", 0)
		streams = append(streams, s)
	}
	if _, _, err := h.Subscribe("", 0); err != live.ErrTooMany {
		t.Fatalf("a fourth stream: %v, want ErrTooMany", err)
	}
	streams[0].Close()
	s, _ := subscribe(t, h, "", 0)
	streams = append(streams[1:], s)

	h.Close()
	for _, s := range streams {
		select {
		case <-s.Done():
		case <-time.After(time.Second):
			t.Fatal("Close left a stream open")
		}
	}
	if _, _, err := h.Subscribe("", 0); err != live.ErrClosed {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
	h.Notify(jobsChanged(1)) // must not panic on closed streams
}

// Many notifiers and subscribers at once: run with -race.
func TestHubConcurrent(t *testing.T) {
	t.Parallel()
	h := live.NewHub(live.Config{Coalesce: time.Millisecond, Buffer: 4})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				h.Notify(jobsChanged(int64(i*1000 + j)))
				h.Notify(queue.Change{Kind: queue.ChangeWorker, WorkerID: fmt.Sprint("w", j%10)})
			}
		}()
	}
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				s, _, err := h.Subscribe(h.LastID(), 0)
				if err != nil {
					t.Error(err)
					return
				}
				select {
				case <-s.Events():
				case <-s.Done():
				case <-time.After(10 * time.Millisecond):
				}
				s.Close()
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	h.Close()
}

// watchLog records a hub's watch calls.
type watchLog struct {
	mu    sync.Mutex
	calls []string
}

func (w *watchLog) Watch(_ context.Context, server string, ttl time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, "watch "+ttl.String())
	return nil
}

func (w *watchLog) Unwatch(_ context.Context, server string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, "unwatch")
	return nil
}

func (w *watchLog) last() (string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.calls) == 0 {
		return "", 0
	}
	return w.calls[len(w.calls)-1], len(w.calls)
}

// The database announces changes only while this server has streams: the
// first stream starts a watch at once (and a reset, since what changed
// before it went unannounced), an open stream renews it, and once the
// last one closed the watch ends.
func TestKeepWatchedFollowsTheStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := live.NewHub(live.Config{Coalesce: -1, WatchRenew: 50 * time.Millisecond})
		w := &watchLog{}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { h.KeepWatched(ctx, w, slog.New(slog.DiscardHandler)); close(done) }()

		time.Sleep(120 * time.Millisecond)
		if call, _ := w.last(); call != "" {
			t.Fatalf("without streams: %q, want no watch", call)
		}
		s, _, err := h.Subscribe("", 0)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-s.Events():
			if ev.Name != live.EventReset {
				t.Fatalf("first event %+v, want a reset", ev)
			}
		case <-time.After(time.Second):
			t.Fatal("no reset after the watch began")
		}
		if call, _ := w.last(); call != "watch 150ms" {
			t.Fatalf("after the first stream: %q, want a watch", call)
		}
		time.Sleep(200 * time.Millisecond)
		if _, n := w.last(); n < 3 {
			t.Fatalf("%d calls while a stream was open, want the watch renewed", n)
		}
		s.Close()
		time.Sleep(time.Second) // on the bubble's clock, as every sleep here
		synctest.Wait()
		if call, _ := w.last(); call != "unwatch" {
			t.Fatalf("last call %q a second after the last stream closed, want unwatch", call)
		}
		cancel()
		<-done
	})
}
