package main

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/auth"
	"github.com/leasehold/leasehold/db/dbtest"
	"github.com/leasehold/leasehold/role"
)

// `server user add|set-role|remove|list`: users sign in with their role,
// a role changed applies to a session at once, a removed user's sessions
// end, and the last admin can be neither removed nor demoted.
func TestUserCommands(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(stdin string, args ...string) (string, error) {
		var out bytes.Buffer
		err := userCmd(ctx, pool, &out, strings.NewReader(stdin), args)
		return out.String(), err
	}
	must := func(stdin string, args ...string) string {
		t.Helper()
		out, err := run(stdin, args...)
		if err != nil {
			t.Fatalf("user %v: %v", args, err)
		}
		return out
	}
	must("", "add", "--name", "ada", "--role", "admin", "--password", "correct horse")
	must("battery staple\n", "add", "--name", "vic", "--role", "viewer", "--password", "-")

	a := auth.New(pool, nil)
	client := netip.MustParseAddr("192.0.2.1")
	token, sess, err := a.SignIn(ctx, client, "vic", "battery staple")
	if err != nil || sess.Role != role.Viewer {
		t.Fatalf("vic signs in: %v, role %q", err, sess.Role)
	}
	must("", "set-role", "--name", "vic", "--role", "operator")
	if s, err := a.Session(ctx, token); err != nil || s.Role != role.Operator {
		t.Fatalf("vic's session after set-role: %v, role %q; want operator at once", err, s.Role)
	}
	if out := must("", "list"); !strings.Contains(out, "ada") || !strings.Contains(out, "operator") {
		t.Errorf("list:\n%s", out)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"add", "--name", "vic", "--role", "viewer", "--password", "whatever123"}, "exists"},
		{[]string{"add", "--name", "x y", "--role", "viewer", "--password", "whatever123"}, "username"},
		{[]string{"add", "--name", "eve", "--role", "root", "--password", "whatever123"}, `--role "root"`},
		{[]string{"add", "--name", "eve", "--role", "worker", "--password", "whatever123"}, `--role "worker"`},
		{[]string{"add", "--name", "eve", "--role", "viewer", "--password", "short"}, "8 to 1024"},
		{[]string{"add", "--role", "viewer", "--password", "whatever123"}, "--name is required"},
		{[]string{"set-role", "--name", "nobody", "--role", "viewer"}, "no user"},
		{[]string{"remove", "--name", "nobody"}, "no user"},
		{[]string{"set-role", "--name", "ada", "--role", "viewer"}, "last admin"},
		{[]string{"remove", "--name", "ada"}, "last admin"},
		{[]string{"rename"}, "unknown user command"},
	} {
		if _, err := run("", tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("user %v: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}

	must("", "remove", "--name", "vic")
	if _, err := a.Session(ctx, token); !errors.Is(err, auth.ErrNoSession) {
		t.Errorf("a removed user's session: %v, want ErrNoSession", err)
	}

	// Two admins demoting each other at once: one of them stays admin.
	must("", "add", "--name", "bob", "--role", "admin", "--password", "correct horse")
	for round := range 10 {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, name := range []string{"ada", "bob"} {
			wg.Go(func() { _, errs[i] = run("", "set-role", "--name", name, "--role", "operator") })
		}
		wg.Wait()
		var admins int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM users WHERE role = 'admin'`).Scan(&admins); err != nil {
			t.Fatal(err)
		}
		if admins != 1 || (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("round %d: %d admins left, errors %v; want 1 and one refusal", round, admins, errs)
		}
		must("", "set-role", "--name", "ada", "--role", "admin")
		must("", "set-role", "--name", "bob", "--role", "admin")
	}
}
