package dashboard

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"
)

// DefaultMaxStreamsPerSession is Config.MaxStreamsPerSession's default:
// a person with a few tabs open, each with one stream.
const DefaultMaxStreamsPerSession = 8

// streamRetryAfter is the Retry-After of a refused stream; the page polls
// meanwhile (app.js).
const streamRetryAfter = 5 // seconds

// sessionStreams keeps the event streams open by each session: at most
// max of them, so that one session cannot take the hub's global cap from
// everyone else's pages, and a sign-out ends them all at once.
type sessionStreams struct {
	max  int
	mu   sync.Mutex
	open map[[32]byte]map[*sessionStream]struct{}
	// alive is what the last check of every open session found, at
	// checkedAt; checking is closed when the check under way ends.
	alive     map[[32]byte]bool
	checkedAt time.Time
	checking  chan struct{}
}

// sessionStream is one open stream of a session; ended is closed when
// its session signs out.
type sessionStream struct {
	ended chan struct{}
	once  sync.Once
}

func newSessionStreams(max int) *sessionStreams {
	return &sessionStreams{max: max, open: make(map[[32]byte]map[*sessionStream]struct{})}
}

// sessionKey keeps no session token in memory, only its hash.
func sessionKey(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// add opens a stream for the session of token, or reports false when
// it already has max open; each stream is closed with remove.
func (s *sessionStreams) add(token string) (*sessionStream, bool) {
	k := sessionKey(token)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.open[k]) >= s.max {
		return nil, false
	}
	if s.open[k] == nil {
		s.open[k] = make(map[*sessionStream]struct{})
	}
	st := &sessionStream{ended: make(chan struct{})}
	s.open[k][st] = struct{}{}
	return st, true
}

func (s *sessionStreams) remove(token string, st *sessionStream) {
	k := sessionKey(token)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.open[k], st)
	if len(s.open[k]) == 0 {
		delete(s.open, k)
	}
}

// end ends every stream of the session of token (it signed out).
func (s *sessionStreams) end(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for st := range s.open[sessionKey(token)] {
		st.once.Do(func() { close(st.ended) })
	}
}

// live reports whether the session of token may keep its stream, from one
// check of every session with a stream open on this server (check) at
// most every every: a hundred open dashboards cost one statement per
// interval, not a hundred. A check that fails ends nothing (a database
// that does not answer must not close every dashboard).
func (s *sessionStreams) live(ctx context.Context, token string, every time.Duration,
	check func(context.Context, [][32]byte) (map[[32]byte]bool, error)) bool {
	k := sessionKey(token)
	s.mu.Lock()
	for {
		if s.alive != nil && time.Since(s.checkedAt) < every {
			if alive, ok := s.alive[k]; ok {
				s.mu.Unlock()
				return alive
			}
		}
		if s.checking == nil {
			break
		}
		wait := s.checking
		s.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return true
		}
		s.mu.Lock()
		if s.alive == nil || time.Since(s.checkedAt) >= every {
			s.mu.Unlock()
			return true // that check failed
		}
		if alive, ok := s.alive[k]; ok {
			s.mu.Unlock()
			return alive
		}
		// Opened after that check began: check again.
	}
	keys := make([][32]byte, 0, len(s.open)+1)
	for key := range s.open {
		keys = append(keys, key)
	}
	if _, ok := s.open[k]; !ok {
		keys = append(keys, k)
	}
	done := make(chan struct{})
	s.checking = done
	s.mu.Unlock()

	alive, err := check(ctx, keys)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checking = nil
	close(done)
	if err != nil {
		s.alive = nil
		return true
	}
	s.alive = make(map[[32]byte]bool, len(keys))
	for _, key := range keys {
		s.alive[key] = alive[key]
	}
	s.checkedAt = time.Now()
	return s.alive[k]
}
