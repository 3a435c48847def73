package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/audit"
	"github.com/leasehold/leasehold/db"
)

// ErrBusy means every password-hashing slot stayed taken for the whole
// short wait: the server is signing too many people in at once, and the
// caller should try again in a second.
var ErrBusy = errors.New("too many sign-ins at once")

// ThrottledError means sign-ins of this name from this address, or of
// any name from this address, are refused for a while after repeated
// failures. It says nothing about whether the name exists.
type ThrottledError struct{ RetryAfter time.Duration }

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("too many failed sign-ins: try again in %s", e.RetryAfter)
}

// hashWait is how long a sign-in waits for a hashing slot before ErrBusy:
// long enough to ride out a burst, short enough that a flood never piles
// up waiting requests.
const hashWait = time.Second

// sweepEvery is how often, at most, a server forgets stale failures and
// expired sessions (only while failures are being recorded).
const sweepEvery = time.Minute

// hashSlots bounds concurrent argon2id hashes: each one holds 19 MiB, and
// more of them than cores finish no sooner.
func hashSlots() int { return 2 * runtime.NumCPU() }

// throttleKey is what failed sign-ins are counted by.
type throttleKey struct {
	name    []byte       // nameHash of the name as typed
	address netip.Prefix // addressKey of the client
	client  netip.Addr   // the client, for the audit trail
}

func newThrottleKey(client netip.Addr, username string) throttleKey {
	return throttleKey{name: nameHash(username), address: addressKey(client), client: client}
}

// addrText is a client address as the audit trail keeps it: "" for
// none.
func addrText(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.Unmap().String()
}

// nameHash is the SHA-256 of the name as typed, trimmed and lower-cased,
// so that "Admin " and "admin" share a count; names that are not accounts
// are counted exactly like those that are.
func nameHash(username string) []byte {
	h := sha256.Sum256([]byte(strings.ToLower(strings.TrimSpace(username))))
	return h[:]
}

// addressKey is the client address failures are counted by: an IPv4
// address, or the /64 of an IPv6 one (one subscriber's usual share). An
// address that could not be read counts as "::".
func addressKey(client netip.Addr) netip.Prefix {
	client = client.Unmap().WithZone("")
	switch {
	case client.Is4():
		return netip.PrefixFrom(client, 32)
	case client.Is6():
		p, _ := client.Prefix(64)
		return p
	default:
		return netip.PrefixFrom(netip.IPv6Unspecified(), 128)
	}
}

// checkLocks returns a ThrottledError while key's name or address is
// locked.
func (s *Service) checkLocks(ctx context.Context, key throttleKey) error {
	locks, err := s.q.LoginLocks(ctx, db.LoginLocksParams{Now: s.clock(), NameHash: key.name, Address: key.address})
	if err != nil {
		return fmt.Errorf("reading sign-in locks: %w", err)
	}
	if left := max(locks.NameLockedS, locks.AddressLockedS); left > 0 {
		return &ThrottledError{RetryAfter: time.Duration(math.Ceil(left)) * time.Second}
	}
	return nil
}

// verify checks password against user's hash (the dummy hash when user
// is nil), holding a hashing slot, and counts a failure before it lets
// the slot go. With the slot held, key's locks are checked again: a
// sign-in that waited for a slot must not get past a lock set meanwhile,
// so a burst gets at most a slot-full of guesses past the fifth.
func (s *Service) verify(ctx context.Context, key throttleKey, user *db.UserByNameRow, password string) error {
	if err := s.takeSlot(ctx); err != nil {
		return err
	}
	defer func() { <-s.slots }()
	if err := s.checkLocks(ctx, key); err != nil {
		return err
	}
	hash := s.dummyHash
	if user != nil {
		hash = user.PasswordHash
	}
	ok, err := s.check(hash, password)
	if err != nil {
		return err
	}
	if ok && user != nil && len(password) <= 1024 {
		return nil
	}
	n, err := s.recordFailure(ctx, key, user)
	if err != nil {
		return err
	}
	// A name that is no account is not logged: it is sometimes a
	// password typed into the wrong field.
	attrs := []any{"client", key.address.String(), "failures", n.NameFailures, "address_failures", n.AddressFailures}
	if user != nil {
		attrs = append(attrs, "username", user.Username)
	}
	s.logger.Warn("failed sign-in", attrs...)
	return ErrBadCredentials
}

// takeSlot takes a hashing slot, waiting at most hashWait.
func (s *Service) takeSlot(ctx context.Context) error {
	select {
	case s.slots <- struct{}{}:
		return nil
	default:
	}
	wait := time.NewTimer(hashWait)
	defer wait.Stop()
	select {
	case s.slots <- struct{}{}:
		return nil
	case <-wait.C:
		return ErrBusy
	case <-ctx.Done():
		return ctx.Err()
	}
}

// recordFailure counts a failed sign-in of key and, now and then, has
// stale counts forgotten.
//
// The count and the failure's audit row commit together. The row names
// the account when there is one; a name that is no account is not kept
// (it is sometimes a password typed into the wrong field).
func (s *Service) recordFailure(ctx context.Context, key throttleKey, user *db.UserByNameRow) (db.LoginFailureRecordRow, error) {
	var n db.LoginFailureRecordRow
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		var err error
		n, err = q.LoginFailureRecord(ctx, db.LoginFailureRecordParams{Now: s.clock(), NameHash: key.name, Address: key.address})
		if err != nil {
			return fmt.Errorf("counting failed sign-in: %w", err)
		}
		who, target := audit.Actor{Name: "unknown", Addr: addrText(key.client)}, ""
		if user != nil {
			who.Name, target = "user:"+user.Username, "user:"+user.Username
		}
		return audit.WriteAs(ctx, q, who, audit.Entry{Action: "sign_in.failed", Target: target,
			Detail: map[string]any{"failures": n.NameFailures, "address_failures": n.AddressFailures}})
	})
	if err != nil {
		return n, err
	}
	if last := s.lastSweep.Load(); time.Since(time.Unix(0, last)) >= sweepEvery &&
		s.lastSweep.CompareAndSwap(last, time.Now().UnixNano()) {
		go func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if _, err := s.sweep(ctx); err != nil {
				s.logger.Warn("forgetting stale sign-in failures", "err", err)
			}
		}()
	}
	return n, nil
}

// sweep deletes failure counts that can no longer refuse anyone and
// expired sessions, so that neither table grows without bound.
func (s *Service) sweep(ctx context.Context) (int64, error) {
	n, err := s.q.LoginFailureDeleteStale(ctx, s.clock())
	if err != nil {
		return 0, fmt.Errorf("deleting stale sign-in failures: %w", err)
	}
	if err := s.q.SessionDeleteExpired(ctx); err != nil {
		return n, fmt.Errorf("deleting expired sessions: %w", err)
	}
	return n, nil
}

// clock is the time the throttle's queries use: nil, the database's,
// except in tests.
func (s *Service) clock() *time.Time {
	if s.now == nil {
		return nil
	}
	t := s.now()
	return &t
}
