package worker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

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

// A remote worker whose server cannot be reached within its transport's
// own dial timeout (a home network dropping packets, not refusing them)
// retries its write until its own context ends, as with a refused
// connection: the timeout is the transport's, not the caller's deadline,
// though net's error for it matches context.DeadlineExceeded. The dialer
// below times out at once and gives the error a 30 s one would.
func TestRemoteDialTimeoutIsTransient(t *testing.T) {
	t.Parallel()
	r, err := NewRemote("http://127.0.0.1:9", "lh_test", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.client = &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Timeout: time.Nanosecond}).DialContext}}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://127.0.0.1:9/api/v1/whoami", nil)
	if err != nil {
		t.Fatal(err)
	}
	err = r.do(req, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v, want a dial timeout (the case this test is about)", err)
	}
	if !transient(err) {
		t.Errorf("transient(%v) = false, want true: the server is unreachable for now", err)
	}

	const patience = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	start := time.Now()
	err = r.call(ctx, http.MethodPost, "/api/v1/jobs/1/progress", map[string]any{"fraction": 0.5}, nil, true)
	if took := time.Since(start); took < patience {
		t.Errorf("the write gave up after %v with %v, want retries until its context ends (%v)", took, err, patience)
	}
}
