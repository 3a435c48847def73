// Package auth signs people in to the dashboard: users with argon2id
// password hashes (a bounded number at a time), failed sign-ins throttled
// per (name, client address) and per address, and sessions whose tokens
// are stored only as hashes.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/audit"
	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/role"
)

// SessionTTL is how long a session lives without use.
const SessionTTL = 12 * time.Hour

// Errors callers branch on.
var (
	// ErrBadCredentials is an unknown user or a wrong password; which one
	// is not told.
	ErrBadCredentials = errors.New("wrong username or password")
	// ErrNoSession means the token names no live session.
	ErrNoSession = errors.New("no such session")
	// ErrNoUser means no user has that name.
	ErrNoUser = errors.New("no user with that name")
	// ErrUserExists means a user already has that name.
	ErrUserExists = errors.New("a user with that name exists")
	// ErrLastAdmin refuses to remove or demote the only admin: nobody
	// could manage users and tokens any more.
	ErrLastAdmin = errors.New("the last admin cannot be removed or given another role")
	// ErrBadUsername means a name no user may have.
	ErrBadUsername = errors.New("a username is 1 to 64 letters, digits or _.@-")
	// ErrBadPassword means a password too short or too long.
	ErrBadPassword = errors.New("the password must be 8 to 1024 characters")
	// ErrBadRole means a role a person cannot have.
	ErrBadRole = errors.New(`a user's role must be "viewer", "operator" or "admin"`)
)

var usernamePattern = regexp.MustCompile(`^[A-Za-z0-9_.@-]{1,64}$`)

// Session is a signed-in user's session.
type Session struct {
	UserID    int64
	Username  string
	Role      role.Role
	CSRFToken string
	ExpiresAt time.Time
}

// Service signs people in and out.
type Service struct {
	pool   *pgxpool.Pool
	q      *db.Queries
	logger *slog.Logger
	// dummyHash is checked for unknown users, so that an answer's timing
	// does not tell whether a username exists.
	dummyHash string
	// slots holds one token per password hash in progress.
	slots chan struct{}
	// check is checkPassword; tests wrap it to watch the hashes.
	check func(hash, password string) (bool, error)
	// now is the throttle's clock; nil uses the database's.
	now func() time.Time
	// lastSweep is when stale failures were last deleted (UnixNano).
	lastSweep atomic.Int64
}

// New returns a Service on pool's database.
func New(pool *pgxpool.Pool, logger *slog.Logger) *Service {
	if logger == nil {
		logger = slog.Default()
	}
	dummy, _ := HashPassword(RandomPassword())
	return &Service{
		pool: pool, q: db.New(pool), logger: logger, dummyHash: dummy,
		slots: make(chan struct{}, hashSlots()), check: checkPassword,
	}
}

// Bootstrap makes sure someone can sign in: with password set (from
// LEASEHOLD_ADMIN_PASSWORD) it becomes the admin user's password; with
// none and no user at all, a random password is set and logged once.
func (s *Service) Bootstrap(ctx context.Context, password string) error {
	if password == "" {
		n, err := s.q.UserCount(ctx)
		if err != nil {
			return fmt.Errorf("counting users: %w", err)
		}
		if n > 0 {
			return nil
		}
		password = RandomPassword()
		s.logger.Warn("created the dashboard user admin with a random password, shown only this once; set LEASEHOLD_ADMIN_PASSWORD to choose it",
			"username", "admin", "password", password)
	}
	return s.SetPassword(ctx, "admin", password)
}

// SetPassword changes a user's password, creating the user as an admin
// if there is none (the bootstrap's admin user); an existing user keeps
// its role.
func (s *Service) SetPassword(ctx context.Context, username, password string) error {
	hash, err := checkUser(username, password)
	if err != nil {
		return err
	}
	return audit.Change(ctx, s.pool, s.q, func(q *db.Queries) (audit.Entry, error) {
		if err := q.UserUpsertPassword(ctx, db.UserUpsertPasswordParams{Username: username, PasswordHash: hash, Role: string(role.Admin)}); err != nil {
			return audit.Entry{}, fmt.Errorf("setting password: %w", err)
		}
		// A new password lifts the name's locks, at every address.
		if err := q.LoginFailureClearName(ctx, nameHash(username)); err != nil {
			return audit.Entry{}, fmt.Errorf("lifting sign-in locks: %w", err)
		}
		return audit.Entry{Action: "user.set_password", Target: "user:" + username}, nil
	})
}

