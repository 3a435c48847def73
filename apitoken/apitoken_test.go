package apitoken_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/db/dbtest"
)

type fixture struct {
	ctx   context.Context
	pool  *pgxpool.Pool
	store *apitoken.Store
}

func setup(t *testing.T) *fixture {
	t.Helper()
	pool := dbtest.NewPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return &fixture{ctx: ctx, pool: pool, store: apitoken.NewStore(pool)}
}

func (f *fixture) create(t *testing.T, name string, role apitoken.Role) (string, apitoken.Token) {
	t.Helper()
	secret, tok, err := f.store.Create(f.ctx, name, role)
	if err != nil {
		t.Fatalf("creating token %q: %v", name, err)
	}
	return secret, tok
}

func TestCreateAuthenticate(t *testing.T) {
	t.Parallel()
	f := setup(t)
	secret, tok := f.create(t, "ci@example.com", apitoken.RoleAdmin)
	if !strings.HasPrefix(secret, "lh_") || len(secret) != len("lh_")+43 {
		t.Fatalf("secret %q: want lh_ and 43 base64url characters", secret)
	}
	if tok.Name != "ci@example.com" || tok.Role != apitoken.RoleAdmin || tok.ID == 0 || tok.CreatedAt.IsZero() {
		t.Fatalf("created token = %+v", tok)
	}
	got, err := f.store.Authenticate(f.ctx, secret)
	if err != nil {
		t.Fatalf("authenticating: %v", err)
	}
	if got.ID != tok.ID || got.Role != apitoken.RoleAdmin {
		t.Fatalf("authenticated as %+v, want %+v", got, tok)
	}
	toks, err := f.store.List(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 1 || toks[0].LastUsedAt == nil {
		t.Fatalf("after use, list = %+v: want one token with last_used_at", toks)
	}

	other, _ := f.create(t, "pixel7", apitoken.RoleWorker)
	if other == secret {
		t.Fatal("two tokens got the same secret")
	}
	for _, bad := range []string{"", "lh_", secret + "x", strings.ToUpper(secret), strings.Repeat("a", 10_000)} {
		if _, err := f.store.Authenticate(f.ctx, bad); !errors.Is(err, apitoken.ErrInvalid) {
			t.Errorf("Authenticate(%.20q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestRevoke(t *testing.T) {
	t.Parallel()
	f := setup(t)
	secret, _ := f.create(t, "old", apitoken.RoleAdmin)
	tok, already, err := f.store.Revoke(f.ctx, "old")
	if err != nil || already || tok.RevokedAt == nil || tok.Role != apitoken.RoleAdmin {
		t.Fatalf("revoking = %+v, already %v, %v", tok, already, err)
	}
	if _, err := f.store.Authenticate(f.ctx, secret); !errors.Is(err, apitoken.ErrInvalid) {
		t.Fatalf("revoked token authenticated: %v", err)
	}
	// Idempotent: a second revoke succeeds and says it was revoked
	// already, with the first revoke's time.
	again, already, err := f.store.Revoke(f.ctx, "old")
	if err != nil || !already || again.RevokedAt == nil || !again.RevokedAt.Equal(*tok.RevokedAt) {
		t.Fatalf("revoking twice = %+v, already %v, %v; want the first revoke, already", again, already, err)
	}
	if _, _, err := f.store.Revoke(f.ctx, "never"); !errors.Is(err, apitoken.ErrNotFound) {
		t.Fatalf("revoking unknown = %v, want ErrNotFound", err)
	}
	toks, err := f.store.List(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 1 || toks[0].RevokedAt == nil {
		t.Fatalf("list = %+v: want the revoked token with revoked_at", toks)
	}
	// A revoked name stays taken, so logs that name it keep meaning one token.
	if _, _, err := f.store.Create(f.ctx, "old", apitoken.RoleAdmin); !errors.Is(err, apitoken.ErrNameTaken) {
		t.Fatalf("reusing a revoked name = %v, want ErrNameTaken", err)
	}
}

func TestSecretNeverStored(t *testing.T) {
	t.Parallel()
	f := setup(t)
	secret, _ := f.create(t, "admin", apitoken.RoleAdmin)
	envSecret := "env-secret-for-ci-0123456789"
	if err := f.store.Ensure(f.ctx, "env", apitoken.RoleAdmin, envSecret); err != nil {
		t.Fatal(err)
	}
	// Every column of every row, as text (bytea in hex, everything else as
	// written): neither secret, nor its random part, may appear.
	rows, err := f.pool.Query(f.ctx, `SELECT to_jsonb(t)::text FROM api_tokens t`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var row string
		if err := rows.Scan(&row); err != nil {
			t.Fatal(err)
		}
		n++
		for _, s := range []string{secret, strings.TrimPrefix(secret, "lh_"), envSecret} {
			if strings.Contains(row, s) {
				t.Fatalf("row %s holds the secret %q", row, s)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("scanned %d rows, want 2", n)
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, name := range []string{"", "has space", "slash/name", "ünïcode", strings.Repeat("a", 65), "nul\x00", "semi;colon"} {
		if _, _, err := f.store.Create(f.ctx, name, apitoken.RoleAdmin); !errors.Is(err, apitoken.ErrBadName) {
			t.Errorf("Create(%q) = %v, want ErrBadName", name, err)
		}
	}
	if _, _, err := f.store.Create(f.ctx, strings.Repeat("a", 64), apitoken.RoleWorker); err != nil {
		t.Errorf("a 64-character name was refused: %v", err)
	}
	if _, _, err := f.store.Create(f.ctx, "root", "superuser"); !errors.Is(err, apitoken.ErrBadRole) {
		t.Errorf("Create with role superuser = %v, want ErrBadRole", err)
	}
	f.create(t, "twice", apitoken.RoleAdmin)
	if _, _, err := f.store.Create(f.ctx, "twice", apitoken.RoleWorker); !errors.Is(err, apitoken.ErrNameTaken) {
		t.Errorf("duplicate name = %v, want ErrNameTaken", err)
	}
	for _, secret := range []string{"", "with space", "tab\tbed", strings.Repeat("x", 513)} {
		if err := f.store.Ensure(f.ctx, "env", apitoken.RoleAdmin, secret); !errors.Is(err, apitoken.ErrBadSecret) {
			t.Errorf("Ensure(%.20q) = %v, want ErrBadSecret", secret, err)
		}
	}
	if err := f.store.Ensure(f.ctx, "bad name", apitoken.RoleAdmin, "s3cret-value"); !errors.Is(err, apitoken.ErrBadName) {
		t.Errorf("Ensure with a bad name = %v, want ErrBadName", err)
	}
}

func TestEnsure(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for range 2 {
		if err := f.store.Ensure(f.ctx, "env", apitoken.RoleAdmin, "first-secret-0123456789"); err != nil {
			t.Fatalf("ensuring: %v", err)
		}
	}
	tok, err := f.store.Authenticate(f.ctx, "first-secret-0123456789")
	if err != nil || tok.Name != "env" || tok.Role != apitoken.RoleAdmin {
		t.Fatalf("authenticating the ensured token = %+v, %v", tok, err)
	}

	// Revoked by an operator, then the server restarts with the variable
	// still set: the environment wins.
	if _, _, err := f.store.Revoke(f.ctx, "env"); err != nil {
		t.Fatal(err)
	}
	if err := f.store.Ensure(f.ctx, "env", apitoken.RoleAdmin, "first-secret-0123456789"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Authenticate(f.ctx, "first-secret-0123456789"); err != nil {
		t.Fatalf("re-ensured token: %v", err)
	}

	// A changed LEASEHOLD_API_TOKEN replaces the old secret.
	if err := f.store.Ensure(f.ctx, "env", apitoken.RoleAdmin, "second-secret-0123456789"); err != nil {
		t.Fatalf("rotating: %v", err)
	}
	if _, err := f.store.Authenticate(f.ctx, "first-secret-0123456789"); !errors.Is(err, apitoken.ErrInvalid) {
		t.Fatalf("old secret after rotation = %v, want ErrInvalid", err)
	}
	if _, err := f.store.Authenticate(f.ctx, "second-secret-0123456789"); err != nil {
		t.Fatalf("new secret after rotation: %v", err)
	}
	toks, err := f.store.List(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 1 {
		t.Fatalf("list = %+v, want one env token", toks)
	}

	// The same secret under another name would make one secret two tokens.
	if err := f.store.Ensure(f.ctx, "env2", apitoken.RoleAdmin, "second-secret-0123456789"); err == nil {
		t.Fatal("one secret was registered under two names")
	}
}
