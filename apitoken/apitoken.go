// Package apitoken issues and checks the bearer tokens of Leasehold's JSON
// API. A token's secret is shown once, when it is created; the database
// keeps only its SHA-256 hash, so a leaked database does not leak tokens.
package apitoken

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/db"
)

// Role says which part of the API a token may use.
type Role string

// The roles of a token.
const (
	// RoleAdmin may use the job, stats and artifact endpoints.
	RoleAdmin Role = "admin"
	// RoleWorker may use only the remote-worker endpoints.
	RoleWorker Role = "worker"
)

// Valid reports whether r names a role.
func (r Role) Valid() bool { return r == RoleAdmin || r == RoleWorker }

// SecretPrefix starts every generated secret, so that a leaked one is easy
// to recognise (secret scanners, logs).
const SecretPrefix = "lh_"

// maxSecretLen bounds what Authenticate hashes; generated secrets are 46
// bytes.
const maxSecretLen = 512

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_.@-]{1,64}$`)

// Errors callers branch on.
var (
	// ErrInvalid means the secret names no active token.
	ErrInvalid = errors.New("invalid or revoked token")
	// ErrNotFound means no token has that name.
	ErrNotFound = errors.New("no token with that name")
	// ErrNameTaken means a token (active or revoked) already has that name.
	ErrNameTaken = errors.New("token name already taken")
	// ErrBadName means the name does not match ^[A-Za-z0-9_.@-]{1,64}$.
	ErrBadName = errors.New("token name must be 1 to 64 letters, digits or _.@-")
	// ErrBadRole means the role is neither admin nor worker.
	ErrBadRole = errors.New(`token role must be "admin" or "worker"`)
	// ErrBadSecret means a secret given to Ensure could never be sent as a
	// bearer token.
	ErrBadSecret = errors.New("token secret must be 1 to 512 printable characters without spaces")
)

// Token is a token's record; the secret is not part of it.
type Token struct {
	ID         int64
	Name       string
	Role       Role
	CreatedAt  time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
}

// Store keeps tokens in PostgreSQL.
type Store struct {
	q      *db.Queries
	logger *slog.Logger
	// touched is when this process last tried to record each token's use
	// (token ID -> time.Time), so that a database refusing writes is not
	// asked on every request.
	touched sync.Map
}

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store {
	return &Store{q: db.New(pool), logger: slog.Default()}
}

// SetLogger makes s log to logger (default slog.Default()).
func (s *Store) SetLogger(logger *slog.Logger) { s.logger = logger }

// Recording a token's use is bookkeeping: it is tried at most once every
// touchEvery per token and process, and given up after touchTimeout, so
// that a database that refuses or stalls writes cannot fail or hold the
// request it authenticates.
const (
	touchEvery   = time.Minute
	touchTimeout = time.Second
)

// Create issues a new token and returns its secret, which is not kept and
// cannot be shown again.
func (s *Store) Create(ctx context.Context, name string, role Role) (secret string, tok Token, err error) {
	if err := check(name, role); err != nil {
		return "", Token{}, err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", Token{}, fmt.Errorf("generating token: %w", err)
	}
	secret = SecretPrefix + base64.RawURLEncoding.EncodeToString(raw)
	row, err := s.q.TokenCreate(ctx, db.TokenCreateParams{Name: name, Role: string(role), TokenHash: hash(secret)})
	if isUniqueViolation(err, "api_tokens_name_key") {
		return "", Token{}, fmt.Errorf("%w: %q", ErrNameTaken, name)
	}
	if err != nil {
		return "", Token{}, fmt.Errorf("creating token: %w", err)
	}
	return secret, toToken(row), nil
}

// Ensure registers a secret chosen outside Leasehold (LEASEHOLD_API_TOKEN)
// under name. It is idempotent; when name had another secret, that one
// stops working, and a revoked name is brought back.
func (s *Store) Ensure(ctx context.Context, name string, role Role, secret string) error {
	if err := check(name, role); err != nil {
		return err
	}
	if secret == "" || len(secret) > maxSecretLen || strings.ContainsFunc(secret, notPrintable) {
		return ErrBadSecret
	}
	err := s.q.TokenUpsertByName(ctx, db.TokenUpsertByNameParams{Name: name, Role: string(role), TokenHash: hash(secret)})
	if isUniqueViolation(err, "api_tokens_token_hash_key") {
		return fmt.Errorf("registering token %q: the secret is already registered under another name", name)
	}
	if err != nil {
		return fmt.Errorf("registering token %q: %w", name, err)
	}
	return nil
}

// Authenticate returns the active token whose secret this is, and records
// that it was used (at most once a minute, to keep authentication cheap;
// see touch: failing to record it fails nothing).
func (s *Store) Authenticate(ctx context.Context, secret string) (Token, error) {
	if secret == "" || len(secret) > maxSecretLen {
		return Token{}, ErrInvalid
	}
	row, err := s.q.TokenByHash(ctx, hash(secret))
	if errors.Is(err, pgx.ErrNoRows) {
		return Token{}, ErrInvalid
	}
	if err != nil {
		return Token{}, fmt.Errorf("looking up token: %w", err)
	}
	s.touch(ctx, row.ID)
	return toToken(row), nil
}

// touch records that token id was used, unless this process tried within
// touchEvery. A failure is logged, never returned: a read-only database
// still serves reads.
func (s *Store) touch(ctx context.Context, id int64) {
	now := time.Now()
	if last, ok := s.touched.Load(id); ok && now.Sub(last.(time.Time)) < touchEvery {
		return
	}
	s.touched.Store(id, now)
	ctx, cancel := context.WithTimeout(ctx, touchTimeout)
	defer cancel()
	if err := s.q.TokenTouch(ctx, id); err != nil {
		s.logger.Warn("recording token use", "token_id", id, "err", err)
	}
}

// List returns every token, revoked ones included, oldest first.
func (s *Store) List(ctx context.Context) ([]Token, error) {
	rows, err := s.q.TokenList(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing tokens: %w", err)
	}
	toks := make([]Token, len(rows))
	for i, r := range rows {
		toks[i] = toToken(r)
	}
	return toks, nil
}

// Revoke ends the token called name; requests with it fail from now on.
// The name stays taken, so that logs keep meaning one token. It is
// idempotent: revoking a token revoked already changes nothing and
// answers its record with already true, so that a revoke that was cut
// short (its leases not yet ended) can be run again. ErrNotFound means no
// token, active or revoked, has that name.
//
// It returns only once the claims in flight with the token have
// committed (they hold its row: queue's JobClaim), so what they took is
// visible to the caller's next statement, and no claim after it takes a
// job.
func (s *Store) Revoke(ctx context.Context, name string) (tok Token, already bool, err error) {
	row, err := s.q.TokenRevoke(ctx, name)
	if errors.Is(err, pgx.ErrNoRows) {
		row, err = s.q.TokenByName(ctx, name)
		if errors.Is(err, pgx.ErrNoRows) {
			return Token{}, false, fmt.Errorf("%w: %q", ErrNotFound, name)
		}
		if err != nil {
			return Token{}, false, fmt.Errorf("revoking token: %w", err)
		}
		if row.RevokedAt == nil {
			// Brought back (TokenUpsertByName) between the two
			// statements: it is active, and this revoke has not ended it.
			return s.Revoke(ctx, name)
		}
		return toToken(row), true, nil
	}
	if err != nil {
		return Token{}, false, fmt.Errorf("revoking token: %w", err)
	}
	return toToken(row), false, nil
}

func check(name string, role Role) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("%w (got %q)", ErrBadName, name)
	}
	if !role.Valid() {
		return fmt.Errorf("%w (got %q)", ErrBadRole, role)
	}
	return nil
}

func hash(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

func notPrintable(r rune) bool { return r <= ' ' || r == 0x7f }

func isUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == constraint
}

func toToken(r db.ApiToken) Token {
	return Token{
		ID: r.ID, Name: r.Name, Role: Role(r.Role), CreatedAt: r.CreatedAt,
		LastUsedAt: r.LastUsedAt, RevokedAt: r.RevokedAt,
	}
}
