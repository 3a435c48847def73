package auth

import (
	"context"
	"time"
)

// Hooks for the tests of package auth_test.

// SetClock makes s's throttle use now instead of the database clock.
func SetClock(s *Service, now func() time.Time) { s.now = now }

// SetPasswordCheck replaces how s checks a password against its hash.
func SetPasswordCheck(s *Service, check func(hash, password string) (bool, error)) { s.check = check }

// HashSlots is how many hashes s runs at once.
func HashSlots(s *Service) int { return cap(s.slots) }

// Sweep forgets stale failures and expired sessions now.
func Sweep(s *Service) (int64, error) { return s.sweep(context.Background()) }
