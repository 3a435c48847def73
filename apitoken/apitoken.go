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
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/audit"
	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/role"
)

// Role says which part of the API a token may use (package role).
type Role = role.Role

// The roles of a token.
const (
	RoleViewer   = role.Viewer
	RoleOperator = role.Operator
	RoleAdmin    = role.Admin
	// RoleWorker may use only the remote-worker endpoints.
	RoleWorker = role.Worker
)

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
	// ErrBadRole means the role is none of admin, operator, viewer, worker.
	ErrBadRole = errors.New(`token role must be "admin", "operator", "viewer" or "worker"`)
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

// Store keeps tokens in PostgreSQL. It can remember the tokens it
// checked (see Listening), so that a fleet of workers authenticating on
// every request costs the database nothing while it waits.
type Store struct {
	pool   *pgxpool.Pool
	q      *db.Queries
	logger *slog.Logger

	mu sync.Mutex
	// remembered holds the active tokens this process checked, by the
	// hash of their secret; used only while caching.
	remembered map[[sha256.Size]byte]Token
	// caching is whether this process hears every change of a token
	// (Listening): only then may it answer from remembered.
	caching bool
	// forgets counts the times remembered was cleared, so that a lookup
	// that began before a change cannot put back what it forgot.
	forgets uint64
	// touched is when this process last recorded each token's use, and
	// used the tokens used since, not yet recorded; lastTouch is when
	// this process last ran a touch statement.
	touched   map[int64]time.Time
	used      map[int64]bool
	lastTouch time.Time
}

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, q: db.New(pool), logger: slog.Default(),
		remembered: map[[sha256.Size]byte]Token{}, touched: map[int64]time.Time{}, used: map[int64]bool{}}
}

// SetLogger makes s log to logger (default slog.Default()).
func (s *Store) SetLogger(logger *slog.Logger) { s.logger = logger }

// Recording a token's use is bookkeeping: one statement records every
// token this process saw used, at most once every touchEvery (the first
// use after a quiet minute at once, later ones by Run), each token at
// most once every touchEvery; it is given up after touchTimeout, so that
// a database that refuses or stalls writes cannot fail or hold the
// request it authenticates.
const (
	touchEvery   = time.Minute
	touchTimeout = time.Second
)

// recheckEvery is how often Run asks the database which remembered tokens
// are still active: the bound on how long a revoke whose notification
// was lost (it cannot be, short of a bug: Listening forgets everything
// when the listener reconnects) would go unheard.
const recheckEvery = time.Minute

// maxRemembered bounds the memory of checked tokens; past it, the store
// forgets them all (a forgotten token only costs a lookup).
const maxRemembered = 100_000

// Listening tells s whether this process hears every change of a token
// now (queue.JobNotifier.WatchTokens calls it): listening true after its
// listener (re)connected and after each change, false once it stopped.
// Each call forgets every remembered token; only while listening does
// Authenticate remember and answer from memory. A Store never told
// (a CLI) looks every token up.
func (s *Store) Listening(listening bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.caching = listening
	s.forgetLocked()
}

func (s *Store) forgetLocked() {
	clear(s.remembered)
	s.forgets++
}

// Run records the use of tokens that Authenticate left to it and checks,
// once a minute, that the tokens it remembers are still active, until
// ctx ends. Without it, uses after the first of each minute are not
// recorded.
func (s *Store) Run(ctx context.Context) {
	tick := time.NewTicker(min(touchEvery, recheckEvery))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.touch(ctx, time.Now(), true)
		s.recheck(ctx)
	}
}

