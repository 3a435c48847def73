package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/leasehold/leasehold/web/connlimit"
)

// TestListenCapsConnections: beyond --max-connections a new connection is
// not served until an open one closes.
func TestListenCapsConnections(t *testing.T) {
	t.Parallel()
	if _, err := listen("127.0.0.1:0", connlimit.Config{Max: 0}); err == nil {
		t.Error("--max-connections 0 accepted")
	}
	ln, err := listen("127.0.0.1:0", connlimit.Config{Max: 2, PerClient: -1})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	var open []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		open = append(open, c)
	}
	third, err := net.Dial("tcp", ln.Addr().String()) // the kernel accepts; the server does not yet
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	fmt.Fprint(third, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	buf := make([]byte, 64)
	_ = third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := third.Read(buf); err == nil {
		t.Fatalf("a third connection was served with a cap of 2: %q", buf[:n])
	}
	open[0].Close()
	_ = third.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := third.Read(buf); err != nil {
		t.Fatalf("the third connection was not served once one closed: %v", err)
	} else if string(buf[:n]) == "" {
		t.Fatal("empty answer")
	}
}
