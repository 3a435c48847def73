package e2e

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A remote worker idles on the long poll for 20s, longer than three of its
// leases; the job that then arrives runs in one attempt. (It used to count
// its lease from when it began to wait, and fenced itself at once.)
func TestIdleRemoteWorkerRunsALateJobInOneAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startServer()
	w := e.startRemoteWorker("idle-1", e.workerToken("idle-1"), "--lease", "6s")
	e.eventually("the worker is waiting on the long poll", 20*time.Second, func() bool {
		return strings.Contains(w.out.String(), "worker started")
	})
	time.Sleep(20 * time.Second)
	id := e.submit(map[string]any{"app": "com.example.late", "sim": map[string]any{"steps": 3, "step_ms": 1000}})
	e.eventually("the job succeeds", 30*time.Second, func() bool {
		return e.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'succeeded'", id) == 1
	})
	if n := e.count("SELECT count(*) FROM job_attempts WHERE job_id = $1", id); n != 1 {
		t.Fatalf("%d attempts, want 1", n)
	}
	if strings.Contains(w.out.String(), "fencing") {
		t.Fatalf("the worker fenced a healthy lease:\n%s", w.out.String())
	}
}

// silentProxy forwards TCP to target until it goes silent: then it stops
// moving bytes, in both directions, without closing or resetting a
// connection, as a network does that drops every packet. When it speaks
// again, what it held is delivered late.
type silentProxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cond   *sync.Cond
	silent bool
	conns  []net.Conn
}

func newSilentProxy(t *testing.T, target string) *silentProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &silentProxy{ln: ln, target: target}
	p.cond = sync.NewCond(&p.mu)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.setSilent(false)
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	})
	return p
}

func (p *silentProxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *silentProxy) setSilent(silent bool) {
	p.mu.Lock()
	p.silent = silent
	p.mu.Unlock()
	p.cond.Broadcast()
}

// hold blocks while the proxy is silent.
func (p *silentProxy) hold() {
	p.mu.Lock()
	for p.silent {
		p.cond.Wait()
	}
	p.mu.Unlock()
}

func (p *silentProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *silentProxy) forward(client net.Conn) {
	p.track(client)
	p.hold() // a connection opened while silent is accepted, and then nothing
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.track(server)
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(server, client) })
	wg.Go(func() { p.pipe(client, server) })
	wg.Wait()
	client.Close()
	server.Close()
}

func (p *silentProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

func (p *silentProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.hold()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
			}
			return
		}
	}
}

