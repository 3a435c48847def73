package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
)

// TestCompleteManyThenClaimTakesTheRoomItFrees: a batch of completions
// claims, in its own transaction, the room it frees under a cap, and
// free jobs besides; each completion is fenced as CompleteMany fences it,
// and a refused one neither stops the others nor the claim. Without a
// limit at the last claim it only completes.
func TestCompleteManyThenClaimTakesTheRoomItFrees(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	f.patchQueue(t, "capped", queue.QueuePatch{MaxRunning: new(int32(2))})
	f.insertLimited(t, 5, limited{queue: "capped"})
	params := queue.ClaimParams{WorkerID: "w1", Queues: []string{"capped", "free"}, Limit: 10, Lease: time.Minute}
	first := f.claim(t, "w1", 10, "capped", "free") // the claim learns that a limit applies
	if len(first) != 2 {
		t.Fatalf("claimed %d, want 2", len(first))
	}
	f.insertLimited(t, 1, limited{queue: "free"})
	stale := testutil.LeaseOf(first[1])
	stale.Token++
	cs := []queue.Completion{
		{Lease: testutil.LeaseOf(first[0]), Result: json.RawMessage(`{"n":1}`)},
		{Lease: stale},
		{Lease: testutil.LeaseOf(first[1]), Result: json.RawMessage(`[1]`)}, // not an object
	}
	errs, next, err := f.client.CompleteManyThenClaim(f.ctx, cs, params)
	if err != nil {
		t.Fatal(err)
	}
	var ve *queue.ValidationError
	if errs[0] != nil || !errors.Is(errs[1], queue.ErrLeaseLost) || !errors.As(errs[2], &ve) {
		t.Fatalf("errors %v, want nil, ErrLeaseLost, a validation error", errs)
	}
	// One completed: one place in the cap, and the free job.
	byQueue := map[string]int{}
	for _, j := range next {
		byQueue[j.Queue]++
		if j.State != queue.StateRunning || j.LeaseOwner == nil || *j.LeaseOwner != "w1" {
			t.Fatalf("claimed job %+v", j)
		}
	}
	if byQueue["capped"] != 1 || byQueue["free"] != 1 {
		t.Fatalf("claimed %v, want 1 capped and 1 free", byQueue)
	}
	if got, _ := f.client.Get(f.ctx, first[0].ID); got.State != queue.StateSucceeded || string(got.Result) != `{"n": 1}` {
		t.Fatalf("completed job reads %s %s", got.State, got.Result)
	}
	q, err := f.client.Queue(f.ctx, "capped")
	if err != nil {
		t.Fatal(err)
	}
	if q.Running != 2 || q.Pending != 2 {
		t.Fatalf("capped queue: %d running, %d pending; want 2 and 2", q.Running, q.Pending)
	}

	// A repeat of a success (its answer lost) is answered as CompleteMany
	// answers it, and the cap, still full, gives nothing.
	claimed := next
	errs, next, err = f.client.CompleteManyThenClaim(f.ctx, cs[:1], params)
	if err != nil || errs[0] != nil || len(next) != 0 {
		t.Fatalf("repeat: errors %v, %v; claimed %d, want none", errs, err, len(next))
	}
	// Bad claim parameters write nothing.
	bad := params
	bad.Limit = 0
	if _, _, err := f.client.CompleteManyThenClaim(f.ctx, []queue.Completion{{Lease: testutil.LeaseOf(claimed[0])}}, bad); err == nil {
		t.Fatal("a claim of 0 jobs was accepted")
	}
	if got, _ := f.client.Get(f.ctx, claimed[0].ID); got.State != queue.StateRunning {
		t.Fatalf("refused call wrote its completion: %s", got.State)
	}

	// No limit at the last claim of these queues: completing claims nothing.
	f.insertLimited(t, 1, limited{queue: "other"})
	other := f.claim(t, "w2", 10, "other", "free")
	f.insertLimited(t, 1, limited{queue: "other"})
	errs, next, err = f.client.CompleteManyThenClaim(f.ctx, []queue.Completion{{Lease: testutil.LeaseOf(other[0])}},
		queue.ClaimParams{WorkerID: "w2", Queues: []string{"other", "free"}, Limit: 10, Lease: time.Minute})
	if err != nil || errs[0] != nil || len(next) != 0 {
		t.Fatalf("without limits: errors %v, %v; claimed %d, want none", errs, err, len(next))
	}
}

