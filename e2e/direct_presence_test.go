package e2e

import (
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// Idle direct workers stay online without writing their own presence
// (the active reaper records them by their lock sessions), and still drop
// out of the online window when they die or freeze: a worker killed with
// SIGKILL within the window, a frozen one (SIGSTOP) within the window and
// the 5 s after which PostgreSQL ends its idle lock session.
func TestDirectWorkersOnlineByTheirSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startServer()
	killed := e.startWorker("dw-killed", "--poll", "1h")
	frozen := e.startWorker("dw-frozen", "--poll", "1h")
	online := func(id string) bool {
		return e.count("SELECT count(*) FROM workers WHERE id = $1 AND last_seen > now() - $2::bigint * interval '1 millisecond'",
			id, queue.OnlineWindow.Milliseconds()) == 1
	}
	e.eventually("both workers online", 30*time.Second, func() bool { return online("dw-killed") && online("dw-frozen") })
	// Past the online window with no presence of their own written after
	// the first (the worker tests count them): still online.
	time.Sleep(queue.OnlineWindow + 5*time.Second)
	if !online("dw-killed") || !online("dw-frozen") {
		t.Fatalf("idle direct workers fell offline: killed %v, frozen %v", online("dw-killed"), online("dw-frozen"))
	}

	killed.signal(t, syscall.SIGKILL)
	frozen.signal(t, syscall.SIGSTOP)
	gone := time.Now()
	slack := 10 * time.Second // timers and polling on a loaded machine
	e.eventually("the killed worker offline", queue.OnlineWindow+slack, func() bool { return !online("dw-killed") })
	t.Logf("killed worker offline %v after SIGKILL", time.Since(gone).Round(time.Millisecond))
	e.eventually("the frozen worker offline", queue.OnlineWindow+5*time.Second+slack, func() bool { return !online("dw-frozen") })
	t.Logf("frozen worker offline %v after SIGSTOP", time.Since(gone).Round(time.Millisecond))
}
