package worker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/queue"
)

// transient retries what heals, for both backends: a database error only
// when queue.Unavailable says so, a server's 5xx and 429, a connection
// refused; never a refusal of the write.
func TestTransientForBothBackends(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"ReadOnly", fmt.Errorf("recording progress: %w", &pgconn.PgError{Code: "25006"}), true},
		{"AdminShutdown", fmt.Errorf("starting effect: %w", &pgconn.PgError{Code: "57P01"}), true},
		{"UniqueViolation", fmt.Errorf("recording artifact: %w", &pgconn.PgError{Code: "23505"}), false},
		{"Refused", fmt.Errorf("POST /x: %w", syscall.ECONNREFUSED), true},
		{"BadGateway", &statusError{status: http.StatusBadGateway}, true},
		{"TooMany", &statusError{status: http.StatusTooManyRequests}, true},
		{"BadRequest", &statusError{status: http.StatusBadRequest}, false},
		{"Invalid", &queue.ValidationError{Field: "file", Message: "not an image"}, false},
		{"LeaseLost", queue.ErrLeaseLost, false},
		{"NoStorage", errNoArtifactStorage, false},
		{"Other", errors.New("disk hiccup"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := transient(tc.err); got != tc.want {
				t.Fatalf("transient(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// A database that takes the connection but does not answer within the
// URL's connect_timeout (a standby just cut off from its lost primary,
// seen in CI) is an outage to wait out, though pgconn's error wraps
// context.DeadlineExceeded: with the failover's two hosts, one refusing
// and one silent, as with one.
func TestConnectTimeoutIsTransient(t *testing.T) {
	t.Parallel()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	refusing, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusingAddr := refusing.Addr().String()
	refusing.Close()
	for _, url := range []string{
		fmt.Sprintf("postgres://postgres@%s/leasehold?connect_timeout=1", silent.Addr()),
		fmt.Sprintf("postgres://postgres@%s,%s/leasehold?connect_timeout=1&target_session_attrs=read-write", refusingAddr, silent.Addr()),
	} {
		_, err := pgconn.Connect(context.Background(), url)
		if err == nil {
			t.Fatalf("%s: connected to a listener that never answers", url)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: %v, want pgconn's connect_timeout (the case this test is about)", url, err)
		}
		if !transient(err) {
			t.Errorf("transient(%v) = false, want true: the database is unreachable for now", err)
		}
	}
}