// jobNotes is every leasehold_jobs notification that arrives within quiet
// of the last.
func jobNotes(t *testing.T, conn *pgx.Conn, quiet time.Duration) []string {
	t.Helper()
	var out []string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), quiet)
		n, err := conn.WaitForNotification(ctx)
		cancel()
		if err != nil {
			return out
		}
		out = append(out, n.Payload)
	}
}

// TestCompleteManyThenClaimAnnouncesOnlyRoomLeft: completions that claim
// in their own transaction wake the queue's other claimers only when
// their claim left room under a cap or a key (a woken claimer would find
// none otherwise), while CompleteMany announces every freed limit.
func TestCompleteManyThenClaimAnnouncesOnlyRoomLeft(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	conn := listenOn(t, f, "leasehold_jobs")
	f.patchQueue(t, "capped", queue.QueuePatch{MaxRunning: new(int32(2))})
	f.insertLimited(t, 6, limited{queue: "capped"})
	f.insertLimited(t, 2, limited{queue: "keyed", key: "phone", limit: 1})
	jobNotes(t, conn, 200*time.Millisecond) // the inserts'

	params := func(n int) queue.ClaimParams {
		return queue.ClaimParams{WorkerID: "w1", Queues: []string{"capped", "keyed"}, Limit: n, Lease: time.Minute}
	}
	running := f.claim(t, "w1", 10, "capped", "keyed")
	if len(running) != 3 {
		t.Fatalf("claimed %d, want 2 capped and 1 keyed", len(running))
	}
	complete := func(jobs []queue.Job, limit int) []queue.Job {
		t.Helper()
		cs := make([]queue.Completion, len(jobs))
		for i, j := range jobs {
			cs[i] = queue.Completion{Lease: testutil.LeaseOf(j)}
		}
		errs, next, err := f.client.CompleteManyThenClaim(f.ctx, cs, params(limit))
		if err = errors.Join(append(errs, err)...); err != nil {
			t.Fatal(err)
		}
		return next
	}
	// Every freed place is taken back: a capped job for a capped one, the
	// phone's next job for its last.
	next := complete(running, 10)
	if len(next) != 3 {
		t.Fatalf("claimed %d, want 3", len(next))
	}
	if notes := jobNotes(t, conn, 300*time.Millisecond); len(notes) != 0 {
		t.Fatalf("announced %q with no room left", notes)
	}
	// Now the phone has no job left and the claim takes one of the two
	// capped places: both limits have room.
	next = complete(next, 1)
	if len(next) != 1 {
		t.Fatalf("claimed %d, want 1", len(next))
	}
	notes := jobNotes(t, conn, 300*time.Millisecond)
	slices.Sort(notes)
	if !slices.Equal(notes, []string{"capped", "keyed"}) {
		t.Fatalf("announced %q, want capped and keyed", notes)
	}
	// CompleteMany announces what it frees, as before.
	errs, err := f.client.CompleteMany(f.ctx, []queue.Completion{{Lease: testutil.LeaseOf(next[0])}})
	if err = errors.Join(append(errs, err)...); err != nil {
		t.Fatal(err)
	}
	if notes := jobNotes(t, conn, 300*time.Millisecond); !slices.Equal(notes, []string{"capped"}) {
		t.Fatalf("CompleteMany announced %q, want capped", notes)
	}
}
