package queue_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
)

// changeListener hears leasehold_events on a connection of its own.
type changeListener struct {
	conn *pgx.Conn
}

// listenChanges listens, and watches as a server with open streams does:
// without a watcher the database announces nothing.
func listenChanges(t *testing.T, f *fixture) *changeListener {
	t.Helper()
	if err := f.client.Watch(f.ctx, "test-server", time.Hour); err != nil {
		t.Fatal(err)
	}
	return listenOnly(t, f)
}

func listenOnly(t *testing.T, f *fixture) *changeListener {
	t.Helper()
	return &changeListener{conn: listenOn(t, f, "leasehold_events")}
}

// listenOn is a connection of its own listening on channel.
func listenOn(t *testing.T, f *fixture, channel string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.ConnectConfig(f.ctx, f.pool.Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(f.ctx, "LISTEN "+channel); err != nil {
		t.Fatal(err)
	}
	return conn
}

type changePayload struct {
	K   string   `json:"k"`
	IDs []int64  `json:"ids"`
	S   []string `json:"s"`
}

// drain returns every notification that arrives within quiet of the last.
func (l *changeListener) drain(t *testing.T, quiet time.Duration) []changePayload {
	t.Helper()
	var out []changePayload
	for {
		ctx, cancel := context.WithTimeout(context.Background(), quiet)
		n, err := l.conn.WaitForNotification(ctx)
		cancel()
		if err != nil {
			return out
		}
		var p changePayload
		if err := json.Unmarshal([]byte(n.Payload), &p); err != nil {
			t.Fatalf("payload %q: %v", n.Payload, err)
		}
		out = append(out, p)
	}
}

// While no server has open streams nothing is announced: a drain nobody
// watches wakes no listener (each wake-up is a transaction of its own in
// every listening session). A watch that runs out, or is removed, ends
// the announcements.
func TestChangeNotificationsOnlyWhileWatched(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	l := listenOnly(t, f)
	changeEverything := func() {
		t.Helper()
		f.insert(t, jobOpts{})
		job := f.claimOne(t, "w", time.Minute)
		if _, err := f.client.Complete(f.ctx, testutil.LeaseOf(job), nil); err != nil {
			t.Fatal(err)
		}
		if err := f.client.WorkerSeen(f.ctx, queue.Presence{ID: "w", Queues: []string{"default"}}); err != nil {
			t.Fatal(err)
		}
	}
	changeEverything()
	if got := l.drain(t, 300*time.Millisecond); len(got) != 0 {
		t.Fatalf("unwatched: %+v, want no notification", got)
	}
	if err := f.client.Watch(f.ctx, "s1", time.Hour); err != nil {
		t.Fatal(err)
	}
	changeEverything()
	if got := l.drain(t, 300*time.Millisecond); len(got) < 4 {
		t.Fatalf("watched: %+v, want the insert, claim, completion and presence", got)
	}
	if err := f.client.Unwatch(f.ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if err := f.client.Watch(f.ctx, "s2", 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	changeEverything()
	if got := l.drain(t, 300*time.Millisecond); len(got) != 0 {
		t.Fatalf("unwatched, and a watch run out: %+v, want no notification", got)
	}
}

// The cost rule of the hot path: a batch of claims, or of completions,
// sends one notification however many jobs it holds; a heartbeat and an
// empty claim send none.
func TestChangeNotificationsOnePerStatement(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	l := listenChanges(t, f)
	njs := make([]queue.NewJob, 150)
	for i := range njs {
		njs[i] = queue.NewJob{Kind: "noop", Queue: "batch"}
	}
	if _, err := f.client.InsertMany(f.ctx, njs); err != nil {
		t.Fatal(err)
	}
	if got := l.drain(t, 300*time.Millisecond); len(got) != 1 || got[0].K != "jobs" || got[0].IDs != nil || !slices.Equal(got[0].S, []string{"pending"}) {
		t.Fatalf("inserting 150 jobs: %+v, want one notification naming no ids (too many)", got)
	}

	jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: "w1", Queues: []string{"batch"}, Limit: 50, Lease: time.Minute})
	if err != nil || len(jobs) != 50 {
		t.Fatalf("claim: %d jobs, %v", len(jobs), err)
	}
	got := l.drain(t, 300*time.Millisecond)
	if len(got) != 1 || got[0].K != "jobs" || len(got[0].IDs) != 50 || !slices.Equal(got[0].S, []string{"pending", "running"}) {
		t.Fatalf("claiming 50 jobs: %+v, want one notification with their ids", got)
	}

	for _, j := range jobs[:10] {
		if _, err := f.client.Heartbeat(f.ctx, queue.Lease{JobID: j.ID, Token: j.LeaseToken, WorkerID: "w1"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: "w1", Queues: []string{"empty"}, Limit: 50, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if got := l.drain(t, 300*time.Millisecond); len(got) != 0 {
		t.Fatalf("heartbeats and an empty claim notified: %+v", got)
	}

	cs := make([]queue.Completion, len(jobs))
	for i, j := range jobs {
		cs[i] = queue.Completion{Lease: queue.Lease{JobID: j.ID, Token: j.LeaseToken, WorkerID: "w1"}}
	}
	if _, err := f.client.CompleteMany(f.ctx, cs); err != nil {
		t.Fatal(err)
	}
	if got := l.drain(t, 300*time.Millisecond); len(got) != 1 || len(got[0].IDs) != 50 || !slices.Equal(got[0].S, []string{"running", "succeeded"}) {
		t.Fatalf("completing 50 jobs: %+v, want one notification", got)
	}
}

// A job's page hears of its progress and artifacts; /workers of presence.
func TestChangeNotificationsActivityAndPresence(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	j, _, err := f.client.Insert(f.ctx, queue.NewJob{Kind: "noop", Queue: "act"})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: "w1", Queues: []string{"act"}, Limit: 1, Lease: time.Minute})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	l := listenChanges(t, f)
	lease := queue.Lease{JobID: j.ID, Token: jobs[0].LeaseToken, WorkerID: "w1"}
	if err := f.client.Progress(f.ctx, lease, 0.5, "opened settings"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.RecordArtifact(f.ctx, lease, queue.Artifact{Kind: queue.ArtifactScreenshot, Name: "a.png", ContentType: "image/png", Size: 1, SHA256: strings.Repeat("ab", 32)}); err != nil {
		t.Fatal(err)
	}
	got := l.drain(t, 300*time.Millisecond)
	if len(got) != 2 || got[0].K != "job" || !slices.Equal(got[0].IDs, []int64{j.ID}) || got[1].K != "job" || !slices.Equal(got[1].IDs, []int64{j.ID}) {
		t.Fatalf("progress and an artifact: %+v", got)
	}

	for range 2 {
		if err := f.client.WorkerSeen(f.ctx, queue.Presence{ID: "phone-1", Devices: []string{"pixel7"}, Queues: []string{"act"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.client.WorkerSeen(f.ctx, queue.Presence{ID: "phone-1", Devices: []string{"pixel8"}, Queues: []string{"act"}}); err != nil {
		t.Fatal(err)
	}
	var raw []string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		n, err := l.conn.WaitForNotification(ctx)
		cancel()
		if err != nil {
			break
		}
		raw = append(raw, n.Payload)
	}
	want := []string{`{"k" : "worker", "id" : "phone-1", "c" : true}`, `{"k" : "worker", "id" : "phone-1", "c" : false}`, `{"k" : "worker", "id" : "phone-1", "c" : true}`}
	if !slices.Equal(raw, want) {
		t.Fatalf("presence: %q, want new, unchanged, changed", raw)
	}
}

// The server's notifier hands every change to its watcher, on the LISTEN
// connection it already has, and says when changes may have been missed.
func TestJobNotifierWatchesChanges(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	changes := make(chan queue.Change, 100)
	if err := f.client.Watch(f.ctx, "test-server", time.Hour); err != nil {
		t.Fatal(err)
	}
	n := queue.NewJobNotifier(f.pool, nil)
	n.WatchChanges(func(c queue.Change) { changes <- c })
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	go n.Run(ctx)
	next := func() queue.Change {
		t.Helper()
		select {
		case c := <-changes:
			return c
		case <-time.After(5 * time.Second):
			t.Fatal("no change within 5 s")
			return queue.Change{}
		}
	}
	if c := next(); c.Kind != queue.ChangesMissed {
		t.Fatalf("first: %+v, want ChangesMissed on connecting", c)
	}
	j, _, err := f.client.Insert(f.ctx, queue.NewJob{Kind: "noop", Queue: "watch"})
	if err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Kind != queue.ChangeJobs || !slices.Equal(c.JobIDs, []int64{j.ID}) || !slices.Equal(c.States, []queue.State{queue.StatePending}) {
		t.Fatalf("after an insert: %+v", c)
	}
	// The notifier still wakes workers as before.
	w := n.Waiter()
	if _, _, err := f.client.Insert(f.ctx, queue.NewJob{Kind: "noop", Queue: "watch"}); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(f.ctx, 5*time.Second)
	defer wcancel()
	if err := w.Wait(wctx, []string{"watch"}); err != nil {
		t.Fatalf("waiting for a job: %v", err)
	}
}
