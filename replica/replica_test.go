package replica

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/db/dbtest"
	"github.com/leasehold/leasehold/queue"
)

// The lag is the age of the oldest received WAL the replay has not
// passed, as the checks saw it: an idle primary is no lag, a paused
// replay is one from the check that first saw WAL it did not replay.
func TestDecideLag(t *testing.T) {
	t.Parallel()
	r := New(Config{Replica: &queue.Client{}, MaxLag: 5 * time.Second})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	streaming := func(received, replayed int64, age time.Duration) queue.ReplayPosition {
		return queue.ReplayPosition{InRecovery: true, Received: received, Replayed: replayed, ReplayAge: age, Streaming: true}
	}
	for _, step := range []struct {
		name    string
		pos     queue.ReplayPosition
		err     error
		at      int
		lag     time.Duration
		known   bool
		reading bool
		why     string
	}{
		// An idle primary: nothing to replay, however old the last commit.
		{name: "Idle", pos: streaming(100, 100, time.Hour), at: 0, known: true, reading: true},
		// Replay paused at 100 while the primary writes.
		{name: "BehindSeen", pos: streaming(200, 100, time.Hour), at: 1, known: true, reading: true},
		{name: "StillBehind", pos: streaming(300, 100, time.Hour), at: 3, lag: 2 * time.Second, known: true, reading: true},
		{name: "PastTheBound", pos: streaming(300, 100, time.Hour), at: 7, lag: 6 * time.Second, known: true, why: "replica lag 6s"},
		// Replay passes the first sighting, not the second.
		{name: "PartlyCaughtUp", pos: streaming(300, 250, time.Second), at: 8, lag: 5 * time.Second, known: true, reading: true},
		{name: "CaughtUp", pos: streaming(300, 300, time.Second), at: 9, known: true, reading: true},
		{name: "Unreachable", err: errors.New("connection refused"), at: 10, why: "replica unreachable"},
		{name: "Back", pos: streaming(300, 300, time.Second), at: 11, known: true, reading: true},
		// A receiver that lost the primary cannot know what it missed.
		{name: "NotStreaming", pos: queue.ReplayPosition{InRecovery: true, Received: 300, Replayed: 300, ReplayAge: time.Second}, at: 12, why: "not streaming"},
		// An archive-fed standby: its last commit's age is all there is.
		{name: "ArchiveFresh", pos: queue.ReplayPosition{InRecovery: true, Received: -1, Replayed: 300, ReplayAge: 2 * time.Second}, at: 13, lag: 2 * time.Second, known: true, reading: true},
		{name: "ArchiveStale", pos: queue.ReplayPosition{InRecovery: true, Received: -1, Replayed: 300, ReplayAge: time.Minute}, at: 14, lag: time.Minute, known: true, why: "replica lag 1m0s"},
		// Promoted, or the URL names a primary: never behind.
		{name: "NotAStandby", pos: queue.ReplayPosition{Received: -1, Replayed: -1, ReplayAge: -1}, at: 15, known: true, reading: true},
	} {
		s := r.decide(step.pos, step.err, at(step.at))
		if s.Lag != step.lag || s.LagKnown != step.known || s.Reading != step.reading || !strings.Contains(s.Why, step.why) {
			t.Errorf("%s: %+v, want lag %v (known %v), reading %v, why %q", step.name, s, step.lag, step.known, step.reading, step.why)
		}
	}
}

// A replica that stopped replaying costs a bounded memory to watch.
func TestDecideBoundsSightings(t *testing.T) {
	t.Parallel()
	r := New(Config{Replica: &queue.Client{}})
	t0 := time.Now()
	for i := range 5 * maxSightings {
		r.decide(queue.ReplayPosition{InRecovery: true, Received: int64(200 + i), Replayed: 100, Streaming: true}, nil, t0.Add(time.Duration(i)*time.Second))
	}
	if n := len(r.sightings); n > maxSightings {
		t.Errorf("%d sightings kept, want at most %d", n, maxSightings)
	}
	s := r.decide(queue.ReplayPosition{InRecovery: true, Received: 10_000, Replayed: 100, Streaming: true}, nil, t0.Add(5*maxSightings*time.Second))
	if s.Lag != 5*maxSightings*time.Second {
		t.Errorf("lag %v, want the age of the first sighting", s.Lag)
	}
}

// countingPool is a pool on a fresh database whose statements are
// counted.
func countingPool(t *testing.T) (*pgxpool.Pool, *atomic.Int64) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	cfg.ConnConfig.Tracer = statementCounter{&n}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, &n
}

type statementCounter struct{ n *atomic.Int64 }

func (s statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	s.n.Add(1)
	return ctx
}

func (statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// Watching the replica asks the replica one statement a check, and the
// primary nothing: the primary's idle cost does not change.
func TestRunAsksTheReplicaAlone(t *testing.T) {
	t.Parallel()
	primary, onPrimary := countingPool(t)
	rep, onReplica := countingPool(t)
	checks := make(chan Status, 1000)
	var made atomic.Int64
	r := New(Config{
		Primary: queue.NewClient(primary, nil), Replica: queue.NewClient(rep, nil),
		Interval: 10 * time.Millisecond, OnCheck: func(s Status) { made.Add(1); checks <- s },
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	for range 20 {
		if s := <-checks; !s.Reading || !s.LagKnown || s.Lag != 0 {
			t.Errorf("a check of a server that is not a standby found %+v", s)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := onPrimary.Load(); n != 0 {
		t.Errorf("watching the replica ran %d statements on the primary, want none", n)
	}
	// A check that shutdown cut short asked, and was not counted.
	if n, m := onReplica.Load(), made.Load(); n != m && n != m+1 {
		t.Errorf("%d checks ran %d statements on the replica, want one each", m, n)
	}
	if c, fromReplica := r.Client(); !fromReplica || c == r.Primary() {
		t.Error("reads do not go to the replica that keeps up")
	}
}