// A worker at home whose network goes silent (no reset, no error: packets
// just stop) for longer than its lease fences itself before the lease
// runs out; the job is reclaimed and finished once, by another worker;
// nothing the first one sent late is accepted; and when the network comes
// back, the first worker runs its next job.
func TestRemoteWorkerBehindASilentNetwork(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startServer()
	proxy := newSilentProxy(t, e.addr)
	a := e.spawn("worker home-a", []string{"--server-url", proxy.URL(), "--token", e.workerToken("home-a"),
		"--lease", "3s", "--heartbeat", "500ms"})

	id := e.submit(map[string]any{"app": "com.example.cut", "sim": map[string]any{"steps": 20, "step_ms": 250}})
	e.eventually("home-a runs the job", 20*time.Second, func() bool {
		return e.count("SELECT count(*) FROM job_timeline WHERE job_id = $1 AND attempt = 1 AND type = 'progress'", id) > 0
	})
	proxy.setSilent(true)
	silentAt := time.Now()
	e.eventually("home-a fences itself", 10*time.Second, func() bool {
		return strings.Contains(a.out.String(), "fencing: lease could not be renewed in time")
	})
	fencedAfter := time.Since(silentAt)
	var inTime bool
	if err := e.pool.QueryRow(e.ctx, "SELECT lease_until > now() FROM jobs WHERE id = $1 AND attempt = 1", id).Scan(&inTime); err != nil {
		t.Fatal(err)
	}
	if !inTime {
		t.Fatal("home-a stopped the job only after its lease had run out")
	}
	b := e.startRemoteWorker("home-b", e.workerToken("home-b"), "--lease", "3s", "--heartbeat", "500ms")
	e.eventually("home-b finishes the job", 30*time.Second, func() bool {
		return e.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'succeeded'", id) == 1
	})
	if silent := time.Since(silentAt); silent < 4*time.Second {
		time.Sleep(4*time.Second - silent) // silent for longer than the lease, whatever home-b took
	}
	proxy.setSilent(false)
	// home-b leaves, so that the next job can only be home-a's.
	b.signal(t, syscall.SIGTERM)
	if err := b.wait(t, 20*time.Second); err != nil {
		t.Fatalf("home-b exited with %v", err)
	}

	type attempt struct {
		number  int32
		worker  string
		outcome string
		ended   time.Time
	}
	rows, err := e.pool.Query(e.ctx, "SELECT number, worker_id, coalesce(outcome::text, ''), coalesce(ended_at, now()) FROM job_attempts WHERE job_id = $1 ORDER BY number", id)
	if err != nil {
		t.Fatal(err)
	}
	var attempts []attempt
	for rows.Next() {
		var at attempt
		if err := rows.Scan(&at.number, &at.worker, &at.outcome, &at.ended); err != nil {
			t.Fatal(err)
		}
		attempts = append(attempts, at)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(attempts) != 2 || attempts[0].worker != "home-a" || attempts[0].outcome != "lease_expired" ||
		attempts[1].worker != "home-b" || attempts[1].outcome != "succeeded" {
		t.Fatalf("attempts %+v, want home-a's expired and home-b's succeeded", attempts)
	}

	// Give what home-a held in the silent network time to arrive, then
	// read the timeline: after its lease ended (the reclaim's own event),
	// nothing of attempt 1 was written but refusals.
	e.eventually("home-a's next claim reaches the server", 40*time.Second, func() bool {
		return e.count("SELECT count(*) FROM workers WHERE id = 'home-a' AND last_seen > now() - interval '2 seconds'") == 1
	})
	late := e.count(`SELECT count(*) FROM job_timeline WHERE job_id = $1 AND attempt = 1 AND at >= $2 AND type NOT IN ('lease_expired', 'stale_write_refused')`,
		id, attempts[0].ended)
	if late != 0 {
		t.Fatalf("%d writes of home-a's attempt were accepted after its lease ended:\n%s", late, e.timeline(id))
	}
	if n := e.count("SELECT count(*) FROM job_timeline WHERE job_id = $1 AND type = 'succeeded'", id); n != 1 {
		t.Fatalf("%d succeeded events, want 1", n)
	}
	refused := e.count("SELECT count(*) FROM job_timeline WHERE job_id = $1 AND type = 'stale_write_refused'", id)

	next := e.submit(map[string]any{"app": "com.example.next", "sim": map[string]any{"steps": 2, "step_ms": 100}})
	e.eventually("home-a runs its next job", 60*time.Second, func() bool {
		return e.count("SELECT count(*) FROM jobs WHERE id = $1 AND state = 'succeeded' AND lease_owner = 'home-a'", next) == 1
	})
	if n := e.count("SELECT count(*) FROM job_attempts WHERE job_id = $1", next); n != 1 {
		t.Fatalf("home-a's next job took %d attempts, want 1:\n%s\n%s", n, e.timeline(next), a.out.String())
	}
	t.Logf("home-a fenced itself %v after the network went silent (lease 3s); %d late writes of its attempt refused",
		fencedAfter.Round(time.Millisecond), refused)
}

// timeline is a job's events, one a line, for failure messages.
func (e *env) timeline(id int64) string {
	e.t.Helper()
	rows, err := e.pool.Query(e.ctx, "SELECT at, type, coalesce(attempt, 0), detail::text FROM job_timeline WHERE job_id = $1 ORDER BY at, rank, id", id)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var (
			at      time.Time
			typ     string
			attempt int32
			detail  string
		)
		if err := rows.Scan(&at, &typ, &attempt, &detail); err != nil {
			e.t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s attempt %d %s %s\n", at.Format("15:04:05.000000"), attempt, typ, detail)
	}
	return b.String()
}
