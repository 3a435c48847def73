package connlimit_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/web/connlimit"
)

func serve(t *testing.T, cfg connlimit.Config) *connlimit.Listener {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := connlimit.New(raw, cfg)
	srv := &http.Server{
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		ConnState: ln.ConnState, IdleTimeout: time.Hour,
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return ln
}

// dialFrom connects to ln from a loopback address of its own (all of
// 127.0.0.0/8 is loopback on Linux), so that tests can be several clients.
func dialFrom(t *testing.T, ln net.Listener, from string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// served reports whether a request on c is answered (false: the server
// closed the connection).
func served(t *testing.T, c net.Conn) bool {
	t.Helper()
	fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode == http.StatusOK
}

// One client address holds at most PerClient connections; the next is
// closed at once, while other clients, and exempt ones, are served.
func TestPerClientBound(t *testing.T) {
	t.Parallel()
	ln := serve(t, connlimit.Config{Max: 10, PerClient: 2, Exempt: []netip.Prefix{netip.MustParsePrefix("127.0.0.3/32")}})
	for range 2 {
		if !served(t, dialFrom(t, ln, "127.0.0.1")) {
			t.Fatal("a client's first two connections must be served")
		}
	}
	start := time.Now()
	if served(t, dialFrom(t, ln, "127.0.0.1")) {
		t.Fatal("a third connection of one client was served with a bound of 2")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the refused connection was closed after %s, not at once", d)
	}
	if !served(t, dialFrom(t, ln, "127.0.0.2")) {
		t.Fatal("another client was refused")
	}
	for range 4 {
		if !served(t, dialFrom(t, ln, "127.0.0.3")) {
			t.Fatal("an exempt client (a trusted proxy) was bounded")
		}
	}
	if ln.Refused() != 1 {
		t.Errorf("Refused() = %d, want 1", ln.Refused())
	}
	if ln.Open() != 7 {
		t.Errorf("Open() = %d, want 7", ln.Open())
	}
}

// PerClient's default is half of Max: no client can take every slot.
func TestPerClientDefault(t *testing.T) {
	t.Parallel()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for max, want := range map[int]int{4096: 2048, 3: 1, 1: 1} {
		if got := connlimit.New(raw, connlimit.Config{Max: max}).PerClient(); got != want {
			t.Errorf("Max %d: PerClient %d, want %d", max, got, want)
		}
	}
}

// Near the bound, idle keep-alive connections are closed after
// IdleNearCap, the longest idle first, until no more than NearCap are
// open; below it they stay.
func TestIdleClosedNearCap(t *testing.T) {
	t.Parallel()
	t.Run("NearCap", func(t *testing.T) {
		t.Parallel()
		ln := serve(t, connlimit.Config{Max: 10, PerClient: -1, NearCap: 2, IdleNearCap: 200 * time.Millisecond})
		var conns []net.Conn
		for i := range 4 {
			c := dialFrom(t, ln, "127.0.0.1")
			if !served(t, c) {
				t.Fatalf("connection %d not served", i)
			}
			conns = append(conns, c)
			time.Sleep(20 * time.Millisecond) // idle since in this order
		}
		testutil.Eventually(t, 5*time.Second, "idle connections closed down to NearCap", func() bool { return ln.Open() == 2 })
		time.Sleep(500 * time.Millisecond)
		if ln.Open() != 2 {
			t.Fatalf("Open() = %d after the sweep, want NearCap 2", ln.Open())
		}
		for i, c := range conns {
			if got, want := served(t, c), i >= 2; got != want {
				t.Errorf("connection %d (idle the %s longest): served %v, want %v", i, []string{"1st", "2nd", "3rd", "4th"}[i], got, want)
			}
		}
	})
	t.Run("BelowCap", func(t *testing.T) {
		t.Parallel()
		ln := serve(t, connlimit.Config{Max: 10, PerClient: -1, NearCap: 8, IdleNearCap: 100 * time.Millisecond})
		var conns []net.Conn
		for range 3 {
			c := dialFrom(t, ln, "127.0.0.1")
			served(t, c)
			conns = append(conns, c)
		}
		time.Sleep(600 * time.Millisecond)
		for i, c := range conns {
			if !served(t, c) {
				t.Errorf("idle connection %d closed below NearCap", i)
			}
		}
	})
}
