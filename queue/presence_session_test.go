package queue_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/queue"
)

// A direct worker is recorded alive while a session named after it is
// open on the same database, and not once it closed; a session named
// after another worker, or another database's, records nobody else.
func TestWorkersSeenBySession(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	long := strings.Repeat("phone-ü-", 20) // longer than application_name's 63 bytes, not ASCII
	for _, id := range []string{"w1", "w2", long} {
		if err := f.client.WorkerSeen(f.ctx, queue.Presence{ID: id, Queues: []string{"default"}}); err != nil {
			t.Fatal(err)
		}
	}
	age := func(id string) time.Duration {
		t.Helper()
		var ms float64
		if err := f.pool.QueryRow(f.ctx, "SELECT EXTRACT(EPOCH FROM now() - last_seen) * 1000 FROM workers WHERE id = $1", id).Scan(&ms); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ms) * time.Millisecond
	}
	setOld := func() {
		t.Helper()
		if _, err := f.pool.Exec(f.ctx, "UPDATE workers SET last_seen = now() - interval '1 hour'"); err != nil {
			t.Fatal(err)
		}
	}
	open := func(id string) *pgx.Conn {
		t.Helper()
		cfg := f.pool.Config().ConnConfig.Copy()
		cfg.RuntimeParams["application_name"] = queue.PresenceSessionName(id)
		conn, err := pgx.ConnectConfig(f.ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return conn
	}
	if n := len(queue.PresenceSessionName(long)); n > 63 {
		t.Fatalf("session name of %d bytes, more than application_name keeps", n)
	}

	setOld()
	c1, cLong := open("w1"), open(long)
	n, err := f.client.WorkersSeenBySession(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 || age("w1") > time.Minute || age(long) > time.Minute || age("w2") < time.Hour {
		t.Fatalf("recorded %d; ages w1 %v, long %v, w2 %v; want w1 and the long id seen now, w2 an hour ago",
			n, age("w1"), age(long), age("w2"))
	}
	// Seen within 5 s: left alone, no write.
	if n, err := f.client.WorkersSeenBySession(f.ctx); err != nil || n != 0 {
		t.Fatalf("again at once: %d, %v; want 0 rows written", n, err)
	}

	c1.Close(context.Background())
	cLong.Close(context.Background())
	setOld()
	// A closed session leaves pg_stat_activity as its backend exits.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := f.client.WorkersSeenBySession(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d workers still recorded 10 s after their sessions closed", n)
		}
		setOld()
		time.Sleep(20 * time.Millisecond)
	}
	if age("w1") < time.Hour {
		t.Fatalf("w1 seen %v ago after its session closed, want an hour", age("w1"))
	}
}
