package auth_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/auth"
	"github.com/leasehold/leasehold/db/dbtest"
)

const rightPassword = "right-password"

// clock is a settable time for the throttle.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// setup returns a Service with the user admin (password rightPassword)
// on a throttle clock of its own.
func setup(t *testing.T) (*auth.Service, *clock) {
	t.Helper()
	s := auth.New(dbtest.NewPool(t), slog.New(slog.DiscardHandler))
	if err := s.SetPassword(context.Background(), "admin", rightPassword); err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Now()}
	auth.SetClock(s, c.now)
	return s, c
}

// outcome names what a sign-in answered, as a caller can see it.
func outcome(err error) string {
	var throttled *auth.ThrottledError
	switch {
	case err == nil:
		return "signed in"
	case errors.As(err, &throttled):
		return "throttled " + throttled.RetryAfter.String()
	case errors.Is(err, auth.ErrBadCredentials):
		return "bad credentials"
	case errors.Is(err, auth.ErrBusy):
		return "busy"
	default:
		return "error: " + err.Error()
	}
}

func TestHashingIsBoundedUnderAFlood(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	var inFlight, peak atomic.Int32
	auth.SetPasswordCheck(s, func(hash, password string) (bool, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(5 * time.Millisecond) // a hash takes a while
		return false, nil
	})
	const attempts = 100
	outcomes := make(chan string, attempts)
	var wg sync.WaitGroup
	for i := range attempts {
		wg.Go(func() {
			// Unknown names from many addresses: no lock gets in the way.
			client := netip.AddrFrom4([4]byte{198, 51, 100, byte(i)})
			_, _, err := s.SignIn(context.Background(), client, fmt.Sprintf("nobody%d", i), "guess")
			outcomes <- outcome(err)
		})
	}
	wg.Wait()
	close(outcomes)
	for o := range outcomes {
		if o != "bad credentials" && o != "busy" {
			t.Errorf("a flooding sign-in: %s", o)
		}
	}
	if limit := auth.HashSlots(s); peak.Load() > int32(limit) || limit < 2 {
		t.Fatalf("%d hashes ran at once, want at most %d", peak.Load(), limit)
	}
	t.Logf("peak %d concurrent hashes (limit %d)", peak.Load(), auth.HashSlots(s))
}

func TestSignInGivesUpWhenEverySlotStaysTaken(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	release := make(chan struct{})
	entered := make(chan struct{}, 64)
	auth.SetPasswordCheck(s, func(hash, password string) (bool, error) {
		entered <- struct{}{}
		<-release
		return false, nil
	})
	slots := auth.HashSlots(s)
	var wg sync.WaitGroup
	for i := range slots {
		wg.Go(func() {
			_, _, _ = s.SignIn(context.Background(), netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}), "x", "y")
		})
	}
	for range slots {
		<-entered
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, _, err := s.SignIn(context.Background(), home, "admin", rightPassword)
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
	}
	waited := time.Since(start)
	close(release)
	wg.Wait()
	if !errors.Is(err, auth.ErrBusy) || waited < 500*time.Millisecond || waited >= 5*time.Second {
		t.Fatalf("sign-in with every slot taken: %s after %v, want busy after a short wait", outcome(err), waited)
	}
}

// failUntilLocked makes wrong sign-ins of name from client, letting the
// clock pass each lock but the last, and returns what each answered: at
// the end, name is locked from client for 2 s.
func failUntilLocked(s *auth.Service, c *clock, client netip.Addr, name string) []string {
	var got []string
	for i := range 8 {
		_, _, err := s.SignIn(context.Background(), client, name, "wrong-password")
		got = append(got, outcome(err))
		var throttled *auth.ThrottledError
		if errors.As(err, &throttled) && i < 7 {
			c.advance(throttled.RetryAfter)
		}
	}
	return got
}

func TestUnknownNamesAreThrottledLikeKnown(t *testing.T) {
	t.Parallel()
	s, c := setup(t)
	known := failUntilLocked(s, c, home, "admin")
	// The name is taken as typed, trimmed and lower-cased.
	if _, _, err := s.SignIn(context.Background(), home, " Admin", rightPassword); outcome(err) != "throttled 2s" {
		t.Fatalf("%q while admin is locked: %s", " Admin", outcome(err))
	}
	unknown := failUntilLocked(s, c, home, "nobody")
	want := []string{"bad credentials", "bad credentials", "bad credentials", "bad credentials", "bad credentials",
		"throttled 1s", "bad credentials", "throttled 2s"}
	if fmt.Sprint(known) != fmt.Sprint(want) || fmt.Sprint(unknown) != fmt.Sprint(known) {
		t.Fatalf("known name: %q\nunknown name: %q\nwant both: %q", known, unknown, want)
	}
	// An invalid name (no account can have it) is throttled the same way.
	if invalid := failUntilLocked(s, c, home, "no such user!"); fmt.Sprint(invalid) != fmt.Sprint(want) {
		t.Fatalf("invalid name: %q", invalid)
	}
	// The lock caps at 15 minutes.
	for range 20 {
		c.advance(15 * time.Minute)
		_, _, _ = s.SignIn(context.Background(), home, "admin", "wrong-password")
	}
	if _, _, err := s.SignIn(context.Background(), home, "admin", rightPassword); outcome(err) != "throttled 15m0s" {
		t.Fatalf("after many failures: %s, want throttled 15m0s", outcome(err))
	}
}

