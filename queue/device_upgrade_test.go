package queue_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// The device-info migration (12) upgrades a populated database: workers
// keep their rows and claim, their outcomes of the last day are counted
// from the jobs and attempts already there; and it goes down again.
func TestDeviceInfoMigrationUpgrades(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	mg := f.migratedTo(t, 8)
	for _, sql := range []string{
		`INSERT INTO workers (id, device, queues) VALUES ('w1', 'pixel7', '{default}'), ('w2', NULL, '{default}')`,
		`INSERT INTO jobs (kind, state, attempt, lease_owner, lease_token, attempt_started_at, heartbeat_at, lease_until, finished_at, created_at)
		 VALUES ('t', 'succeeded', 1, 'w1', 11, now() - interval '2 h', now() - interval '2 h', now() - interval '1 h', now() - interval '2 h', now() - interval '3 h'),
		        ('t', 'succeeded', 1, 'w1', 12, now() - interval '30 h', now() - interval '30 h', now() - interval '29 h', now() - interval '30 h', now() - interval '31 h'),
		        ('t', 'dead',      2, 'w2', 14, now() - interval '1 h', now() - interval '1 h', now() - interval '1 h', now() - interval '1 h', now() - interval '3 h'),
		        ('t', 'running',   1, 'w1', 15, now(), now(), now() + interval '1 h', NULL, now() - interval '1 h')`,
		`INSERT INTO attempts (job_id, number, worker_id, lease_token, started_at, ended_at, outcome, error)
		 VALUES (3, 1, 'w1', 13, now() - interval '2 h', now() - interval '2 h', 'lease_expired', 'lease expired'),
		        (3, 2, 'w2', 14, now() - interval '1 h', now() - interval '1 h', 'failed', 'boom')`,
	} {
		if _, err := f.pool.Exec(f.ctx, sql); err != nil {
			t.Fatalf("%v\n%s", err, sql)
		}
	}
	if err := mg.Up(); err != nil {
		t.Fatal(err)
	}
	ws, err := f.client.WorkerStatuses(f.ctx, time.Hour, time.Minute, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]queue.WorkerStatus{}
	for _, w := range ws {
		got[w.ID] = w
	}
	w1, w2 := got["w1"], got["w2"]
	if !w1.Claiming || w1.Info != nil || w1.Succeeded != 1 || w1.Failed != 1 || w1.Running != 1 || w1.LastJobID != 4 {
		t.Errorf("w1: %+v", w1)
	}
	if !w2.Claiming || w2.Succeeded != 0 || w2.Failed != 1 || w2.LastJobID != 3 {
		t.Errorf("w2: %+v", w2)
	}
	if err := f.client.WorkerSeen(f.ctx, queue.Presence{ID: "w1", Queues: []string{"default"},
		Device: &queue.DeviceReport{Info: json.RawMessage(`{"adb":"device"}`), Claiming: true}}); err != nil {
		t.Fatal(err)
	}
	if err := mg.Down(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM workers`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("after down: %d workers, %v", n, err)
	}
	if err := mg.Up(); err != nil {
		t.Fatal(err)
	}
}