// checkUser checks a new user's name and password, and hashes the
// password.
func checkUser(username, password string) (hash string, err error) {
	if !usernamePattern.MatchString(username) {
		return "", fmt.Errorf("%w (got %q)", ErrBadUsername, username)
	}
	if len(password) < 8 || len(password) > 1024 {
		return "", ErrBadPassword
	}
	return HashPassword(password)
}

// User is a dashboard account, without its password.
type User struct {
	ID          int64
	Username    string
	Role        role.Role
	CreatedAt   time.Time
	LastLoginAt *time.Time
}

// AddUser creates a user with role r.
func (s *Service) AddUser(ctx context.Context, username string, r role.Role, password string) (User, error) {
	if !r.ForPerson() {
		return User{}, fmt.Errorf("%w (got %q)", ErrBadRole, r)
	}
	hash, err := checkUser(username, password)
	if err != nil {
		return User{}, err
	}
	var u db.UserAddRow
	err = audit.Change(ctx, s.pool, s.q, func(q *db.Queries) (audit.Entry, error) {
		var err error
		u, err = q.UserAdd(ctx, db.UserAddParams{Username: username, PasswordHash: hash, Role: string(r)})
		if db.IsUniqueViolation(err, "users_username_key") {
			return audit.Entry{}, fmt.Errorf("%w: %q", ErrUserExists, username)
		}
		if err != nil {
			return audit.Entry{}, fmt.Errorf("adding user: %w", err)
		}
		return audit.Entry{Action: "user.add", Target: "user:" + username, Detail: map[string]any{"role": r}}, nil
	})
	if err != nil {
		return User{}, err
	}
	return User{ID: u.ID, Username: u.Username, Role: role.Role(u.Role), CreatedAt: u.CreatedAt, LastLoginAt: u.LastLoginAt}, nil
}

// SetRole gives a user role r; the last admin keeps its role
// (ErrLastAdmin). The user's sessions have the new role at once.
func (s *Service) SetRole(ctx context.Context, username string, r role.Role) error {
	if !r.ForPerson() {
		return fmt.Errorf("%w (got %q)", ErrBadRole, r)
	}
	return audit.Change(ctx, s.pool, s.q, func(q *db.Queries) (audit.Entry, error) {
		res, err := q.UserSetRole(ctx, db.UserSetRoleParams{Username: username, Role: string(r)})
		switch {
		case err != nil:
			return audit.Entry{}, fmt.Errorf("changing role: %w", err)
		case !res.Found:
			return audit.Entry{}, fmt.Errorf("%w: %q", ErrNoUser, username)
		case !res.Changed:
			return audit.Entry{}, ErrLastAdmin
		}
		return audit.Entry{Action: "user.set_role", Target: "user:" + username, Detail: map[string]any{"role": r}}, nil
	})
}

// RemoveUser removes a user and signs it out everywhere; the last admin
// stays (ErrLastAdmin).
func (s *Service) RemoveUser(ctx context.Context, username string) error {
	return audit.Change(ctx, s.pool, s.q, func(q *db.Queries) (audit.Entry, error) {
		res, err := q.UserRemove(ctx, username)
		switch {
		case err != nil:
			return audit.Entry{}, fmt.Errorf("removing user: %w", err)
		case !res.Found:
			return audit.Entry{}, fmt.Errorf("%w: %q", ErrNoUser, username)
		case !res.Removed:
			return audit.Entry{}, ErrLastAdmin
		}
		return audit.Entry{Action: "user.remove", Target: "user:" + username}, nil
	})
}

// Users lists every user by name.
func (s *Service) Users(ctx context.Context) ([]User, error) {
	rows, err := s.q.UserList(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing users: %w", err)
	}
	users := make([]User, len(rows))
	for i, u := range rows {
		users[i] = User{ID: u.ID, Username: u.Username, Role: role.Role(u.Role), CreatedAt: u.CreatedAt, LastLoginAt: u.LastLoginAt}
	}
	return users, nil
}