// recheck forgets the remembered tokens the database no longer holds as
// active. A check that began before a change (Listening) cannot put back
// what the change forgot: it only removes.
func (s *Store) recheck(ctx context.Context) {
	s.mu.Lock()
	hashes := make([][]byte, 0, len(s.remembered))
	for h := range s.remembered {
		hashes = append(hashes, h[:])
	}
	s.mu.Unlock()
	if len(hashes) == 0 {
		return
	}
	active, err := s.q.TokensActive(ctx, hashes)
	if err != nil {
		s.logger.Warn("checking remembered tokens", "err", err)
		s.mu.Lock()
		s.forgetLocked()
		s.mu.Unlock()
		return
	}
	keep := make(map[[sha256.Size]byte]bool, len(active))
	for _, h := range active {
		keep[[sha256.Size]byte(h)] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for h := range s.remembered {
		if !keep[h] {
			delete(s.remembered, h)
		}
	}
}

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
	var row db.ApiToken
	err = audit.Change(ctx, s.pool, s.q, func(q *db.Queries) (audit.Entry, error) {
		var err error
		row, err = q.TokenCreate(ctx, db.TokenCreateParams{Name: name, Role: string(role), TokenHash: hash(secret)})
		return audit.Entry{Action: "token.create", Target: "token:" + name, Detail: map[string]any{"role": role}}, err
	})
	if db.IsUniqueViolation(err, "api_tokens_name_key") {
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
	err := s.changing(ctx, func(q *db.Queries) error {
		return q.TokenUpsertByName(ctx, db.TokenUpsertByNameParams{Name: name, Role: string(role), TokenHash: hash(secret)})
	})
	if db.IsUniqueViolation(err, "api_tokens_token_hash_key") {
		return fmt.Errorf("registering token %q: the secret is already registered under another name", name)
	}
	if err != nil {
		return fmt.Errorf("registering token %q: %w", name, err)
	}
	return nil
}

// Authenticate returns the active token whose secret this is, and records
// that it was used (at most once a minute, to keep authentication cheap;
// see touch: failing to record it fails nothing). While listening (see
// Listening) it answers a token it checked before from memory.
func (s *Store) Authenticate(ctx context.Context, secret string) (Token, error) {
	if secret == "" || len(secret) > maxSecretLen {
		return Token{}, ErrInvalid
	}
	h := sha256.Sum256([]byte(secret))
	s.mu.Lock()
	tok, ok := s.remembered[h]
	if !s.caching {
		ok = false
	}
	forgets := s.forgets
	s.mu.Unlock()
	if !ok {
		row, err := s.q.TokenByHash(ctx, h[:])
		if errors.Is(err, pgx.ErrNoRows) {
			return Token{}, ErrInvalid
		}
		if err != nil {
			return Token{}, fmt.Errorf("looking up token: %w", err)
		}
		tok = toToken(row)
		s.mu.Lock()
		// Not when a change was heard since the lookup began: the row
		// read may be from before it.
		if s.caching && s.forgets == forgets {
			if len(s.remembered) >= maxRemembered {
				s.forgetLocked()
			}
			s.remembered[h] = tok
		}
		s.mu.Unlock()
	}
	s.used1(ctx, tok.ID)
	return tok, nil
}

// used1 notes that token id was used, and records it at once when this
// process has recorded no use for touchEvery.
func (s *Store) used1(ctx context.Context, id int64) {
	now := time.Now()
	s.mu.Lock()
	if last, ok := s.touched[id]; ok && now.Sub(last) < touchEvery {
		s.mu.Unlock()
		return
	}
	s.used[id] = true
	s.mu.Unlock()
	s.touch(ctx, now, false)
}

// touch records the use of the tokens noted since the last touch, in one
// statement, unless this process ran one within touchEvery (and not
// always). A failure is logged, never returned: a read-only database
// still serves reads.
func (s *Store) touch(ctx context.Context, now time.Time, always bool) {
	s.mu.Lock()
	if len(s.used) == 0 || (!always && now.Sub(s.lastTouch) < touchEvery) {
		s.mu.Unlock()
		return
	}
	ids := make([]int64, 0, len(s.used))
	for id := range s.used {
		ids = append(ids, id)
		s.touched[id] = now
	}
	clear(s.used)
	s.lastTouch = now
	for id, at := range s.touched {
		if now.Sub(at) >= touchEvery {
			delete(s.touched, id)
		}
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), touchTimeout)
	defer cancel()
	if err := s.q.TokensTouch(ctx, ids); err != nil {
		s.logger.Warn("recording token use", "tokens", len(ids), "err", err)
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
	var row db.ApiToken
	err = s.changing(ctx, func(q *db.Queries) (err error) {
		if row, err = q.TokenRevoke(ctx, name); err != nil {
			return err
		}
		return audit.Write(ctx, q, audit.Entry{Action: "token.revoke", Target: "token:" + name})
	})
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

// changing runs change in a transaction that also tells every server
// to forget the tokens it remembers (TokensChanged, delivered only if the
// change commits), and then forgets them in this process too.
func (s *Store) changing(ctx context.Context, change func(*db.Queries) error) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if err := change(q); err != nil {
			return err
		}
		return q.TokensChanged(ctx)
	})
	s.mu.Lock()
	s.forgetLocked()
	s.mu.Unlock()
	return err
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

func toToken(r db.ApiToken) Token {
	return Token{
		ID: r.ID, Name: r.Name, Role: Role(r.Role), CreatedAt: r.CreatedAt,
		LastUsedAt: r.LastUsedAt, RevokedAt: r.RevokedAt,
	}
}
