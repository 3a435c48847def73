package testutil

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/db/dbtest"
	"github.com/leasehold/leasehold/queue"
)

// NewPool is a pool of at most maxConns connections to a migrated
// database of the test's own (db/dbtest), closed when the test ends.
func NewPool(t testing.TB, maxConns int) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = int32(maxConns)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Context is a context that ends with the test, or after two minutes.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// LeaseOf is the lease a claimed job carries.
func LeaseOf(j queue.Job) queue.Lease {
	return queue.Lease{JobID: j.ID, Token: j.LeaseToken, WorkerID: *j.LeaseOwner}
}

// Clock is a clock that moves only when the test moves it; its Now can be
// given to code that takes a clock (the scheduler's SchedulerConfig.Now).
type Clock struct{ ns atomic.Int64 }

// NewClock is a Clock standing at at.
func NewClock(at time.Time) *Clock {
	c := &Clock{}
	c.Set(at)
	return c
}

// Now is the clock's time, in UTC.
func (c *Clock) Now() time.Time { return time.Unix(0, c.ns.Load()).UTC() }

// Set moves the clock to at.
func (c *Clock) Set(at time.Time) { c.ns.Store(at.UnixNano()) }

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) { c.ns.Add(int64(d)) }

// UTC parses an RFC 3339 time for a test's table, and panics on a typo.
func UTC(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// DialTarget is where a relay in front of a database at host and port
// dials it: TCP host:port, or the Unix socket a host that is a directory
// names (the private cluster of a fresh clone without TEST_DATABASE_URL).
func DialTarget(host string, port uint16) (network, address string) {
	if strings.HasPrefix(host, "/") {
		return "unix", filepath.Join(host, fmt.Sprintf(".s.PGSQL.%d", port))
	}
	return "tcp", net.JoinHostPort(host, strconv.Itoa(int(port)))
}