func TestLockoutIsPerAddress(t *testing.T) {
	t.Parallel()
	s, c := setup(t)
	attacker, admin := netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("2001:db8:1:2::5")
	failUntilLocked(s, c, attacker, "admin")
	if _, _, err := s.SignIn(context.Background(), attacker, "admin", rightPassword); !errors.As(err, new(*auth.ThrottledError)) {
		t.Fatalf("right password from the locked address: %s, want throttled", outcome(err))
	}
	if _, _, err := s.SignIn(context.Background(), admin, "admin", rightPassword); err != nil {
		t.Fatalf("the admin, elsewhere, while a stranger is locked out: %s", outcome(err))
	}
	// IPv6 clients are counted by /64: another address of the same /64
	// is the same client.
	failUntilLocked(s, c, admin, "admin")
	if _, _, err := s.SignIn(context.Background(), netip.MustParseAddr("2001:db8:1:2::99"), "admin", rightPassword); !errors.As(err, new(*auth.ThrottledError)) {
		t.Fatalf("same /64: %s, want throttled", outcome(err))
	}
	// Setting the password (LEASEHOLD_ADMIN_PASSWORD at start) lifts the
	// name's locks everywhere.
	if err := s.SetPassword(context.Background(), "admin", rightPassword); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SignIn(context.Background(), attacker, "admin", rightPassword); err != nil {
		t.Fatalf("after setting the password: %s", outcome(err))
	}
}

func TestAnAddressIsThrottledAcrossNames(t *testing.T) {
	t.Parallel()
	s, c := setup(t)
	auth.SetPasswordCheck(s, func(hash, password string) (bool, error) { return password == rightPassword, nil })
	sprayer, other := netip.MustParseAddr("203.0.113.8"), netip.MustParseAddr("203.0.113.9")
	for i := range 100 {
		if _, _, err := s.SignIn(context.Background(), sprayer, fmt.Sprintf("user%d", i), "guess"); !errors.Is(err, auth.ErrBadCredentials) {
			t.Fatalf("failure %d: %s", i+1, outcome(err))
		}
	}
	_, _, err := s.SignIn(context.Background(), sprayer, "admin", rightPassword)
	var throttled *auth.ThrottledError
	if !errors.As(err, &throttled) || throttled.RetryAfter != 15*time.Minute {
		t.Fatalf("sign-in from an address after 100 failures: %s, want throttled 15m0s", outcome(err))
	}
	if _, _, err := s.SignIn(context.Background(), other, "admin", rightPassword); err != nil {
		t.Fatalf("another address: %s", outcome(err))
	}
	c.advance(15 * time.Minute)
	if _, _, err := s.SignIn(context.Background(), sprayer, "admin", rightPassword); err != nil {
		t.Fatalf("once the window is over: %s", outcome(err))
	}
}

func TestStaleFailuresAreForgotten(t *testing.T) {
	t.Parallel()
	s, c := setup(t)
	for i := range 3 {
		_, _, _ = s.SignIn(context.Background(), netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}), "admin", "wrong-password")
	}
	if n, err := auth.Sweep(s); err != nil || n != 0 {
		t.Fatalf("sweep of fresh failures: %d, %v; want nothing deleted", n, err)
	}
	c.advance(15 * time.Minute)
	if n, err := auth.Sweep(s); err != nil || n != 3 {
		t.Fatalf("sweep after 15 minutes: %d, %v; want the 3 address windows", n, err)
	}
	c.advance(24 * time.Hour)
	if n, err := auth.Sweep(s); err != nil || n != 3 {
		t.Fatalf("sweep after a day: %d, %v; want the 3 (name, address) counts", n, err)
	}
}

func TestConcurrentGuessesStopAtTheLock(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	var hashes atomic.Int32
	auth.SetPasswordCheck(s, func(hash, password string) (bool, error) {
		hashes.Add(1)
		time.Sleep(5 * time.Millisecond)
		return false, nil
	})
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() { _, _, _ = s.SignIn(context.Background(), home, "admin", "guess") })
	}
	wg.Wait()
	// The first slot-full may all pass the check before any failure is
	// counted; after the fifth failure nothing else gets a guess.
	if most := int32(4 + auth.HashSlots(s)); hashes.Load() > most {
		t.Fatalf("50 concurrent guesses of one name from one address: %d were checked, want at most %d", hashes.Load(), most)
	}
	t.Logf("%d of 50 concurrent guesses were checked", hashes.Load())
}