// SignIn checks a username and password from client's address and opens
// a new session; it returns the session's token for the cookie.
//
// Names that are no account go through the very same steps as those that
// are (a lock check, a hash against a dummy, a counted failure), so the
// answer and its timing do not tell them apart. Failures are counted per
// (name as typed, client address): from the fifth in a row, that name is
// refused from that address for 2^(n-5) s, at most 15 minutes, and
// nobody elsewhere is locked out by them. An address with 100 failures in
// 15 minutes, whatever the names, is refused until those 15 minutes end.
// At most 2 × CPUs hashes run at once; beyond that a sign-in waits a
// moment, then gets ErrBusy. A lock is checked before the hash waits for
// its slot and again once it has it.
func (s *Service) SignIn(ctx context.Context, client netip.Addr, username, password string) (string, Session, error) {
	key := newThrottleKey(client, username)
	if err := s.checkLocks(ctx, key); err != nil {
		return "", Session{}, err
	}
	var user *db.UserByNameRow
	if usernamePattern.MatchString(username) {
		u, err := s.q.UserByName(ctx, username)
		switch {
		case err == nil:
			user = &u
		case !errors.Is(err, pgx.ErrNoRows):
			return "", Session{}, fmt.Errorf("reading user: %w", err)
		}
	}
	if err := s.verify(ctx, key, user, password); err != nil {
		return "", Session{}, err
	}
	token, csrf := randomToken(), randomToken()
	// The session, the cleared failures and the audit row of the sign-in
	// commit together.
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if err := q.LoginFailureClear(ctx, db.LoginFailureClearParams{NameHash: key.name, Address: key.address}); err != nil {
			return fmt.Errorf("clearing failed sign-ins: %w", err)
		}
		if err := q.UserLoginSucceeded(ctx, user.ID); err != nil {
			return fmt.Errorf("recording sign-in: %w", err)
		}
		err := q.SessionCreate(ctx, db.SessionCreateParams{
			TokenHash: hashToken(token), UserID: user.ID, CsrfToken: csrf, TtlS: int32(SessionTTL / time.Second),
		})
		if err != nil {
			return fmt.Errorf("creating session: %w", err)
		}
		who := audit.Actor{Name: "user:" + user.Username, Role: role.Role(user.Role), Addr: addrText(client)}
		return audit.WriteAs(ctx, q, who, audit.Entry{Action: "sign_in", Target: "user:" + user.Username})
	})
	if err != nil {
		return "", Session{}, err
	}
	return token, Session{UserID: user.ID, Username: user.Username, Role: role.Role(user.Role), CSRFToken: csrf}, nil
}

// sessionTouchTimeout bounds the renewal of a session's expiry.
const sessionTouchTimeout = time.Second

// Session returns the live session of token, renewing its expiry.
func (s *Service) Session(ctx context.Context, token string) (Session, error) {
	if token == "" || len(token) > 128 {
		return Session{}, ErrNoSession
	}
	h := hashToken(token)
	row, err := s.q.SessionGet(ctx, h)
	if errors.Is(err, pgx.ErrNoRows) {
		return Session{}, ErrNoSession
	}
	if err != nil {
		return Session{}, fmt.Errorf("reading session: %w", err)
	}
	// Renewed at most once a minute: pages poll every few seconds, and
	// a read should stay a read.
	// A database that refuses or stalls writes must not fail or hold the
	// page: the renewal is given up after sessionTouchTimeout.
	if row.TouchDue {
		tctx, cancel := context.WithTimeout(ctx, sessionTouchTimeout)
		err := s.q.SessionTouch(tctx, db.SessionTouchParams{TokenHash: h, TtlS: int32(SessionTTL / time.Second)})
		cancel()
		if err != nil {
			s.logger.Warn("renewing session", "err", err)
		}
	}
	return Session{UserID: row.UserID, Username: row.Username, Role: role.Role(row.Role), CSRFToken: row.CsrfToken, ExpiresAt: row.ExpiresAt}, nil
}

// SessionsAlive reports which of the sessions whose tokens hash (SHA-256)
// to hashes are live, renewing those in use as Session does: one
// statement for all of them (a server's open event streams).
func (s *Service) SessionsAlive(ctx context.Context, hashes [][sha256.Size]byte) (map[[sha256.Size]byte]bool, error) {
	in := make([][]byte, len(hashes))
	for i := range hashes {
		in[i] = hashes[i][:]
	}
	rows, err := s.q.SessionsAlive(ctx, db.SessionsAliveParams{TokenHashes: in, TtlS: int32(SessionTTL / time.Second)})
	if err != nil {
		return nil, fmt.Errorf("reading sessions: %w", err)
	}
	alive := make(map[[sha256.Size]byte]bool, len(rows))
	for _, h := range rows {
		if len(h) == sha256.Size {
			alive[[sha256.Size]byte(h)] = true
		}
	}
	return alive, nil
}

// SignOut ends the session of token.
func (s *Service) SignOut(ctx context.Context, token string) error {
	if err := s.q.SessionDelete(ctx, hashToken(token)); err != nil {
		return fmt.Errorf("ending session: %w", err)
	}
	return nil
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func hashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}
