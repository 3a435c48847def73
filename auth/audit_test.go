package auth_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/audit"
	"github.com/leasehold/leasehold/auth"
	"github.com/leasehold/leasehold/db/dbtest"
	"github.com/leasehold/leasehold/role"
)

// Sign-ins and failed sign-ins are in the audit trail with the client's
// address; a failure names the account when there is one, and a name
// that is no account is kept nowhere (it may be a password typed into
// the wrong field). User changes name who made them.
func TestSignInsAndUserChangesAreAudited(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	s := auth.New(pool, nil)
	root := audit.NewContext(ctx, audit.Actor{Name: "cli:root"})
	if _, err := s.AddUser(root, "alice", role.Operator, "correct horse"); err != nil {
		t.Fatal(err)
	}
	client := netip.MustParseAddr("::ffff:198.51.100.4") // IPv4 mapped: kept as IPv4
	if _, _, err := s.SignIn(ctx, client, "alice", "wrong horse"); !errors.Is(err, auth.ErrBadCredentials) {
		t.Fatal(err)
	}
	if _, _, err := s.SignIn(ctx, client, "hunter2-typed-as-name", "whatever1"); !errors.Is(err, auth.ErrBadCredentials) {
		t.Fatal(err)
	}
	if _, _, err := s.SignIn(ctx, client, "alice", "correct horse"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRole(root, "alice", role.Viewer); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveUser(root, "nobody"); !errors.Is(err, auth.ErrNoUser) {
		t.Fatal(err)
	}

	rows, err := pool.Query(ctx, `SELECT actor, role, addr, action, target, detail::text FROM audit_log ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var actor, r, addr, action, target, detail string
		if err := rows.Scan(&actor, &r, &addr, &action, &target, &detail); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(actor+target+detail, "hunter2") {
			t.Errorf("a name that is no account was kept: %s %s %s", actor, target, detail)
		}
		got = append(got, strings.Join([]string{actor, r, addr, action, target}, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"cli:root   user.add user:alice",
		"user:alice  198.51.100.4 sign_in.failed user:alice",
		"unknown  198.51.100.4 sign_in.failed ",
		"user:alice operator 198.51.100.4 sign_in user:alice",
		"cli:root   user.set_role user:alice",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
