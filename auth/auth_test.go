package auth_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/auth"
	"github.com/leasehold/leasehold/db/dbtest"
)

func TestPasswordHashIsArgon2idAndSalted(t *testing.T) {
	t.Parallel()
	a, err := auth.HashPassword("correct horse")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := auth.HashPassword("correct horse")
	if !strings.HasPrefix(a, "$argon2id$v=19$m=19456,t=2,p=1$") || a == b {
		t.Fatalf("hashes %q and %q: want argon2id with a fresh salt each", a, b)
	}
}

var home = netip.MustParseAddr("192.0.2.1")

func TestSignInSessionsAndThrottling(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := auth.New(dbtest.NewPool(t), nil)
	if err := s.Bootstrap(ctx, ""); err != nil { // no users: a random password
		t.Fatal(err)
	}
	if _, _, err := s.SignIn(ctx, home, "admin", "guess-guess"); !errors.Is(err, auth.ErrBadCredentials) {
		t.Fatalf("random admin password guessed: %v", err)
	}
	if err := s.Bootstrap(ctx, "chosen-password"); err != nil {
		t.Fatal(err)
	}
	token, sess, err := s.SignIn(ctx, home, "admin", "chosen-password")
	if err != nil || sess.Username != "admin" || sess.CSRFToken == "" {
		t.Fatalf("sign-in: %v %+v", err, sess)
	}
	got, err := s.Session(ctx, token)
	if err != nil || got.UserID != sess.UserID || got.CSRFToken != sess.CSRFToken {
		t.Fatalf("session: %v %+v", err, got)
	}
	if _, err := s.Session(ctx, token+"x"); !errors.Is(err, auth.ErrNoSession) {
		t.Fatalf("forged token: %v", err)
	}
	if err := s.SignOut(ctx, token); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Session(ctx, token); !errors.Is(err, auth.ErrNoSession) {
		t.Fatalf("after sign-out: %v", err)
	}
	for i := range 5 {
		if _, _, err := s.SignIn(ctx, home, "admin", "wrong"); !errors.Is(err, auth.ErrBadCredentials) {
			t.Fatalf("failure %d: %v", i+1, err)
		}
	}
	var throttled *auth.ThrottledError
	if _, _, err := s.SignIn(ctx, home, "admin", "chosen-password"); !errors.As(err, &throttled) || throttled.RetryAfter <= 0 {
		t.Fatalf("sixth try with the right password: %v, want throttled", err)
	}
	// Setting the password (LEASEHOLD_ADMIN_PASSWORD at start) lifts the lock.
	if err := s.Bootstrap(ctx, "chosen-password"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SignIn(ctx, home, "admin", "chosen-password"); err != nil {
		t.Fatalf("after reset: %v", err)
	}
	if err := s.SetPassword(ctx, "admin", "short"); err == nil {
		t.Fatal("a 5-character password was accepted")
	}
}
